"""The host side of a compiled call: constants made once at compile time, nothing read back
from or copied to the device per call, and the `options=` the backend takes."""

from __future__ import annotations

import logging

import pytest
import torch
from backend_helpers import aten_graph, needs_interpreter
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.compiler import compile_graph
from fuselint.backend.constants import constant_nodes
from fuselint.backend.cudagraphs import GraphReplay, LentOutputs, Recording, why_not_recordable
from fuselint.backend.runtime import FusedKernel

# Ops that, run on every call, rebuild a constant or move a value between host and device.
PER_CALL_BANNED = {
    "aten.arange",
    "prims.iota",
    "aten.full",
    "aten.scalar_tensor",
    "aten.lift_fresh",
    "aten.lift_fresh_copy",
    "aten._local_scalar_dense",
}


class OpLog(TorchDispatchMode):
    """Every ATen op dispatched while active, with whether it moved data across devices."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.transfers: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func.overloadpacket).replace("::", ".")
        self.ops.append(name)
        src = [a.device for a in args if isinstance(a, torch.Tensor)]
        dst = [
            o.device
            for o in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(o, torch.Tensor)
        ]
        if src and dst and {d.type for d in src} != {d.type for d in dst}:
            self.transfers.append(name)
        if "device" in kwargs and src and kwargs["device"] is not None:
            if torch.device(kwargs["device"]).type != src[0].device.type:
                self.transfers.append(name)
        return out


def positions(x, w):
    # An embedding-style position term: iota and full depend on no input.
    pos = torch.arange(x.shape[-1], device=x.device, dtype=x.dtype)
    scale = torch.full((x.shape[-1],), 0.5, device=x.device, dtype=x.dtype)
    return torch.sigmoid(x * w + pos * scale)


def weighted_positions(x, w):
    pos = torch.arange(x.shape[-1] * 4, device=x.device, dtype=x.dtype).view(-1, 4) * 0.5
    return (x @ pos) * w.sum()


def _inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(8, 32, generator=gen), torch.randn(32, generator=gen)


def test_input_free_nodes_are_the_constants():
    gm = aten_graph(positions, *_inputs())
    names = {n.target.name() for n in constant_nodes(gm) if isinstance(n.target, torch._ops.OpOverload)}
    assert "prims::iota" in names and "aten::full" in names
    assert not any("sigmoid" in n or "mul" == n.split("::")[-1].split(".")[0] for n in names if "x" in n)


@pytest.fixture
def unlogged_launches(monkeypatch):
    """Triton's interpreter emulates a launch with torch ops of its own (on a GPU the launch is
    one C call): the op log leaves those out and sees what the compiled call itself runs."""
    launch = FusedKernel._launch_jit

    def launch_unlogged(self, args, outs):
        with _disable_current_modes():
            return launch(self, args, outs)

    monkeypatch.setattr(FusedKernel, "_launch_jit", launch_unlogged)


@needs_interpreter
def test_compiled_call_makes_no_constants_and_moves_nothing(unlogged_launches):
    x, w = _inputs()
    gm = compile_graph(aten_graph(positions, x, w), [x, w])
    with OpLog() as log:
        got = gm(x, w)
    assert PER_CALL_BANNED.isdisjoint(log.ops), log.ops
    assert not log.transfers
    torch.testing.assert_close(got, positions(x, w))
    # The folded constants are computed once: a second call gives the same values.
    torch.testing.assert_close(gm(x, w), positions(x, w))


@needs_interpreter
def test_constants_returned_to_the_caller_stay_fresh_per_call():
    def ramp(x):
        return torch.arange(x.shape[0], dtype=x.dtype), torch.exp(x)

    x = _inputs()[1]
    gm = compile_graph(aten_graph(ramp, x), [x])
    first, second = gm(x)[0], gm(x)[0]
    first.add_(100)
    torch.testing.assert_close(second, torch.arange(32, dtype=x.dtype))


def causal_bias(x):
    # GPT-2's mask: positions (iota, +1) are small; the (n, n) mask made from them is not
    n = x.shape[-1]
    pos = torch.arange(n, device=x.device) + 1
    mask = torch.where(pos[:, None] >= pos[None, :], 1.0, 0.0)
    return x @ mask  # the mask is read by a matmul: it is written out by its own kernel


@needs_interpreter
def test_small_constants_feeding_a_large_input_free_kernel_are_folded():
    x = torch.randn(2, 600, 600)  # the mask is 1.44 MB, over the folding limit
    gm = compile_graph(aten_graph(causal_bias, x), [x])
    code = gm.code
    assert "iota" not in code and "arange" not in code  # the positions are a constant now
    got = gm(x)
    torch.testing.assert_close(got, causal_bias(x))


@needs_interpreter
def test_random_values_are_not_folded():
    def noisy(x):
        return torch.exp(x) + torch.rand(x.shape)

    x = _inputs()[1]
    gm = compile_graph(aten_graph(noisy, x), [x])
    assert not torch.equal(gm(x), gm(x))


@needs_interpreter
def test_torch_compile_reports_the_folded_constants():
    x, w = _inputs()
    torch._dynamo.reset()
    mark = history_mark()
    # positions read by a matmul (positions read by a kernel are computed inside it)
    got = torch.compile(weighted_positions, backend=fuselint_backend)(x, w)
    torch.testing.assert_close(got, weighted_positions(x, w))
    assert any(r.constants for r in reports_since(mark))


def test_unknown_option_is_one_clear_error():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="fuselint backend options are"):
        torch.compile(positions, backend="fuselint", options={"cudagrahps": True})(*_inputs())


@needs_interpreter
def test_cudagraphs_option_off_the_gpu_runs_normally_and_says_why(caplog):
    x, w = _inputs()
    torch._dynamo.reset()
    mark = history_mark()
    with caplog.at_level(logging.WARNING, logger="fuselint.backend"):
        compiled = torch.compile(positions, backend="fuselint", options={"cudagraphs": True})
        for _ in range(3):
            torch.testing.assert_close(compiled(x, w), positions(x, w))
    assert "runs without CUDA graphs: inputs are not all CUDA tensors" in caplog.text
    (report,) = reports_since(mark)
    assert report.replay is not None and report.replay.replays == 0


def batch_norm_like(x, w, b):
    # Inductor's batch-norm decomposition reads its parameters through unsqueeze pairs.
    return torch.relu(x * w.unsqueeze(-1).unsqueeze(-1) + b[:, None, None]).permute(0, 2, 3, 1)


def _bn_inputs():
    gen = torch.Generator().manual_seed(1)
    return (
        torch.randn(2, 8, 4, 4, generator=gen),
        torch.randn(8, generator=gen),
        torch.randn(8, generator=gen),
    )


@needs_interpreter
def test_kernels_read_views_of_their_inputs_without_view_ops(unlogged_launches):
    x, w, b = _bn_inputs()
    gm = compile_graph(aten_graph(batch_norm_like, x, w, b), [x, w, b])
    with OpLog() as log:
        got = gm(x, w, b)
    views = [op for op in log.ops if op in {"aten.unsqueeze", "aten.slice", "aten.view", "aten.expand"}]
    assert not views, log.ops
    torch.testing.assert_close(got, batch_norm_like(x, w, b))


@needs_interpreter
def test_a_kernel_falling_back_redoes_the_folded_views():
    x, w, b = _bn_inputs()
    gm = compile_graph(aten_graph(batch_norm_like, x, w, b), [x, w, b])
    wide = torch.stack([w, torch.zeros_like(w)], 1).reshape(-1)[::2]  # w's values at stride 2
    assert wide.stride() == (2,)
    kernels = [n.target for n in gm.graph.nodes if isinstance(n.target, FusedKernel)]
    assert kernels and any(k.views for k in kernels)
    torch.testing.assert_close(gm(x, wide, b), batch_norm_like(x, w, b))
    assert sum(k.fallback_calls for k in kernels) == 1


def test_graphs_that_cannot_be_recorded_say_why():
    x = torch.randn(4)

    def bump(t):
        t.add_(1)
        return t * 2

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # CUDA tensors as the compiler sees them, on any machine
        cuda_x = torch.empty(4, device="cuda")
    gm = torch.fx.symbolic_trace(lambda t: torch.ops.aten.add_.Tensor(t, 1) * 2)
    for n in gm.graph.nodes:
        n.meta["val"] = cuda_x
    assert "writes to a tensor in place" in why_not_recordable(gm, [cuda_x])
    assert why_not_recordable(aten_graph(torch.exp, x), [x]) == "inputs are not all CUDA tensors"
    with pytest.raises(ValueError, match="fuselint backend options are"):
        fuselint_backend(aten_graph(bump, x), [x], options="cudagraphs")


def _replayed(static: torch.Tensor, value: float) -> None:
    """What a replay does to a recording's output memory: writes over it."""
    static.fill_(value)


