"""reach18's value flow for method dispatch (gpytorch's `output = self.likelihood(...)` then
`output.log_prob(...)`, `mean, covar = ...` then `covar = covar.evaluate_kernel()`; see
bench/results/precision_untuned18.md), each checked against dynamo (torch 2.13). In another file:

1. a stored module's call gives its `forward`'s result class (`-> Normal`);
2. an annotated property read in a tuple assignment, then the local reassigned to a method's
   result (`cov = cov.evaluate()`, `-> "Dense"`): the call after runs the new class's method;
3. an item of the tuple a function returns (`_, dense = moments(x)`, `return Covariance(x), Dense(x)`)
(fixtures/reach18/flow_pkg);
4. FL101: `torch._check_tensor_all(cond)` reads the condition with `.item()` inside torch (gb0124),
   here in a helper of another folder that its `__init__` re-exports, under `is_tracing()`
   (transformers' `torch_compilable_check`, D-FINE and DEIMv2; fixtures/reach18/checks_pkg).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, logged_break_lines

from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree
from fuselint.source.reach import FileSummary, tuple_items

FLOW = Path(__file__).resolve().parents[2] / "fixtures" / "reach18"


def _flow_findings() -> dict[tuple[str, int], str]:
    config = Config(root=FLOW, select=("FL1",))
    found = lint_tree(discover([str(FLOW / "flow_pkg")], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line): f.code for f in found}


def test_methods_on_values_that_flow_from_calls_and_properties_are_reached():
    # 22 Dense.logdet (property, then reassigned), 25 Dense.trace (tuple item), 38 Normal.log_prob
    # (a stored module's result); Covariance.logdet and .trace, which never break, say nothing.
    assert _flow_findings() == {("distributions.py", n): "FL101" for n in (22, 25, 38)}


def test_dynamo_breaks_where_the_flow_is_flagged(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FLOW))
    from flow_pkg.distributions import moments
    from flow_pkg.objective import Objective

    # One compile per break: the first break inside forward's callees runs the rest eagerly.
    model, path = Objective(), str(FLOW / "flow_pkg" / "distributions.py")
    calls = [
        lambda x, y: model.likelihood(x).log_prob(y),
        lambda x, y: model.likelihood(x).covariance.evaluate().logdet(),
        lambda x, y: moments(x)[1].trace(),
    ]
    x = torch.rand(3, 3) + torch.eye(3)
    breaks = set().union(*(logged_break_lines(call, x, torch.ones(3), filename=path) for call in calls))
    assert breaks == {line for _name, line in _flow_findings()}


def _items(source: str) -> list[tuple[int, tuple[str, ...]]]:
    tree = ast.parse(source)
    summary = FileSummary("m", False, {}, frozenset(), {"A": None, "B": None})
    return tuple_items(tree.body[0], summary)


@pytest.mark.parametrize(
    ("source", "items"),
    [
        ("def f() -> tuple[A, B]: ...", [(0, ("m.A",)), (1, ("m.B",))]),
        ("def f() -> 'Tuple[int, B]': ...", [(1, ("m.B",))]),
        ("def f() -> tuple[A, ...]: ...", []),
        (
            "def f(x):\n    if x:\n        return A(), B()\n    return B(), B()",
            [(0, ("m.A", "m.B")), (1, ("m.B",))],
        ),
        ("def f(x):\n    if x:\n        return A(), x\n    return A()", []),
        ("def f(x):\n    return A(), x", [(0, ("m.A",))]),
    ],
)
def test_tuple_items_come_from_the_annotation_or_every_return(source, items):
    assert _items(source) == items


CHECKS = FLOW / "checks_pkg"


def test_a_tensor_check_reached_through_a_re_export_is_flagged():
    # 20: `torch._check_tensor_all(cond)` under `is_tracing()`; 24 runs only when not compiling.
    config = Config(root=FLOW, select=("FL1",))
    found = lint_tree(discover([str(CHECKS)], config), CATALOG, config, jobs=1).findings
    assert {(Path(f.span.path).name, f.span.line, f.code) for f in found} == {("checks.py", 20, "FL101")}


def test_dynamo_breaks_in_the_tensor_check(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FLOW))
    from checks_pkg.models.boxes import Boxes

    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    assert logged_break_lines(Boxes(), boxes, filename=str(CHECKS / "utils" / "checks.py")) == {20}
