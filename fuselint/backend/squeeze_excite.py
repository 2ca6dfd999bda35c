"""Convolutions of a pooled 1x1 image (squeeze-excite) as a reduction the planner fuses.

EfficientNet's and MobileNetV3's squeeze-excite gate pools each image to ``(N, C, 1, 1)`` and
runs two 1x1 convolutions on it: each is a ``(N, C) x (C, O)`` product of a few MFLOP, which
cuDNN or cuBLAS computes in a few microseconds of GPU time but which costs a host call of
15-20 µs (bench/results/h200-s12/hl-eff.txt: EfficientNet-B0's 81 convolutions take 1588 of the
2507 µs its call issues), and the bias and activation between them a launch of their own.

:func:`reduce_pooled_convolutions` writes such a convolution, in an inference graph on a 16-bit
or float32 image, where its readers end in another library call (see :func:`_ends_in_library`: the
gate's first convolution, not the one whose sigmoid scales the image), as what it computes:

    out[n, o] = sum_c float(x[n, c]) * float(w[o, c])  (+ float(bias[o]))   in float32, rounded once

that is ``(x.view(N, 1, C).float() * w.view(1, O, C).float()).sum(-1)``, viewed back to
``(N, O, 1, 1)``. The planner fuses the product into the sum (one reduction kernel, no
``(N, O, C)`` tensor written) and the bias and the activation after it into the same kernel.
The products of 16-bit numbers are exact in float32, and the sum accumulates in float32, as the
GEMM's does (in another order); the bias is added before the one rounding, where the
convolution's result was rounded before its bias was added. In float32 the sum is a plain float32
sum, never TF32 (at least as exact as the library call, which may use TF32 where the user allows it),
and the launch of its bias and activation joins it (EfficientNet-B0 in float32 launched 184 kernels per
call to Inductor's 183 before, bench/results/h100-s16/kl-efficientnet.txt). Only small products are rewritten
(``MAX_MACS``): on an H200, EfficientNet-B0's summed GPU time per call was 1971 µs with its gate
convolutions reduced against 2069 µs with them in cuDNN and cuBLAS. Such a convolution of few
channels is not a patch convolution here (patchify's GEMM is a library call).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.ops import HALF
from fuselint.backend.runtime import can_generate_for
from fuselint.graph.fusion_graph import op_kind
from fuselint.graph.layout import NewNodes, rewrite_each

aten = torch.ops.aten
prims = torch.ops.prims

# The largest product rewritten, in multiply-adds: EfficientNet-B0's largest squeeze-excite
# convolution at batch 64 is 64 x 1152 x 48 = 3.5M.
MAX_MACS = 1 << 23


_FLOATS = (*HALF, torch.float32)


def pooled_convolution(n: torch.fx.Node) -> bool:
    """Is `n` a small 16- or 32-bit convolution of a 1x1 image by a 1x1 kernel (module docstring)?"""
    if n.op != "call_function" or n.target is not aten.convolution.default or len(n.args) != 9:
        return False
    x, w, bias, _stride, padding, _dilation, transposed, _out_pad, groups = n.args
    vals = [getattr(a, "meta", {}).get("val") for a in (x, w, n)]
    if not all(isinstance(v, torch.Tensor) for v in vals) or transposed or groups != 1:
        return False
    xv, wv, out = vals
    if xv.dim() != 4 or wv.dim() != 4 or xv.dtype not in _FLOATS or wv.dtype != xv.dtype:
        return False
    if not all(type(s) is int for s in (*xv.shape, *wv.shape)):
        return False
    batch, channels, h, wd = xv.shape
    if (h, wd) != (1, 1) or tuple(wv.shape[1:]) != (channels, 1, 1) or any(p != 0 for p in padding):
        return False
    if tuple(out.shape) != (batch, wv.shape[0], 1, 1):
        return False
    return batch * channels * wv.shape[0] <= MAX_MACS and can_generate_for(xv.device) and _ends_in_library(n)


def _ends_in_library(conv: torch.fx.Node) -> bool:
    """Do the convolution's readers, through pointwise ops and views of its own size, end only
    in library calls (the next convolution of the gate)? Those read 16-bit operands, so the
    values on the way are rounded to 16 bits there anyway, and the reduction, which rounds once
    after its pointwise readers, is at least as exact. A chain that ends elsewhere keeps the convolution: the gate's
    sigmoid, computed by the reduction and stored in 16 bits, would multiply the image rounded,
    where after a library convolution the gate's kernel computes it in float32 (MobileNetV3's
    maximum error against float32 over 12 batches 0.171 against 0.125, bench/results/h200-s12/)."""
    size = conv.meta["val"].numel()
    stack, seen = [conv], set()
    while stack:
        node = stack.pop()
        for user in node.users:
            if user in seen:
                continue
            seen.add(user)
            kind = op_kind(user)
            if kind in ("matmul", "conv"):  # a library call: reads its operands as stored, in 16 bits
                continue
            if kind not in ("pointwise", "view"):
                return False
            val = user.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.numel() != size:
                return False  # broadcast into the image (the gate's multiply): rounding counts there
            stack.append(user)
    return True


def reduce_pooled_convolutions(gm: torch.fx.GraphModule) -> int:
    """Rewrite each convolution of a pooled image in `gm` (module docstring); how many."""
    return rewrite_each(gm, [n for n in gm.graph.nodes if pooled_convolution(n)], _rewrite)


def _equivalent_strides(got: torch.Tensor, want: torch.Tensor) -> bool:
    """One shape and dtype, and the same strides along every dim longer than 1."""
    return (got.shape, got.dtype) == (want.shape, want.dtype) and all(
        g == w for g, w, size in zip(got.stride(), want.stride(), got.shape, strict=True) if size > 1
    )


def _rewrite(graph: torch.fx.Graph, conv: torch.fx.Node) -> int:
    x, w, bias = conv.args[:3]
    batch, channels = x.meta["val"].shape[:2]
    out_channels = w.meta["val"].shape[0]
    dtype = x.meta["val"].dtype
    new = NewNodes(graph, conv)
    try:
        with graph.inserting_before(conv):
            rows = new(
                prims.convert_element_type.default,
                new(aten.view.default, x, [batch, 1, channels]),
                torch.float32,
            )
            cols = new(
                prims.convert_element_type.default,
                new(aten.view.default, w, [1, out_channels, channels]),
                torch.float32,
            )
            total = new(aten.sum.dim_IntList, new(aten.mul.Tensor, rows, cols), [2])
            if bias is not None:
                total = new(
                    aten.add.Tensor, total, new(prims.convert_element_type.default, bias, torch.float32)
                )
            out = new(
                aten.view.default,
                new(prims.convert_element_type.default, total, dtype),
                [batch, out_channels, 1, 1],
            )
        if not _equivalent_strides(out.meta["val"], conv.meta["val"]):
            raise ValueError("another layout")
    except Exception:  # a view the operands' strides cannot take, or another layout: keep the convolution
        new.undo()
        return 0
    conv.replace_all_uses_with(out)
    graph.erase_node(conv)
    return 1
