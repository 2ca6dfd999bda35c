"""Nodes that repeat an earlier node's pure op on the same arguments are computed once."""

from __future__ import annotations

import pytest
import torch
from backend_helpers import aten_graph, needs_interpreter

from fuselint.backend.compiler import compile_graph
from fuselint.backend.cse import merge_duplicates


def _count(gm: torch.fx.GraphModule, name: str) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target))


def per_layer_masks(x):
    # Hugging Face's LLaMA builds its causal mask once per attention layer
    n = x.shape[-1]
    for _ in range(3):
        pos = torch.arange(n, device=x.device)
        mask = torch.where(pos[None, :] <= pos[:, None], 0.0, float("-inf"))
        x = torch.softmax(x + mask, dim=-1) @ x
    return x


def test_a_mask_built_once_per_layer_is_built_once():
    x = torch.randn(2, 16, 16)
    gm = aten_graph(per_layer_masks, x)
    assert _count(gm, "iota") == 3 and _count(gm, "where") == 3
    expected = gm(x)
    assert merge_duplicates(gm) > 0
    assert _count(gm, "iota") == 1 and _count(gm, "where") == 1
    assert _count(gm, "amax") == 3  # each layer's own input: nothing else merged
    assert torch.equal(gm(x), expected)


def test_numbers_that_compare_equal_but_compute_apart_do_not_merge():
    def apart(x, i):
        return x * 0.0, x * -0.0, i + 1, i + 1.0, i + True

    x, i = torch.randn(4), torch.arange(4)
    gm = aten_graph(apart, x, i)
    merge_duplicates(gm)
    signs = [torch.signbit(v).tolist() for v in gm(-x.abs() - 1, i)[:2]]
    assert signs == [[True] * 4, [False] * 4]
    dtypes = [v.dtype for v in gm(x, i)[2:]]
    assert dtypes == [torch.int64, torch.float32, torch.int64]
    assert _count(gm, "mul") == 2 and _count(gm, "add") == 3


def test_random_values_and_empty_tensors_are_not_merged():
    def noisy(x):
        return torch.exp(x) + torch.rand(x.shape) + torch.rand(x.shape)

    x = torch.randn(64)
    gm = aten_graph(noisy, x)
    before = _count(gm, "rand")
    assert merge_duplicates(gm) == 0
    assert _count(gm, "rand") == before == 2


def test_values_the_caller_receives_stay_apart():
    def twice(x):
        a, b = torch.exp(x), torch.exp(x)
        return a, b.view(2, 2), torch.exp(x) * 2

    x = torch.randn(4)
    gm = aten_graph(twice, x)
    merge_duplicates(gm)
    a, b, c = gm(x)
    assert a.data_ptr() != b.data_ptr()  # the caller may write one of them
    a.add_(1)
    torch.testing.assert_close(b.view(-1), torch.exp(x))
    torch.testing.assert_close(c, torch.exp(x) * 2)


def test_values_written_in_place_stay_apart():
    x = torch.randn(4)
    gm = aten_graph(lambda x: x.exp(), x)
    graph = gm.graph
    exp = next(n for n in graph.nodes if "exp" in str(n.target))
    with graph.inserting_after(exp):
        again = graph.call_function(torch.ops.aten.exp.default, (exp.args[0],))
    with graph.inserting_after(again):
        written = graph.call_function(torch.ops.aten.add_.Tensor, (again, 1.0))
    out = next(n for n in graph.nodes if n.op == "output")
    out.args = ((exp, written),)
    gm.recompile()
    assert merge_duplicates(gm) == 0
    first, second = gm(x)
    torch.testing.assert_close(first + 1, second)


@needs_interpreter
def test_the_compiled_graph_runs_the_shared_mask_once_and_matches_eager():
    x = torch.randn(2, 16, 16)
    gm = compile_graph(aten_graph(per_layer_masks, x), [x])
    assert "iota" not in gm.code  # one mask, folded as a constant at compile time
    torch.testing.assert_close(gm(x), per_layer_masks(x), rtol=1e-5, atol=1e-5)


def test_deep_graphs_whose_nodes_share_inputs_merge_in_linear_time():
    # each value read twice by the next: a key spelled out as a tree would have 2**40 leaves
    def doubling(x):
        a, b = x.sin(), x.sin()
        for _ in range(40):
            a, b = a + a, b + b
        return a * b

    x = torch.randn(8)
    gm = aten_graph(doubling, x)
    expected = gm(x)
    assert merge_duplicates(gm) == 41
    assert _count(gm, "sin") == 1 and _count(gm, "add") == 40
    assert torch.equal(gm(x), expected)


def test_reads_on_either_side_of_a_write_through_a_view_stay_apart():
    def written_through_a_view(x):
        y = x * 2
        before = y.sin()
        y.view(2, 2).add_(1)  # make_fx keeps the write; `y` itself now holds new values
        return before + y.sin()

    x = torch.randn(4)
    gm = aten_graph(written_through_a_view, x)
    expected = gm(x)
    assert merge_duplicates(gm) == 0
    assert _count(gm, "sin") == 2
    assert torch.equal(gm(x), expected)


def test_asserts_survive_the_cleanup_after_a_merge():
    def checked(x):
        torch._assert_async((x > 0).all())
        return x.exp() + x.exp()

    x = torch.rand(4) + 1
    gm = aten_graph(checked, x)
    assert merge_duplicates(gm) == 1
    assert _count(gm, "_assert_async") == 1
    torch.testing.assert_close(gm(x), 2 * x.exp())
    with pytest.raises(RuntimeError):
        gm(-x)
