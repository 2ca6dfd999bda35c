"""Replay a compiled graph as a CUDA graph: ``options={"cudagraphs": True}``.

A CUDA graph launches every kernel of a call with one host call, so the host cost per
call no longer grows with the kernel count. :class:`GraphReplay` wraps one compiled
graph (PyTorch's ``torch.cuda.CUDAGraph`` does the recording):

- the first call per input layout runs the graph normally (kernels compile, launchers are
  built) and notes where each input lives; the second records on a side stream, after one
  more warm-up there, and every later call replays;
- an input found at the same address on the first two calls (a parameter, a buffer) is
  read in place; any other input is copied into a buffer the recording owns; if an input
  read in place moves later, it becomes a copied one and the graph is recorded again;
- a new input layout (shape, stride, dtype) is recorded separately;
- outputs are lent, not copied: a replay returns aliases of the recording's output memory,
  which the next replay (of any layout: they share one memory pool) overwrites. Before it
  does, the storages' use counts say whether the caller still holds any of it: aliases the caller kept (`out = f(x)` in a loop, a
  training forward's saved activations before a second forward) are moved to memory of
  their own first, and where the caller holds views of it that cannot be moved (a slice of
  an output), that call runs the graph normally instead (counted in :attr:`GraphReplay.held`).
  Inductor's ``reduce-overhead`` neither copies nor moves: it fails on reading an overwritten
  output;
- the recording owns its cuBLAS workspace (made in its pool during capture), so clearing the
  workspaces elsewhere, as Inductor's CUDA graph trees do, cannot pull memory from under it;
- where recording is impossible (CPU tensors, a graph that writes to its inputs, a
  capture error) the graph runs normally and the reason is logged once, at WARNING on
  logger ``fuselint.backend``, and kept in :attr:`GraphReplay.disabled`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.fx

from fuselint.backend.compiler import data_sized_node

log = logging.getLogger("fuselint.backend")


def why_not_recordable(gm: torch.fx.GraphModule, example_inputs: list) -> str | None:
    """The reason `gm` cannot be recorded as a CUDA graph, or None."""
    data_sized = data_sized_node(gm)
    name = data_sized.name if data_sized is not None else getattr(gm, "fuselint_data_sized", None)
    if name is not None:  # its length is read back to the host, and a recording fixes shapes
        return f"{name} has a size only the data decides (unbacked)"
    for n in gm.graph.nodes:
        if n.op == "call_function" and getattr(n.target, "writes_inputs", False):
            return f"the graph writes to a tensor in place ({n.name} stores into its input)"
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if not tensors or any(t.device.type != "cuda" for t in tensors):
        return "inputs are not all CUDA tensors"
    for n in gm.graph.nodes:
        target = n.target
        if n.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            if target._schema.is_mutable:
                return f"the graph writes to a tensor in place ({n.name}: {target})"
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type != "cuda":
                return f"{n.name} makes a tensor on {val.device}"
    return None


def _layout(args: tuple) -> tuple:
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a)
        for a in args
    )


class LentOutputs:
    """A recording's outputs, lent to the caller between one replay and the next.

    :meth:`lend` hands out aliases (new tensors over the same memory); :meth:`reclaim`, before
    the memory is written again, compares each output storage's use count with the count the
    recording itself holds (`baseline`): any excess is the caller's. Excess made only of the
    aliases lent is moved (each alias gets a copy of its own, in place, so the caller's
    objects keep their values); any other excess (a view the caller derived) cannot be moved,
    and the memory stays the caller's."""

    def __init__(self, outputs: tuple) -> None:
        self.outputs = outputs
        self.baseline: dict[int, int] = {}
        for o in outputs:
            if isinstance(o, torch.Tensor):
                key = o.untyped_storage()._cdata
                self.baseline.setdefault(key, 0)
        for key in self.baseline:  # after every output is held, so shared storages count once each
            self.baseline[key] = torch._C._storage_Use_Count(key)
        self._lent: list[tuple[weakref.ref, int, int]] = []

    def lend(self) -> list:
        out = []
        lent = []
        for o in self.outputs:
            if isinstance(o, torch.Tensor):
                # `.data`, not `.detach()`: each alias counts its own versions, as a fresh output
                # does in eager (a shared counter made an in-place op on one call's output
                # invalidate an earlier call's that autograd saved)
                alias = o.data
                lent.append((weakref.ref(alias), o.untyped_storage()._cdata, o.data_ptr()))
                out.append(alias)
            else:
                out.append(o)
        self._lent = lent
        return out

    def reclaim(self) -> bool:
        """True when the memory is free to overwrite (nothing of it held, or what was held moved)."""
        if not self._lent:  # nothing lent since the last reclaim: the caller holds none of it
            return True
        kept: dict[int, list[torch.Tensor]] = {}
        for ref, key, ptr in self._lent:
            alias = ref()
            # an alias the caller pointed elsewhere (`.data =`, `set_`) holds the memory no more
            if alias is not None and alias.data_ptr() == ptr:
                kept.setdefault(key, []).append(alias)
        for key, base in self.baseline.items():
            # `kept` holds Python references to the aliases, not storage references
            if torch._C._storage_Use_Count(key) - base > len(kept.get(key, ())):
                return False
        with torch.no_grad():
            for aliases in kept.values():
                for alias in aliases:
                    alias.data = alias.clone()
        self._lent = []
        return True


