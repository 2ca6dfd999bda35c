"""What the source rules share: building a Finding at a node, and spelling `torch` in fixes."""

from __future__ import annotations

import ast

from fuselint.catalog import Rule
from fuselint.findings import Finding, Fix
from fuselint.source.module import SourceFile

_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.Tuple, ast.List)


def finding(sf: SourceFile, rule: Rule, node: ast.AST, message: str, fix: Fix | None = None) -> Finding:
    return Finding(
        code=rule.code,
        message=message,
        span=sf.span(node),
        fix=fix,
        source_line=sf.line_text(node.lineno).strip(),
    )


def torch_name(sf: SourceFile) -> tuple[str, tuple[str, ...]]:
    """How this file spells `torch`, and the import a fix needs when it has none."""
    local = sf.imports.local_name_for("torch")
    if local is not None and "." not in local:
        return local, ()
    return "torch", ("import torch",)


def atom(sf: SourceFile, node: ast.expr) -> str:
    """Source text of `node`, parenthesized unless it binds tighter than any operator."""
    text = sf.segment(node)
    return text if isinstance(node, _ATOMS) else f"({text})"


def has_comment(sf: SourceFile, node: ast.AST) -> bool:
    """A fix that rewrites this node's lines would drop a comment."""
    return any("#" in sf.line_text(n) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1))