def test_lent_outputs_dropped_by_the_caller_are_overwritten_without_a_copy():
    static = torch.zeros(6)
    lent = LentOutputs((static, 3))
    (alias, n) = lent.lend()
    assert n == 3 and alias.data_ptr() == static.data_ptr()
    del alias
    assert lent.reclaim()
    _replayed(static, 1.0)
    (again, _) = lent.lend()
    assert again.data_ptr() == static.data_ptr() and bool((again == 1.0).all())


def test_lent_outputs_the_caller_keeps_move_before_the_next_replay():
    static = torch.arange(6.0)
    lent = LentOutputs((static, static[2:]))  # two outputs over one storage
    kept, kept_view = lent.lend()
    assert lent.reclaim()  # only the lent aliases hold it: they get memory of their own
    _replayed(static, -1.0)
    assert kept.data_ptr() != static.data_ptr()
    assert kept.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and kept_view.tolist() == [2.0, 3.0, 4.0, 5.0]
    assert lent.reclaim()  # the moved aliases hold the recording's memory no more
    (fresh, _) = lent.lend()
    assert fresh.data_ptr() == static.data_ptr()


def test_lent_outputs_held_through_a_derived_view_are_not_reclaimed():
    static = torch.arange(4.0)
    lent = LentOutputs((static,))
    (alias,) = lent.lend()
    row = alias[1:]  # a view the caller made: it cannot be moved
    del alias
    assert not lent.reclaim()
    del row
    assert lent.reclaim()


