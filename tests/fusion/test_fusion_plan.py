"""The planner partitions ATen graphs into kernels the way Inductor's scheduler would."""

from __future__ import annotations

import networkx as nx
import pytest
import torch
import torch.nn.functional as F
from fusion_capture import aten_graph, traced_reference
from fusion_references import REFERENCES
from torch import nn

from fuselint.fusion.plan import FusionPlan, GraphFacts, PlanOptions, plan


def _check_well_formed(p: FusionPlan) -> None:
    fg = p.graph
    dag = fg.dag
    computed = {c for g in p.groups for c in g.compute_nodes}
    compute = set(GraphFacts(fg).kind)  # ops that launch work: not views, sizes, allocations
    outputs = {n for n, d in dag.nodes(data=True) if d["is_output"]}
    live = outputs.union(*(nx.ancestors(dag, n) for n in outputs))
    compute &= live  # dead code runs nowhere
    assert compute <= {n for n, d in dag.nodes(data=True) if d["kind"] not in ("input", "view")}
    assert computed == compute, "every compute node runs in some kernel, nothing else does"
    produced: set[str] = {n for n, d in dag.nodes(data=True) if d["kind"] == "input"}
    for g in p.groups:
        assert len(g.compute_nodes) <= p.options.max_nodes
        assert set(g.inputs) <= produced, f"group {g.id} reads a value no earlier group wrote"
        assert set(g.compute_nodes) <= set(g.nodes)
        assert list(g.nodes) == sorted(g.nodes, key=list(dag.nodes).index)
        produced |= set(g.outputs)
        roles = set(g.role.values())
        assert ("gather" in roles) == (g.kind == "injective" or ("gather" in roles and g.kind == "reduction"))
        assert ("reduce" in roles) == (g.kind == "reduction")
        if g.kind in ("matmul", "conv", "other") and not p.options.epilogue_into_matmul:
            assert len(g.compute_nodes) == 1
    # group-level graph is acyclic and in topological order
    order = {g.id: i for i, g in enumerate(p.groups)}
    assert [g.id for g in p.groups] == sorted(order)
    home = p.group_of()
    links = nx.DiGraph()
    for u, v in dag.edges:
        if u in home and v in home and home[u] != home[v]:
            links.add_edge(home[u], home[v])
    assert nx.is_directed_acyclic_graph(links)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_reference_plans_are_well_formed(name):
    _check_well_formed(plan(traced_reference(name)))


def test_pointwise_chain_is_one_kernel():
    p = plan(aten_graph(lambda x: torch.sin(torch.cos(x)) * 2, torch.randn(8, 16)))
    assert p.launches == 1
    (g,) = p.groups
    assert g.kind == "pointwise" and g.space == (128, 1) and g.inputs == ("arg0_1",)
    assert [r for _, r in g.roles] == ["full"] * 3


def test_broadcast_input_fuses_into_the_chain():
    p = plan(aten_graph(lambda x, b: torch.relu(x + b) * 3, torch.randn(8, 16), torch.randn(16)))
    assert p.launches == 1 and set(p.groups[0].inputs) == {"arg0_1", "arg1_1"}


def test_softmax_is_one_reduction_kernel_with_row_roles():
    (g,) = plan(traced_reference("softmax")).groups
    assert g.kind == "reduction" and g.reduce_dims == (1,) and g.space == (64, 32)
    assert g.role == {"amax": "reduce", "sub": "full", "exp": "full", "sum_1": "reduce", "div": "full"}


def test_layernorm_returning_its_input_writes_both_from_one_kernel():
    (g,) = plan(traced_reference("residual_layernorm")).groups
    assert g.outputs == ("add", "add_2")
    assert g.role["rsqrt"] == "outer" and g.role["var_mean"] == "reduce"
    assert "getitem" in g.nodes  # the var_mean getitems are used inside the kernel


def test_reduction_over_a_different_dim_starts_a_new_kernel():
    p = plan(aten_graph(lambda x: torch.softmax(x, -1).sum(0), torch.randn(8, 16)))
    assert [g.kind for g in p.groups] == ["reduction", "reduction"]
    assert p.groups[1].reduce_dims == (0,)


