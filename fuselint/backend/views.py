"""Fold the views that feed a kernel into the kernel's indexing.

A kernel's strides are baked into its code, so a view that feeds it (the ``unsqueeze``
pairs of a batch norm's parameters, the ``permute`` and ``view`` of attention heads) needs
no op of its own: the kernel can take the tensor the view is taken of, at the same
address, and read it through the view's strides. Each such view costs a few µs of host
time per call in ATen (ResNet-50 runs 424 ``unsqueeze`` per call). :func:`fold_input_views`
passes the base instead wherever the chain of views keeps the base's storage offset and
dtype; the kernel then checks the base's layout per call and, if it ever falls back to
ATen, redoes the chain of views on the base it was given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx

from fuselint.backend.runtime import FusedKernel, keeps_effects
from fuselint.graph.aliasing import is_view


@dataclass(frozen=True)
class ViewChain:
    """The view ops from a base tensor to what a kernel reads, to redo them if it falls back."""

    steps: tuple[tuple[object, tuple, dict], ...]  # (op, arguments after the tensor, kwargs)

    def __call__(self, base: torch.Tensor) -> torch.Tensor:
        t = base
        for op, args, kwargs in self.steps:
            t = op(t, *args, **kwargs)
        return t


def view_base(node: torch.fx.Node) -> tuple[torch.fx.Node, ViewChain] | None:
    """The tensor `node` (a chain of views) reads at the same address and dtype, and the chain."""
    val = node.meta.get("val")
    if not is_view(node) or not isinstance(val, torch.Tensor):
        return None
    base, steps = node, []
    while is_view(base):
        first = base.args[0] if base.args else None
        rest = base.args[1:]
        if not isinstance(first, torch.fx.Node) or any(isinstance(a, torch.fx.Node) for a in rest):
            return None
        if any(isinstance(v, torch.fx.Node) for v in base.kwargs.values()):
            return None
        steps.append((base.target, tuple(rest), dict(base.kwargs)))
        base = first
    bval = base.meta.get("val")
    if not isinstance(bval, torch.Tensor) or bval.dtype != val.dtype:
        return None
    if val.storage_offset() != bval.storage_offset():
        return None
    return base, ViewChain(tuple(reversed(steps)))


def fold_input_views(gm: torch.fx.GraphModule) -> int:
    """Pass each kernel the base of the views it reads; the number of kernel inputs changed."""
    folded = 0
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, FusedKernel):
            continue
        kernel: FusedKernel = n.target
        args = list(n.args)
        for i, a in enumerate(args):
            found = view_base(a) if isinstance(a, torch.fx.Node) else None
            if found is None:
                continue
            base, chain = found
            bval = base.meta["val"]
            kernel.read_through_view(i, tuple(bval.shape), tuple(bval.stride()), chain)
            args[i] = base
            folded += 1
        n.args = tuple(args)
    if folded:
        gm.graph.eliminate_dead_code(is_impure_node=keeps_effects)
        gm.recompile()
    return folded
