"""reach21: a method call on an object that another call built and returned is a caller-line site
(gb0092) like one on an object built in the caller; one on an object a call hands back that already
exists (`return self`, a stored attribute, a global, an argument) is not. Checked against dynamo
(torch 2.13) on fixtures/reach21/returned_pkg; the toys are bench/reach21_toys.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, logged_breaks

from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree
from fuselint.source.reach import summarize

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reach21"
BUILT_AND_RETURNED = [
    "FromFunction",
    "FromEither",
    "FromClassMethod",
    "FromOwnMethod",
    "FromScaled",
    "FromWidened",
    "FromStored",
]


def _fl108_lines() -> set[tuple[str, int]]:
    config = Config(root=FIXTURES, select=("FL1",))
    found = lint_tree(discover([str(FIXTURES / "returned_pkg")], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line) for f in found if f.code == "FL108"}


def test_a_call_on_an_object_a_call_built_and_returned_is_flagged():
    # 14 make(), 20 either(), 26 Smoother.create(), 35 self.fresh(), 41 Smoother(1.0).scaled(),
    # 46 Smoother(1.0).widened(...).smooth, 56 self.kernel.scaled(); nothing in Existing (shared(),
    # same(), held(), pick()).
    assert _fl108_lines() == {("model.py", line) for line in (14, 20, 26, 35, 41, 46, 56)}


def test_dynamo_logs_the_flagged_lines_and_no_other(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from returned_pkg import model

    x = torch.rand(4) + 0.5
    logged = set()
    for name in [*BUILT_AND_RETURNED, "Existing"]:
        for b in logged_breaks(getattr(model, name)(), x):
            if b.gb_id == "gb0092":
                logged.add((Path(b.file).name, b.line))
    assert logged == _fl108_lines()


def test_built_returns_needs_every_return_to_build():
    source = (FIXTURES / "returned_pkg" / "kernels.py").read_text()
    built = summarize(ast.parse(source), "returned_pkg.kernels", False).built
    smoother = ("returned_pkg.kernels.Smoother",)
    assert built == {
        "make": smoother,
        "either": smoother,
        "Smoother.scaled": smoother,
        "Smoother.widened": smoother,
        "Smoother.create": smoother,
    }


def test_dynamo_logs_reach17s_solver_line_on_an_operator_a_function_built(monkeypatch):
    # `as_operator(x).solve(rhs)` (solver.py:18): `as_operator` returns `Operator(x)`. Line 20's
    # `d.inverse_diag()` is not logged in the same frame: after the first such call dynamo runs the
    # rest of forward in eager (reach20's toys).
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES.parent / "reach17"))
    from operators_pkg.solver import Solver

    x = torch.rand(3, 3) + torch.eye(3)
    logged = {
        (Path(b.file).name, b.line) for b in logged_breaks(Solver(), x, torch.ones(3)) if b.gb_id == "gb0092"
    }
    assert logged == {("solver.py", 18)}