def test_matmul_is_a_barrier_and_merges_never_close_a_cycle():
    # sin feeds the matmul and the add after it: putting sin and add in one kernel would need
    # the matmul inside it too (sin -> mm -> add), so they stay apart.
    def fn(x, w):
        a = torch.sin(x)
        return torch.cos(a @ w + a)

    p = plan(aten_graph(fn, torch.randn(16, 16), torch.randn(16, 16)))
    kinds = [g.kind for g in p.groups]
    assert kinds == ["pointwise", "matmul", "pointwise"]
    assert "sin" not in p.groups[2].compute_nodes
    (m,) = p.materialized
    assert m.node == "sin" and m.groups == (1, 2) and "memory" in m.reason
    _check_well_formed(p)


def test_epilogue_into_matmul_only_when_the_backend_says_so():
    fg = traced_reference("linear_gelu")
    assert plan(fg).launches == 2
    fused = plan(fg, PlanOptions(epilogue_into_matmul=True))
    assert fused.launches == 1
    assert fused.groups[0].kind == "matmul" and fused.groups[0].role["erf"] == "epilogue"


def test_cheap_multi_consumer_value_is_recomputed_in_each_kernel():
    def fn(a, b):
        t = a + b
        return t.sum(0), t.sum(1)

    p = plan(aten_graph(fn, torch.randn(8, 16), torch.randn(8, 16)))
    assert p.launches == 2 and not p.materialized
    assert all("add" in g.compute_nodes for g in p.groups)
    assert all(g.recomputed == ("add",) for g in p.groups)
    assert all(set(g.inputs) == {"arg0_1", "arg1_1"} for g in p.groups)
    (r,) = p.recomputations
    assert r.node == "add" and "1 pointwise op(s) over 2 tensor(s)" in r.reason


def test_value_behind_a_reduction_is_materialized_with_a_reason():
    def fn(x):
        s = torch.softmax(x, -1)
        return s.sum(0), s * 2

    p = plan(aten_graph(fn, torch.randn(8, 16)))
    assert p.launches == 2
    (m,) = p.materialized
    assert m.node == "div" and m.bytes == 8 * 16 * 4 and len(m.groups) == 2
    assert "reduction" in m.reason


def test_too_many_reads_to_recompute_materializes():
    def fn(a, b, c, d, e):
        t = a * b + c * d + e  # reads 5 tensors: Inductor realizes it
        return t.sum(0), t.sum(1)

    p = plan(aten_graph(fn, *[torch.randn(8, 16) for _ in range(5)]))
    assert [m.node for m in p.materialized] == ["add_1"]
    assert "reads 5 tensors" in p.materialized[0].reason


def test_broadcast_vectors_do_not_count_towards_the_reads_limit():
    """BatchNorm-SiLU before a squeeze-excite (EfficientNet): one image-sized read and four
    per-channel vectors. It is recomputed in the pooling reduction and in the gate's multiply
    from the convolution's output, not written in bf16 and read back rounded."""

    def fn(x, mean, var, w, b, se):
        y = F.silu(F.batch_norm(x, mean, var, w, b, False, 0.0, 1e-5))
        gate = torch.sigmoid(F.conv2d(y.mean((2, 3), keepdim=True), se))  # a library call between
        return y * gate

    c = 16
    args = (
        torch.randn(2, c, 8, 8, dtype=torch.bfloat16),
        *[torch.rand(c, dtype=torch.bfloat16) + 0.5 for _ in range(4)],
        torch.randn(c, c, 1, 1, dtype=torch.bfloat16),
    )
    p = plan(aten_graph(fn, *args))
    assert not p.materialized
    (r,) = [r for r in p.recomputations if "over 5 tensor(s)" in r.reason]
    assert len(r.groups) == 1
    readers = [g for g in p.groups if r.node in g.compute_nodes]
    assert len(readers) == 2 and all("arg0_1" in g.inputs for g in readers)
    assert not any(r.node in g.outputs for g in p.groups), "the BN-SiLU value is never written"


def test_five_image_sized_reads_still_materialize():
    def fn(x, a, b, c, d, se):
        y = F.silu((x - a) * b * c + d)
        return y * torch.sigmoid(F.conv2d(y.mean((2, 3), keepdim=True), se))

    p = plan(aten_graph(fn, *[torch.randn(2, 16, 8, 8) for _ in range(5)], torch.randn(16, 16, 1, 1)))
    assert p.materialized and "reads 5 tensors" in p.materialized[0].reason


