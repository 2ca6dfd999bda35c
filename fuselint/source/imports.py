"""A file's import aliases, so rules see `torch.nn.functional.gelu` however it is spelled.

`import torch as t`, `from torch import nn`, `import torch.nn.functional as F` and
`from torch.nn.functional import gelu` all bind local names to qualified names; this
table resolves a Name/Attribute chain through them. It is built from the module's
imports only (module level and inside functions), which is cheap and enough for model
code: rebinding `F` to something else is rare and would be confusing anyway.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from fuselint.source.nodes import remembered

# Names under which the same functions live: a call resolved to any key is reported
# under its value, so rules list each function once.
CANONICAL_PREFIXES = (
    ("torch.nn.functional.", "torch.nn.functional."),
    ("torch.functional.", "torch."),
    ("torch.special.", "torch.special."),
)


def iter_statements(tree: ast.AST):
    """Every statement under `tree`, nested bodies included, without visiting expressions.

    Imports, classes and functions are statements, so finding them this way skips the
    expression nodes that make up most of a tree (a full `ast.walk` is several times slower).
    A module's, asked for by several checks of one file, is made once (`nodes.remembered`).
    """
    if isinstance(tree, ast.Module):
        return remembered("statements", tree, _statements)
    return _statements(tree)


def module_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """A module's own statements, those under a module-level `if`/`try` included (not functions'
    or classes' bodies)."""
    stack = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
            nested = [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", ())]
            for handler in getattr(stmt, "handlers", ()):
                nested.extend(handler.body)
            stack.extend(reversed(nested))


def _statements(tree: ast.AST):
    stack = list(getattr(tree, "body", ()))
    while stack:
        stmt = stack.pop()
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, name, ()))
        for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
            stack.extend(holder.body)


@dataclass
class ImportTable:
    aliases: dict[str, str] = field(default_factory=dict)
    # The file's module-level functions by name: a call of one whose every `return` hands back a
    # tensor it builds makes a tensor (`self.betas = betas_for_alpha_bar(n)`); dataflow decides
    # that on first use and keeps its answer in `builds`.
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    builds: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, tree: ast.Module) -> ImportTable:
        table = cls()
        table.functions = {n.name: n for n in getattr(tree, "body", ()) if isinstance(n, ast.FunctionDef)}
        for node in iter_statements(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        table.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        table.aliases.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        table.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        return table

    def qualname(self, expr: ast.AST) -> str | None:
        """`F.gelu` -> "torch.nn.functional.gelu"; None when the chain is not rooted in an import."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in self.aliases:
            return None
        parts.append(self.aliases[expr.id])
        return ".".join(reversed(parts))

    def local_name_for(self, qualified: str) -> str | None:
        """A spelling of `qualified` that this file already has (e.g. "F" for torch.nn.functional)."""
        best: str | None = None
        for local, target in self.aliases.items():
            if qualified == target:
                return local
            if qualified.startswith(target + "."):
                candidate = local + qualified[len(target) :]
                if best is None or len(candidate) < len(best):
                    best = candidate
        return best

    def imports_torch(self) -> bool:
        return any(t == "torch" or t.startswith("torch.") for t in self.aliases.values())
