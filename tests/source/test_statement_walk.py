"""The statement-only walk that scope and the import table use instead of a full `ast.walk`."""

from __future__ import annotations

import ast
import textwrap

from fuselint.source.imports import ImportTable, iter_statements
from fuselint.source.scope import model_functions

SRC = textwrap.dedent(
    """
    try:
        import torch as T
    except ImportError:
        T = None
    if True:
        from torch import nn
    def helper():
        import torch.nn.functional as F
        return F
    class Outer:
        class Inner(nn.Module):
            def forward(self, x):
                match x:
                    case _:
                        import numpy as np
                return x
    compiled = T.compile(helper)
    """
)


def test_statements_under_every_kind_of_body_are_visited():
    tree = ast.parse(SRC)
    visited = {id(s) for s in iter_statements(tree)}
    expected = {id(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    assert visited == expected


def test_imports_in_nested_bodies_are_in_the_table():
    table = ImportTable.of(ast.parse(SRC))
    assert table.aliases["T"] == "torch"
    assert table.aliases["F"] == "torch.nn.functional"
    assert table.aliases["np"] == "numpy"


def test_nested_classes_and_compile_calls_are_in_scope_with_or_without_the_text():
    tree = ast.parse(SRC)
    table = ImportTable.of(tree)
    for text in (None, SRC):
        names = {(f.node.name, f.reason) for f in model_functions(tree, table, text)}
        assert names == {("forward", "forward"), ("helper", "compiled")}