def test_small_cat_read_only_by_pointwise_ops_is_recomputed_like_a_pointwise_op():
    """ViT's ``cat([cls, patches]) + pos``: the sum is read by a norm and a residual add. Inductor's
    GPU lowering makes a cat of up to 8 tensors pointwise, so the sum is recomputed, not stored."""

    def fn(cls, patches, pos):
        t = torch.cat([cls, patches], 1) + pos
        return t.sum(1), t.sum(2)

    args = (torch.randn(2, 1, 16), torch.randn(2, 7, 16), torch.randn(1, 8, 16))
    p = plan(aten_graph(fn, *args))
    assert not p.materialized
    assert {r.node for r in p.recomputations} == {"add"}
    assert sum("cat" in g.compute_nodes for g in p.groups) == 2, "each reader computes the cat"


def test_cat_of_more_than_eight_tensors_is_not_recomputed():
    def fn(*xs):
        t = torch.cat(xs, 1) + 1
        return t.sum(1), t.sum(2)

    p = plan(aten_graph(fn, *[torch.randn(2, 1, 16) for _ in range(9)]))
    assert [m.node for m in p.materialized] == ["add"]
    assert "cat" in p.materialized[0].reason


def test_recomputing_is_not_refused_for_the_bytes_it_reads():
    """Inductor's realize rule counts ops and reads, not bytes: a value of four full-size reads,
    recomputed in a second reader, reads 4x the bytes storing it saves, and is still recomputed
    (it then enters both readers unrounded, as Inductor's does)."""

    def fn(a, b, c, d):
        t = a * b + c * d
        return t.sum(0), t.sum(1)

    p = plan(aten_graph(fn, *[torch.randn(8, 16) for _ in range(4)]))
    assert not p.materialized
    assert {r.node for r in p.recomputations} == {"add"}


def test_fusion_stops_at_max_nodes():
    def chain(x):
        for _ in range(100):
            x = torch.sin(x)
        return x

    fg = aten_graph(chain, torch.randn(4, 4))
    assert plan(fg).launches == 2
    assert plan(fg, PlanOptions(max_nodes=10)).launches == 10


def test_views_alone_launch_nothing():
    p = plan(aten_graph(lambda x: x.view(2, 8).t()[:1], torch.randn(4, 4)))
    assert p.groups == ()


def test_a_value_read_through_a_transpose_runs_as_prologue_at_the_read_positions():
    p = plan(aten_graph(lambda x: torch.cos(torch.sin(x).t() + 1), torch.randn(8, 16)))
    (g,) = p.groups
    assert g.role == {"sin": "prologue", "add": "full", "cos": "full"}

    # a value also read in place stays a full member and the transposed reader takes a kernel
    def both(x):
        s = torch.sin(x)
        return s * 2, s.t().contiguous()

    p = plan(aten_graph(both, torch.randn(8, 8)))
    assert p.launches == 2


def test_expand_to_the_same_shape_is_a_flat_read():
    def fn(x):
        y = x.transpose(0, 1) * 2  # ATen keeps the transposed layout: y is not contiguous
        return y.expand(16, 8).contiguous()

    (g,) = plan(aten_graph(fn, torch.randn(8, 16))).groups
    assert g.role == {"mul": "full", "clone": "full"}


def test_independent_copies_of_one_tensor_fuse_horizontally():
    def fn(x):
        q, k = x.split(16, -1)
        return q.t().contiguous(), k.t().contiguous()

    p = plan(aten_graph(fn, torch.randn(8, 32)))
    assert p.launches == 1 and len(p.groups[0].outputs) == 2


def test_relu_runs_inside_the_max_pool_windows():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.ReLU(), nn.MaxPool2d(2))
    p = plan(aten_graph(model, torch.randn(2, 3, 16, 16)))
    pool = p.groups[-1]
    assert pool.kind == "injective" and pool.role["relu"] == "prologue"
    assert pool.inputs == ("convolution",)


def test_window_data_that_reads_two_tensors_is_written_out_first():
    # The conv's peeled bias makes ReLU's input two loads per position; the pool reads every
    # element four times, so bias + ReLU run once in a kernel of their own (Inductor's realize_hint).
    p = plan(traced_reference("conv_relu_maxpool"))
    *_, conv, bias_relu, pool = p.groups
    assert conv.kind == "conv" and bias_relu.kind == "pointwise"
    assert set(bias_relu.compute_nodes) == {"add_tensor", "relu"} and bias_relu.outputs == ("relu",)
    assert pool.kind == "injective" and pool.inputs == ("relu",)


