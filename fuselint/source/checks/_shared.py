"""What the source rules share: building a Finding at a node, and spelling `torch` in fixes."""

from __future__ import annotations

import ast

from fuselint.catalog import Rule
from fuselint.findings import Finding, Fix
from fuselint.source.module import SourceFile
from fuselint.source.paths import PATH_KEY, path_note

_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.Tuple, ast.List)


def finding(
    sf: SourceFile,
    rule: Rule,
    node: ast.AST,
    message: str,
    fix: Fix | None = None,
    path: str | None = None,
    end: ast.AST | None = None,
) -> Finding:
    """A finding spanning `node` (to `end` when given); one on a side road (`path`, see
    `fuselint.source.paths`) says so in its message and carries it in `details["path"]`."""
    return Finding(
        code=rule.code,
        message=message if path is None else f"{message} ({path_note(path)})",
        span=sf.span(node) if end is None else sf.span(node, end),
        fix=fix,
        source_line=sf.line_text(node.lineno).strip(),
        details=() if path is None else ((PATH_KEY, path),),
    )


def torch_name(sf: SourceFile) -> tuple[str, tuple[str, ...]]:
    """How this file spells `torch`, and the import a fix needs when it has none."""
    local = sf.imports.local_name_for("torch")
    if local is not None and "." not in local:
        return local, ()
    return "torch", ("import torch",)


def one_row_read(table: str, index: str, torch: str | None = None) -> str:
    """`X[j]` read as a 1-d tensor index, `X[j.unsqueeze(0).to(X.device)][0]`: the same values, shape and
    dtype for an integer `j` of any dimension, as a copy, and no `.item()` for dynamo or AOT. With `torch`
    (its local name), `X[torch.as_tensor(j, device=X.device).unsqueeze(0)][0]`, for a `j` that a caller may
    pass as a Python int. `table` and `index` are source texts, `index` an atom."""
    if torch is not None:
        return f"{table}[{torch}.as_tensor({index}, device={table}.device).unsqueeze(0)][0]"
    return f"{table}[{index}.unsqueeze(0).to({table}.device)][0]"


def atom(sf: SourceFile, node: ast.expr) -> str:
    """Source text of `node`, parenthesized unless it binds tighter than any operator."""
    text = sf.segment(node)
    return text if isinstance(node, _ATOMS) else f"({text})"


def has_comment(sf: SourceFile, node: ast.AST) -> bool:
    """A fix that rewrites this node's lines would drop a comment."""
    return any("#" in sf.line_text(n) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))


def spliced(sf: SourceFile, expr: ast.expr, edits: list[tuple[ast.AST, str]]) -> str:
    """`expr`'s source text with each (node, text) edit's node replaced by its text."""
    start = sf.span(expr)
    lines = sf.segment(expr).split("\n")
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        span = sf.span(node)
        first, last = span.line - start.line, span.end_line - start.line
        begin = span.column - (start.column if first == 0 else 1)
        end = span.end_column - (start.column if last == 0 else 1)
        head, tail = lines[first][:begin], lines[last][end:]
        lines[first : last + 1] = (head + text + tail).split("\n")
    return "\n".join(lines)
