"""The op facts table: every name in it is a real ATen op, and the graph, planner and backend read it."""

from __future__ import annotations

import torch

from fuselint.graph import op_facts

# Inductor's own prim for max-pool windows changed its name across torch releases; the table keeps both.
RENAMED = {"_low_memory_max_pool2d_with_offsets", "_low_memory_max_pool_with_offsets"}


def test_every_op_in_the_table_is_an_aten_or_prims_op():
    import torch._inductor.inductor_prims  # noqa: F401 - registers Inductor's prims

    import fuselint.backend.random  # noqa: F401 - registers fuselint's own ops (philox_rand)

    names = set(op_facts.KIND_OF) | op_facts.FLAT_VIEWS | op_facts.WINDOW_OPS
    names |= op_facts.ELEMENTWISE_COPIES | op_facts.GENERATED_WINDOWS
    spaces = (torch.ops.aten, torch.ops.prims, torch.ops.fuselint)
    known = [n for n in names if any(hasattr(space, n) for space in spaces)]
    assert RENAMED & set(known), "neither name of Inductor's max-pool prim exists"
    missing = sorted(set(names) - set(known) - RENAMED)
    assert not missing, f"not ATen ops (typos?): {missing}"


def test_kinds_are_ones_the_fusion_graph_knows():
    from fuselint.graph.fusion_graph import KINDS

    assert set(op_facts.KIND_OF.values()) <= set(KINDS)


def test_the_backend_generates_only_windows_the_planner_fuses():
    assert op_facts.GENERATED_WINDOWS <= op_facts.WINDOW_OPS


def test_one_table_serves_the_graph_the_planner_and_the_backend():
    from fuselint.backend import lowering
    from fuselint.fusion import plan

    assert plan.WINDOW_OPS is op_facts.WINDOW_OPS and plan.FLAT_VIEWS is op_facts.FLAT_VIEWS
    assert lowering.GENERATED_WINDOWS is op_facts.GENERATED_WINDOWS


def test_table_kinds_classify_nodes():
    from fuselint.graph.fusion_graph import op_kind

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    rolled = graph.call_function(torch.ops.aten.roll.default, (x, [1]))
    made = graph.call_function(torch.ops.aten.arange.default, (4,))
    assert op_kind(rolled) == "injective"
    assert op_kind(made) == "pointwise"
