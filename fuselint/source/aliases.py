"""Type aliases of parameters' annotations, and the members of a union that `isinstance` narrows.

torch_geometric writes `edge_index: Adj` with `Adj = Union[Tensor, SparseTensor]` in
`torch_geometric/typing.py` (also `OptTensor = Optional[Tensor]`, `PairTensor = Tuple[Tensor,
Tensor]`). An annotation that names an alias says what the alias's value says: the dataflow reads
`Adj` as it reads `Union[Tensor, SparseTensor]` written out.

- `type_aliases` finds a module's aliases: a module-level name assigned once to a typing
  subscript (`Union[...]`, `Optional[...]`, `Tuple[...]`, ...) or to `A | B`, whose text names a
  tensor (the only aliases whose kinds matter to the dataflow).
- An alias of another file of the tree comes to the file that imports it as a root
  (`imported_aliases`, like `reach.inherited_modules`' `^Class` roots): `=Adj` with the alias's text.
- `union_members` lists what a union holds (`Tensor`, `SparseTensor`), by the last part of each
  type's name: `FunctionFlow` narrows a union parameter by `isinstance` tests of those names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

from fuselint.source.imports import module_statements
from fuselint.source.nodes import last_name, made_once

# A root named "=Name": `Name` is imported from another file of the tree, where it is a type
# alias; the root's `via` holds the alias's text.
ALIAS_ROOT = "="
_TYPING_FORMS = frozenset(
    {"Union", "Optional", "Tuple", "tuple", "List", "list", "Dict", "dict", "Sequence", "Iterable"}
)
_MAX_DEPTH = 8  # re-exports followed at most this deep


def _alias_value(value: ast.expr) -> bool:
    """`Union[Tensor, X]`, `typing.Optional[Tensor]`, `Tensor | None`: a value that is a type."""
    if isinstance(value, ast.Subscript):
        return last_name(value.value) in _TYPING_FORMS
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        return all(
            _alias_value(side) or last_name(side) is not None or isinstance(side, ast.Constant)
            for side in (value.left, value.right)
        )
    return False


def type_aliases(tree: ast.Module) -> dict[str, str]:
    """The module's type aliases that name a tensor: name -> the value's text. A name assigned
    more than once at module level is no alias."""
    values: dict[str, list[ast.expr]] = {}
    for stmt in module_statements(tree):
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    values.setdefault(node.id, []).append(value if node is target else None)
    found = {}
    for name, assigned in values.items():
        if len(assigned) == 1 and assigned[0] is not None and _alias_value(assigned[0]):
            text = ast.unparse(assigned[0])
            if "Tensor" in text or "Parameter" in text:
                found[name] = text
    return found


def alias_of(index, qualname: str, depth: int = 0) -> str | None:
    """The text of the alias `qualname` names in the tree (a `reach.Index`), following re-exports."""
    module, _, name = qualname.rpartition(".")
    path = index.paths.get(module)
    if path is None:
        return None
    summary = index.summaries[path]
    if name in summary.aliases:
        return summary.aliases[name]
    if name in summary.bindings and depth < _MAX_DEPTH and summary.bindings[name] != qualname:
        return alias_of(index, summary.bindings[name], depth + 1)
    return None


def imported_aliases(index, paths: Iterable[str]) -> dict[str, tuple]:
    """Per file of `paths`, an `=Name` root (`scope.Reached`) for each name it imports that is a
    type alias of another file of the tree, its `via` the alias's text."""
    from fuselint.source.scope import Reached

    roots: dict[str, tuple] = {}
    for path in sorted(set(paths) & index.summaries.keys()):
        summary = index.summaries[path]
        found = []
        for name, qualname in sorted(summary.bindings.items()):
            if name in summary.aliases:
                continue
            text = alias_of(index, qualname)
            if text is not None:
                found.append(Reached(f"{ALIAS_ROOT}{name}", (text,)))
        if found:
            roots[path] = tuple(found)
    return roots


def file_aliases(own: Mapping[str, str], roots: Iterable) -> dict[str, str]:
    """The aliases a file's annotations may name: its own, and those its roots bring."""
    found = {r.name[len(ALIAS_ROOT) :]: r.via[0] for r in roots if r.name.startswith(ALIAS_ROOT) and r.via}
    found.update(own)
    return found


def resolved(annotation: ast.expr, aliases: Mapping[str, str]) -> ast.expr:
    """`annotation`, or the value of the alias it names (`Adj` -> `Union[Tensor, SparseTensor]`)."""
    if isinstance(annotation, ast.Name) and annotation.id in aliases:
        # parsed once per file's analysis: checks read the same parameters many times
        value = made_once("alias", aliases[annotation.id], _parsed)
        return annotation if value is None else value
    return annotation


def _parsed(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def union_members(annotation: ast.expr) -> frozenset[str] | None:
    """The last names of the types a union annotation holds (`Union[Tensor, SparseTensor]`,
    `Tensor | SparseTensor`, under `Optional` too: `None` is left out), or None for anything that
    is not a union of two types or more. A subscripted member counts by its head (`Dict`)."""
    members: list[ast.expr] = []

    def collect(node: ast.expr) -> bool:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return collect(node.left) and collect(node.right)
        if isinstance(node, ast.Subscript) and last_name(node.value) == "Optional":
            return collect(node.slice)
        if isinstance(node, ast.Subscript) and last_name(node.value) == "Union":
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return all(collect(p) for p in parts)
        members.append(node)
        return True

    if not collect(annotation):
        return None
    names = set()
    for member in members:
        if isinstance(member, ast.Constant) and member.value is None:
            continue
        name = last_name(member.value if isinstance(member, ast.Subscript) else member)
        if name is None:
            return None  # a member the names cannot tell (a string, a call)
        names.add(name)
    return frozenset(names) if len(names) > 1 else None