def test_cat_takes_pointwise_prologue_and_epilogue():
    def fn(x, y):
        return torch.cat([torch.neg(x), y], -1) * 2

    p = plan(aten_graph(fn, torch.randn(4, 8), torch.randn(4, 8)))
    assert p.launches == 1
    assert p.groups[0].role == {"neg": "prologue", "cat": "gather", "mul": "full"}


def test_transformer_block_recomputes_the_residual_like_inductor():
    p = plan(traced_reference("transformer_block"))
    assert [g.compute_nodes for g in p.groups if g.recomputed] == [
        ("add_2", "var_mean_1", "add_3", "rsqrt_1", "sub_2", "mul_3", "mul_4", "add_4"),
        ("add_2", "add_6"),
    ]
    assert not p.materialized


def test_gelu_decomposition_is_one_kernel():
    p = plan(aten_graph(lambda x: F.gelu(x, approximate="tanh"), torch.randn(8, 16)))
    assert p.launches == 1


def test_batchnorm_scale_is_broadcast_into_the_conv_epilogue_kernel():
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    p = plan(aten_graph(model, torch.randn(2, 4, 8, 8)))
    # input and weight copied to channels_last first (see fuselint.graph.layout)
    assert [g.kind for g in p.groups] == ["pointwise", "pointwise", "conv", "pointwise"]
    roles = p.groups[-1].role
    assert roles["sqrt"] == "bcast" and roles["relu"] == "full" and roles["add_tensor"] == "full"
    _check_well_formed(p)


def test_cross_entropy_is_two_kernels_like_eager():
    p = plan(aten_graph(F.cross_entropy, torch.randn(8, 10), torch.randint(0, 10, (8,))))
    assert [g.kind for g in p.groups] == ["reduction", "reduction"]
    assert p.groups[1].role["gather"] == "gather"


def test_embedding_lookup_runs_inside_the_reduction_that_reads_it():
    emb = nn.Embedding(100, 16)
    p = plan(aten_graph(lambda i: emb(i).sum(-1), torch.randint(0, 100, (4, 8))))
    (g,) = p.groups
    assert g.kind == "reduction" and g.role["embedding"] == "gather"


def test_few_long_rows_split_the_reduction_from_its_epilogue():
    p = plan(aten_graph(lambda x: x - x.mean(), torch.randn(512, 512)))
    assert [(g.kind, g.launches) for g in p.groups] == [("reduction", 2), ("pointwise", 1)]
    assert p.launches == 3
    # a prologue still fuses into the split reduction, and many short rows do not split
    p = plan(aten_graph(lambda x: (x * x).mean(), torch.randn(512, 512)))
    assert [(g.kind, g.launches) for g in p.groups] == [("reduction", 2)]
    assert plan(aten_graph(lambda x: x - x.mean(-1, keepdim=True), torch.randn(512, 512))).launches == 1


def test_dynamic_shapes_plan_like_static_ones():
    # size arithmetic on SymInts shows up as nodes that launch nothing
    fg = aten_graph(
        lambda x: torch.sin(x.reshape(x.shape[0] * x.shape[1])) + 1, torch.randn(8, 16), dynamic=True
    )
    assert any(d["op"] == "<built-in function mul>" for _n, d in fg.dag.nodes(data=True))
    p = plan(fg)
    assert p.launches == 1
    _check_well_formed(p)


def test_bilinear_upsampling_plans_without_a_cycle():
    """The lerp kernel recomputes the gathers' indices as a prologue; the gathers must read the
    indices their home kernel writes, not the lerp kernel's copy, which reads the gathered values
    (taking that copy as the writer made two kernels wait on each other: a crash in FPN heads)."""

    def upsample_add(x, y):
        return F.interpolate(x, size=y.shape[-2:], mode="bilinear", align_corners=False) + y

    p = plan(aten_graph(upsample_add, torch.randn(1, 4, 5, 5), torch.randn(1, 4, 10, 10)))
    _check_well_formed(p)
    lerp = p.groups[-1]
    assert lerp.kind == "pointwise" and lerp.recomputed, "the indices are recomputed in the lerp kernel"