@dataclass
class Recording:
    graph: torch.cuda.CUDAGraph
    inputs: list  # what the recording reads: the caller's tensor (in place) or its own buffer
    copied: tuple[int, ...]  # indices of the inputs copied into the recording's buffers
    in_place: tuple[tuple[int, int], ...]  # (index, address) of the inputs read where they are
    outputs: LentOutputs


class GraphReplay:
    """Callable running `fn` (a compiled graph) as recorded CUDA graphs, one per input layout.

    A graph of static shapes (no SymInt among its inputs) has one layout, which Dynamo's
    guards keep fixed, so its calls skip computing one: the per-call host work is one address
    check per input read in place, one copy per moving input, a use-count check per output
    storage, the replay and one alias per output."""

    def __init__(
        self,
        fn: Callable,
        name: str = "graph",
        disabled: str | None = None,
        static: bool = True,
        refresh: Sequence = (),
    ) -> None:
        self.fn = fn
        # values the graph keeps between calls and checks against its inputs in Python
        # (gemm_groups.JoinedWeights, kept_layouts.KeptLayout), which a replay must bring up to
        # date before it runs
        self.refresh = tuple(refresh)
        self.name = name
        self.disabled = disabled
        self.static = static
        self.replays = 0
        self.recordings = 0
        self.held = 0  # calls run normally: the caller held views of the last replay's outputs
        self._first_ptrs: dict[tuple | None, tuple] = {}
        self._moved: dict[tuple | None, set[int]] = {}
        self._recorded: dict[tuple | None, Recording] = {}
        self._pool = None
        if disabled:
            log.warning("fuselint: %s runs without CUDA graphs: %s", name, disabled)

    def __call__(self, *args: object) -> object:
        if self.disabled:
            return self.fn(*args)
        key = None if self.static else _layout(args)
        rec = self._recorded.get(key)
        if rec is not None:
            moved = [i for i, ptr in rec.in_place if args[i].data_ptr() != ptr]
            if not moved:
                return self._replay(rec, args)
            self._moved[key].update(moved)  # read in place no more: record again, copying it
            del self._recorded[key]
        elif key not in self._first_ptrs:
            self._first_ptrs[key] = tuple(_ptr(a) for a in args)
            self._moved[key] = set()
            return self.fn(*args)
        first = self._first_ptrs[key]
        self._moved[key].update(i for i, a in enumerate(args) if _ptr(a) != first[i])
        try:
            rec = self._record(args, self._moved[key])
        except Exception as exc:  # capture refused (a sync, a host read...): run normally from now on
            self.disabled = f"recording failed: {type(exc).__name__}: {exc}".splitlines()[0]
            log.warning("fuselint: %s runs without CUDA graphs: %s", self.name, self.disabled)
            torch.cuda.synchronize()
            return self.fn(*args)
        self._recorded[key] = rec
        return self._replay(rec, args)

    def _record(self, args: tuple, moved: set[int]) -> Recording:
        copied = tuple(i for i in sorted(moved) if isinstance(args[i], torch.Tensor))
        inputs = [
            torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device).copy_(a)
            if i in moved
            else a
            for i, a in enumerate(args)
        ]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # libraries set up per-stream state (cuBLAS workspaces) here
            self.fn(*inputs)
        torch.cuda.current_stream().wait_stream(stream)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        # cuBLAS keeps one workspace per (handle, stream), made on first use and kept until
        # something clears it. A recording that used the warm-up's workspace would replay into
        # memory it does not own: Inductor's CUDA graph trees clear every workspace around each
        # of their recordings (so do memory clean-up helpers), the next empty_cache unmaps it, and
        # the replay faults (`unspecified launch failure`, HF LLaMA beside reduce-overhead) or
        # writes over another tensor. Cleared before, the recording makes its workspace in its
        # own pool, which lives as long as the graph; cleared after, no later matmul outside
        # the recording uses that pool memory while a replay does.
        _clear_cublas_workspaces()
        with torch.cuda.graph(graph, pool=self._pool, stream=stream):
            outputs = self.fn(*inputs)
        _clear_cublas_workspaces()
        self.recordings += 1
        in_place = tuple(
            (i, a.data_ptr()) for i, a in enumerate(args) if i not in moved and isinstance(a, torch.Tensor)
        )
        return Recording(graph, inputs, copied, in_place, LentOutputs(tuple(outputs)))

    def _replay(self, rec: Recording, args: tuple) -> list:
        # every layout is recorded into one pool: a later recording's outputs may lie in an
        # earlier one's temporaries, so any replay may write over any recording's outputs
        if not all(r.outputs.reclaim() for r in self._recorded.values()):
            if not self.held:
                log.info(
                    "fuselint: %s ran without its CUDA graph: the caller holds views of the last "
                    "replay's outputs, which a replay would overwrite",
                    self.name,
                )
            self.held += 1
            return self.fn(*args)
        inputs = rec.inputs
        fresh = [i for i in rec.copied if args[i].data_ptr() != inputs[i].data_ptr()]
        if fresh:
            torch._foreach_copy_([inputs[i] for i in fresh], [args[i] for i in fresh])
        for kept in self.refresh:
            kept.refresh(args)
        rec.graph.replay()
        self.replays += 1
        return rec.outputs.lend()


def _clear_cublas_workspaces() -> None:
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def _ptr(x: object) -> int | None:
    return x.data_ptr() if isinstance(x, torch.Tensor) else None