def test_lent_outputs_of_two_replays_keep_separate_version_counters():
    """In eager two calls return two unrelated tensors: an in-place op on the second call's
    output must not invalidate the first's, which autograd saved (a false 'modified by an
    inplace operation' when the aliases shared the recording's counter)."""
    static = torch.arange(4.0)
    lent = LentOutputs((static,))
    (first,) = lent.lend()
    weight = torch.ones(4, requires_grad=True)
    loss = (weight * first).sum()  # saves `first` for the backward
    assert lent.reclaim()
    _replayed(static, -1.0)
    (second,) = lent.lend()
    second.add_(1.0)
    loss.backward()
    assert weight.grad.tolist() == [0.0, 1.0, 2.0, 3.0] and second.tolist() == [0.0] * 4


class _PoolGraph:
    """A recorded graph's replay as memory sees it: it writes its outputs and, in a pool that
    recordings share, may write its temporaries where another recording's outputs lie."""

    def __init__(self, writes: list) -> None:
        self.writes = writes

    def replay(self) -> None:
        for memory, value in self.writes:
            _replayed(memory, value)


def test_a_replay_moves_the_outputs_another_layout_lent_from_the_shared_pool():
    """The layouts of a dynamic graph are recorded into one memory pool: a later recording's
    outputs may lie in an earlier one's temporaries, which that one's replay writes over."""
    a_out, b_out = torch.zeros(3), torch.zeros(3)
    replay = GraphReplay(lambda: None, static=False)
    record_a = Recording(_PoolGraph([(a_out, 1.0), (b_out, -9.0)]), [], (), (), LentOutputs((a_out,)))
    record_b = Recording(_PoolGraph([(b_out, 2.0)]), [], (), (), LentOutputs((b_out,)))
    replay._recorded = {"a": record_a, "b": record_b}
    (kept_b,) = replay._replay(record_b, ())
    (kept_a,) = replay._replay(record_a, ())
    assert kept_b.tolist() == [2.0] * 3 and kept_a.tolist() == [1.0] * 3


def test_lent_outputs_held_through_a_view_of_an_alias_given_other_memory_are_not_reclaimed():
    """An alias the caller pointed at other memory (`.data =`, `set_`) no longer holds the
    recording's: it must not excuse a view of that memory the caller made before."""
    static = torch.arange(4.0)
    lent = LentOutputs((static,))
    (alias,) = lent.lend()
    row = alias[1:]
    alias.data = torch.zeros(4)
    assert not lent.reclaim()  # a replay would write under `row`
    del row
    assert lent.reclaim()
