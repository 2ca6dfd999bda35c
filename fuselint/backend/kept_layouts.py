"""Weights copied into another layout once, not on every call.

On a GPU the layout pass (:func:`fuselint.graph.layout.gpu_conv_layout`) reads every 2-d
convolution's weight in channels_last, and a weight that is not already laid out so (any kernel
larger than 1x1 that is not depthwise: ResNet-50's 3x3 convolutions and its stem) is copied by
``aten.clone(w, memory_format=torch.channels_last)``, a ``fuselint_clone`` kernel of its own.
The weight is a parameter: the copy gives the same tensor on every call until the user changes
the weight, yet it was launched on every call (17 of ResNet-50's 68 kernels, and the stream's
longest idle gaps on an H200 follow it, bench/results/h200-s24/).

:func:`keep_layout_copies` rewrites, in an inference graph, each such copy whose source is a
parameter or buffer the graph does not write into a :class:`KeptLayout` node: the copy is made
at the first call and kept, and remade in place when the weight's storage or version changes
(``load_state_dict`` and ``weight.mul_(2)`` bump the version; ``.data = t`` moves the storage),
as :class:`fuselint.backend.gemm_groups.JoinedWeights` keeps its joined weights. The storage
copied from is watched through a weak reference, and its being freed counts as a change: a weight
replaced by a new tensor could otherwise be allocated where the old one lay, with the same version
(a fresh tensor's is 0), and pass the check. Weakly, because a graph may never be called again
(after ``model.to(...)`` Dynamo compiles another) and must not keep the old weights. A CUDA-graph
replay, which runs no Python, calls :meth:`KeptLayout.refresh` first; the copy is remade into
the same storage, so the recorded convolution keeps reading it.

The kept copies hold the weights' memory a second time, so a graph keeps at most
``MAX_KEPT_BYTES`` of them, the smallest first: a copy saves one launch however small it is
(the host cost that made ResNet-50 host-bound), and the smaller it is the less memory that
launch costs to save. The bound is the joined weights' (64 MiB): it holds every copy of the
suite's models (ResNet-50's 17 are 43.2 MiB in float32, 21.6 MiB in bf16), and it is small
beside a GPU's memory, while a larger model keeps what fits and copies the rest per call.
"""

from __future__ import annotations

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.multiprocessing.reductions import StorageWeakRef

from fuselint.graph.layout import KEPT, kept_layout_copies

aten = torch.ops.aten
_expired = torch.Storage._expired  # StorageWeakRef.expired without its Python frame


class KeptValue:
    """A value made from graph inputs that are weights, made once and remade in place when one of
    them changes (its storage or version); a subclass says how with ``_make(weights, out)``, which
    makes the value anew when `out` is None and writes it into `out` otherwise.

    `positions` are the graph-input positions of the weights, so that a CUDA-graph replay can
    refresh the value from the call's arguments before it replays (:meth:`refresh`)."""

    def __init__(self, positions: tuple[int, ...], name: str) -> None:
        self.positions = positions
        self.__name__ = name
        self.tensor: torch.Tensor | None = None
        self._key: tuple | None = None
        # the weights' storages as of the key, weakly: once one is freed (`load_state_dict(...,
        # assign=True)`, `.data = t`) a tensor made after could lie at its address with the key's
        # version, so a freed source counts as a change; held weakly, as a graph that is never
        # called again (the model moved to another device or dtype) must not keep the weights
        self._sources: list[StorageWeakRef] = []
        self._cdatas: list[int] = []  # their handles, for the check of every call
        self.remade = 0

    def __call__(self, *weights: torch.Tensor) -> torch.Tensor:
        # every call of a compiled graph asks (ResNet-50's 53 kept copies a call): the weights as
        # they were, in the storages they were, is the answer kept, checked before anything else
        if self._key is not None:
            try:
                key = tuple([(w.data_ptr(), w._version) for w in weights])
            except Exception:  # an inference tensor has no version: the checks below
                key = None
            if key == self._key and self._sources_alive():
                return self.tensor
        return self._remake(weights)

    def _sources_alive(self) -> bool:
        """Whether every storage the key was taken from is still alive (a loop: this runs every
        call, and a generator costs as much as the check)."""
        for cdata in self._cdatas:
            if _expired(cdata):
                return False
        return True

    def _remake(self, weights: tuple) -> torch.Tensor:
        if any(isinstance(w, FakeTensor) or w.is_inference() for w in weights):
            # a fake tensor (a pass computing values) has no data to keep; an inference tensor
            # has no version counter to tell a change: made per call (inside a CUDA-graph
            # recording, each replay makes it again)
            return self._make(weights, None)
        key = tuple((w.data_ptr(), w._version) for w in weights)
        if key != self._key or not self._sources_alive():
            # a tensor of the ordinary kind even when the first call runs under inference_mode,
            # so that a later call outside it may write it in place
            with torch.inference_mode(False), torch.no_grad():
                if self.tensor is None:
                    self.tensor = self._make(weights, None)
                else:  # into the same storage: a recorded CUDA graph reads it there
                    self._make(weights, self.tensor)
            self._key = key
            self._sources = [StorageWeakRef(w.untyped_storage()) for w in weights]
            self._cdatas = [source.cdata for source in self._sources]
            self.remade += 1
        return self.tensor

    def refresh(self, args: tuple) -> None:
        weights = [args[i] for i in self.positions]
        if not any(w.is_inference() for w in weights):
            self(*weights)


class KeptLayout(KeptValue):
    """``aten.clone(w, memory_format=fmt)`` of the weight at graph-input `position`, kept."""

    def __init__(self, position: int, memory_format: torch.memory_format) -> None:
        super().__init__((position,), "kept_layout")
        self.memory_format = memory_format

    def _make(self, weights: tuple, out: torch.Tensor | None) -> torch.Tensor:
        (w,) = weights
        if out is None:
            return aten.clone.default(w, memory_format=self.memory_format)
        return out.copy_(w)


def kept_values(gm: torch.fx.GraphModule) -> list[KeptValue]:
    """What `gm` keeps between calls and checks against its inputs in Python: a CUDA-graph
    replay refreshes each before it runs."""
    return [n.target for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, KeptValue)]


def keep_layout_copies(gm: torch.fx.GraphModule, static: frozenset[int]) -> int:
    """Keep each layout copy of a parameter or buffer between calls (module docstring; which ones:
    `fuselint.graph.layout.kept_layout_copies`); how many. `static`: positions of the graph inputs
    that are parameters or buffers."""
    kept = kept_layout_copies(gm, static)
    for n, position, fmt in kept:
        n.target = KeptLayout(position, fmt)
        n.kwargs = {}
        n.meta[KEPT] = True  # the planner reads it as an input: no kernel per call
    if kept:
        gm.recompile()
    return len(kept)
