"""Max-pool's input gradient as one gather kernel.

A training graph's `max_pool2d_with_indices_backward` runs as ATen's kernel: for ResNet-50's
stem (32 x 64 x 112 x 112, channels_last, bf16) `max_pool_backward_nhwc` takes 238 µs of a
step on an H100 (docs/NOTES.md), where the bytes it must move take about 40. This pass runs it
as `fuselint::max_pool2d_grad`, whose Triton kernel computes each input element's gradient as
ATen's CUDA kernels do, by gathering: it visits the (at most ceil(k / s) per dim) output windows
that cover the element and adds the gradient of each whose recorded argmax is this element, in
a fixed order (so the sum is deterministic), in float32, rounded once.
"""

from __future__ import annotations

import torch
import torch.fx
import triton
import triton.language as tl

from fuselint.backend.runtime import HandKernel, can_generate_for
from fuselint.graph.layout import channels_last

aten = torch.ops.aten


@triton.jit
def _gather_grads(
    grad, indices, out, numel, C, H, W, OH, OW,
    gs_n, gs_c, gs_h, gs_w,  # grad's and indices' strides (the same layout: checked by the caller)
    os_n, os_c, os_h, os_w,
    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PH: tl.constexpr, PW: tl.constexpr, RH: tl.constexpr, RW: tl.constexpr,
    CHANNELS_LAST: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = i < numel
    if CHANNELS_LAST:  # walk the output in its memory order: channels fastest
        c = i % C
        w = (i // C) % W
        h = (i // (C * W)) % H
        n = i // (C * W * H)
    else:
        w = i % W
        h = (i // W) % H
        c = (i // (W * H)) % C
        n = i // (W * H * C)
    # the first window (oh, ow) whose span [o * S - P, o * S - P + K) holds (h, w)
    oh0 = tl.maximum(h + PH - KH + SH, 0) // SH
    ow0 = tl.maximum(w + PW - KW + SW, 0) // SW
    here = h * W + w
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for dh in tl.static_range(RH):
        for dw in tl.static_range(RW):
            oh = oh0 + dh
            ow = ow0 + dw
            covers = live & (oh < OH) & (ow < OW) & (oh * SH - PH <= h) & (ow * SW - PW <= w)
            at = n * gs_n + c * gs_c + oh * gs_h + ow * gs_w
            arg = tl.load(indices + at, mask=covers, other=-1)
            g = tl.load(grad + at, mask=covers & (arg == here), other=0.0)
            acc += g.to(tl.float32)
    tl.store(out + n * os_n + c * os_c + h * os_h + w * os_w, acc.to(out.dtype.element_ty), mask=live)


def _layout(x: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if channels_last(x) else torch.contiguous_format


GATHER_GRADS = HandKernel(_gather_grads, "max-pool gradients")


@torch.library.custom_op("fuselint::max_pool2d_grad", mutates_args=())
def max_pool2d_grad(
    grad: torch.Tensor,
    like: torch.Tensor,
    indices: torch.Tensor,
    kernel_size: list[int],
    stride: list[int],
    padding: list[int],
) -> torch.Tensor:
    """`max_pool2d_with_indices_backward` (dilation 1) of `grad` (N, C, OH, OW): the gradient of
    the pooled input, shaped and laid out as `like` (the input)."""
    out = torch.empty_like(like, memory_format=_layout(like))
    if not can_generate_for(grad.device) or grad.stride() != indices.stride():
        return _aten(grad, like, indices, kernel_size, stride, padding)
    N, C, H, W = like.shape
    OH, OW = grad.shape[-2:]
    kh, kw = kernel_size
    sh, sw = stride
    ph, pw = padding
    numel = out.numel()
    if numel == 0:
        return out
    block = 512
    launched = GATHER_GRADS.launch(
        (triton.cdiv(numel, block),),
        grad, indices, out, numel, C, H, W, OH, OW,
        *grad.stride(), *out.stride(),
        KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, RH=triton.cdiv(kh, sh), RW=triton.cdiv(kw, sw),
        CHANNELS_LAST=_layout(out) == torch.channels_last, BLOCK=block,
    )  # fmt: skip
    return out if launched else _aten(grad, like, indices, kernel_size, stride, padding)


def _aten(grad, like, indices, kernel_size, stride, padding) -> torch.Tensor:
    return aten.max_pool2d_with_indices_backward(
        grad, like, kernel_size, stride, padding, [1, 1], False, indices
    ).contiguous(memory_format=_layout(like))


@max_pool2d_grad.register_fake
def _(grad, like, indices, kernel_size, stride, padding):
    return torch.empty_like(like, memory_format=_layout(like))


def _replaceable(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten.max_pool2d_with_indices_backward.default:
        return False
    grad, like, kernel, stride, padding, dilation, _ceil, indices = node.args
    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in (grad, like, indices)]
    if not all(isinstance(v, torch.Tensor) and v.dim() == 4 for v in vals):
        return False
    g, x, i = vals
    out = node.meta.get("val")
    return (
        list(dilation) == [1, 1]
        and len(kernel) == 2
        and len(stride) == 2
        and len(padding) == 2
        and g.stride() == i.stride()
        and isinstance(out, torch.Tensor)
        and out.stride() == torch.empty_like(x, memory_format=_layout(x)).stride()
        and can_generate_for(g.device)
    )


def gather_pool_grads(gm: torch.fx.GraphModule) -> int:
    """Turn gm's max-pool input gradients into `max_pool2d_grad`; how many were."""
    graph = gm.graph
    nodes = [n for n in graph.nodes if _replaceable(n)]
    for node in nodes:
        grad, like, kernel, stride, padding, _dilation, _ceil, indices = node.args
        with graph.inserting_before(node):
            new = graph.call_function(
                torch.ops.fuselint.max_pool2d_grad.default,
                (grad, like, indices, list(kernel), list(stride), list(padding)),
            )
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    if nodes:
        gm.recompile()
    return len(nodes)
