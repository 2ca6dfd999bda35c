"""reach17's classes (pykeen 1.11.1 held out, gpytorch 1.15.2 + linear_operator 0.6.1 re-measured;
see bench/results/precision_untuned17.md), each checked against dynamo (torch 2.13):

1. A decorator that hands the decorated function on to another decorator of its file
   (`cached(method)` returning `_cached(method=method, name=name)`) wraps it in that one's nested
   wrapper, which runs on every call: the wrapper is reached, and its findings name the path.
2. dynamo skips `pickle.dumps`/`pickle.loads` and `torch.sparse_coo_tensor` (gb0007): FL108.
3. A method called on a value whose class the code says runs that class's definition, in another
   file: the result of a function annotated `-> Operator` or returning `Diagonal(...)`, of a method
   of the caller's class annotated so (`self.operator(x).logdet()`), a parameter annotated
   `op: Operator` (fixtures/reach17/operators_pkg).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, lines, logged_break_lines

from fuselint.config import Config
from fuselint.source.lint import discover, lint_text, lint_tree

BREAKS = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"
MEMOIZED = BREAKS / "memoized.py"
OPERATORS = Path(__file__).resolve().parents[2] / "fixtures" / "reach17"


def _found(path: Path) -> dict[int, str]:
    return {
        f.span.line: f.code for f in lint_text(path.name, path.read_text(), CATALOG, Config(select=("FL1",)))
    }


def test_delegated_decorator_wrapper_is_reached():
    # 26: pickle.dumps in `_cached`'s `g`, which `@cached(name="root")` puts on `root`.
    assert _found(MEMOIZED) == {26: "FL108"}


USER = """
    from torch import nn

    from .memoized import cached


    class Gram(nn.Module):
        def __init__(self):
            super().__init__()
            self.keys = []

        @cached(name="gram")
        def gram(self, x):
            return x @ x.T

        def forward(self, x):
            return self.gram(x)
"""


def test_a_decorator_of_another_file_reaches_the_wrapper_it_delegates_to(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "memoized.py").write_text(MEMOIZED.read_text().split("class Covariance")[0])
    (tmp_path / "pkg" / "user.py").write_text(USER.replace("\n    ", "\n"))
    config = Config(root=tmp_path, select=("FL1",))
    found = lint_tree(discover([str(tmp_path / "pkg")], config), CATALOG, config, jobs=1).findings
    assert [(Path(f.span.path).name, f.span.line, f.code) for f in found] == [("memoized.py", 26, "FL108")]
    assert found[0].message.endswith("pkg/user.py:Gram.forward → Gram.gram → @cached)")


def test_dynamo_breaks_in_the_delegated_wrapper():
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(MEMOIZED.read_text(), str(MEMOIZED), "exec"), namespace)  # noqa: S102 - our own fixture
    module = namespace["Covariance"]()
    assert logged_break_lines(module, torch.randn(3, 3), filename=str(MEMOIZED)) == set(_found(MEMOIZED))


SKIPPED = """
    import pickle

    import torch
    from torch import nn


    class Graph(nn.Module):
        def forward(self, x, index):
            blob = pickle.dumps(index.shape)
            shape = pickle.loads(blob)
            adjacency = torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (3, 3))
            return x * shape[0], adjacency
"""


def test_skipped_calls_are_flagged():
    assert lines(SKIPPED, "FL108") == [10, 11, 12]


def test_dynamo_skips_pickling_and_sparse_construction(tmp_path: Path):
    torch = pytest.importorskip("torch")
    source = tmp_path / "skipped.py"
    source.write_text(SKIPPED.replace("\n    ", "\n"))
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # noqa: S102 - our own snippet
    index = torch.tensor([[0, 1], [1, 2]])
    assert logged_break_lines(namespace["Graph"](), torch.ones(3), index, filename=str(source)) >= {
        10,
        11,
        12,
    }


def _operator_findings() -> dict[tuple[str, int], str]:
    config = Config(root=OPERATORS, select=("FL1",))
    found = lint_tree(discover([str(OPERATORS / "operators_pkg")], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line): f.code for f in found}


def test_methods_on_values_of_known_class_are_reached():
    # 10 solve (annotated function's result), 13 logdet (own method annotated), 16 norm (annotated
    # parameter), 24 Diagonal.inverse_diag (a function returning `Diagonal(...)`). reach21: solver.py
    # 18 and 20 call methods that break on objects `as_operator`/`diagonal` built and returned
    # (dynamo's gb0092 at 18: tests/source/test_reach21_returned.py).
    assert _operator_findings() == {
        **{("operators.py", n): "FL101" for n in (10, 13, 16, 24)},
        **{("solver.py", n): "FL108" for n in (18, 20)},
    }


def test_dynamo_breaks_where_the_operators_are_flagged(monkeypatch):
    # Each of forward's four calls compiled alone: the first break inside a callee of forward sends
    # the whole forward to eager, so one compile would show only the first.
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(OPERATORS))
    from operators_pkg.operators import as_operator, diagonal
    from operators_pkg.solver import Solver

    solver, path = Solver(), str(OPERATORS / "operators_pkg" / "operators.py")
    calls = [
        lambda x, rhs: as_operator(x).solve(rhs),
        lambda x, rhs: diagonal(x).inverse_diag(),
        lambda x, rhs: solver.operator(x).logdet(),
        lambda x, rhs: solver.scaled(diagonal(x), rhs),
    ]
    x = torch.rand(3, 3) + torch.eye(3)
    breaks = set().union(*(logged_break_lines(call, x, torch.ones(3), filename=path) for call in calls))
    assert breaks == {line for name, line in _operator_findings() if name == "operators.py"}
