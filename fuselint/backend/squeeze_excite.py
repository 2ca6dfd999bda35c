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
convolution's result was rounded before its bias was added. In float32 the sum is a float32 sum (of
operands rounded as the next paragraph says where the library call would use TF32), and the launch of
its bias and activation joins it (EfficientNet-B0 in float32 launched 184 kernels per call to
Inductor's 183 before, bench/results/h100-s16/kl-efficientnet.txt).

Where the library call would round to TF32 (a float32 convolution on a GPU while the user lets cuDNN
use TF32, PyTorch's default), the reduction rounds its operands as cuDNN does: each to TF32's 10-bit
mantissa, to nearest even (:func:`round_to_tf32`), their products then exact and summed in float32.
On an H200 cuDNN's results for MobileNetV3's 8 and EfficientNet-B0's 16 gate convolutions were within
1.8e-7-2.6e-6 (relative) of the float64 product of operands so rounded, 2.4e-4-7.7e-4 of the unrounded
one, 8e-4-1.7e-3 of truncated operands (bench/results/h200-s24/tf32_rounding*.txt; cuDNN may also
pick an IEEE algorithm where TF32 is allowed: both models' stems came out so). Summed exactly instead,
MobileNetV3's gates had raised the whole model's error at timm's initial BatchNorm to 1.19x
Inductor's (eager with its gates so computed: 1.20x eager's; so rounded, 1.000x). The setting is read
when the graph compiles; a graph so rounded records it (:attr:`CompileReport.conv_tf32`), and its
calls check it, compiling the graph again for the other setting when it changes
(:class:`fuselint.backend.TF32Switch`).

Only small products are rewritten (``MAX_MACS``): on an H200, EfficientNet-B0's summed GPU time per call was 1971 µs with its gate
convolutions reduced against 2069 µs with them in cuDNN and cuBLAS. Such a convolution of few
channels is not a patch convolution here (patchify's GEMM is a library call).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.callgen import conv_allow_tf32
from fuselint.backend.ops import HALF
from fuselint.backend.runtime import can_generate_for, direct_impl
from fuselint.graph.fusion_graph import op_kind
from fuselint.graph.layout import NewNodes, rewrite_each

aten = torch.ops.aten
prims = torch.ops.prims

# The largest product rewritten, in multiply-adds: EfficientNet-B0's largest squeeze-excite
# convolution at batch 64 is 64 x 1152 x 48 = 3.5M.
MAX_MACS = 1 << 23


_FLOATS = (*HALF, torch.float32)
# Devices whose float32 convolutions may run in TF32 when the user allows it (tests add "cpu").
TF32_DEVICES = ("cuda",)


@torch.library.custom_op("fuselint::round_to_tf32", mutates_args=(), tags=(torch.Tag.pointwise,))
@direct_impl("fuselint::round_to_tf32")
def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 `x` rounded to TF32's 10-bit mantissa, to nearest even, as cuDNN rounds a TF32
    convolution's operands: the 13 low bits dropped after adding half of their unit (less one when
    the bit kept last is even). NaN stays NaN; past TF32's largest value a number becomes infinite."""
    x = x.contiguous()
    bits = x.view(torch.int32)
    kept = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return torch.where(torch.isnan(x), x, kept.view(torch.float32))


@round_to_tf32.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def cudnn_rounds_to_tf32() -> bool:
    """Would ATen hand a float32 CUDA convolution to cuDNN with TF32 allowed? (With cuDNN off it
    runs ATen's own convolution, whose GEMM follows the matmul setting: those sums stay exact.)"""
    return torch._C._get_cudnn_enabled() and conv_allow_tf32()


def _rounds_like_tf32(n: torch.fx.Node) -> bool:
    """Is `n` a float32 convolution on a device where cuDNN's TF32 setting decides its rounding?"""
    val = n.meta.get("val")
    return val.dtype == torch.float32 and val.device.type in TF32_DEVICES


def pooled_convolution(n: torch.fx.Node) -> bool:
    """Is `n` a small 16- or 32-bit convolution of a 1x1 image by a 1x1 kernel (module docstring)?"""
    macs = _pooled_product(n)
    return (
        macs is not None
        and macs <= MAX_MACS
        and can_generate_for(n.meta["val"].device)
        and _ends_in_library(n)
    )


def _pooled_product(n: torch.fx.Node) -> int | None:
    """The multiply-adds of `n` when it is a 16- or 32-bit convolution of a 1x1 image by a 1x1
    kernel (what its shapes say; which readers it has is :func:`pooled_convolution`'s), else None."""
    if n.op != "call_function" or n.target is not aten.convolution.default or len(n.args) != 9:
        return None
    x, w, bias, _stride, padding, _dilation, transposed, _out_pad, groups = n.args
    vals = [getattr(a, "meta", {}).get("val") for a in (x, w, n)]
    if not all(isinstance(v, torch.Tensor) for v in vals) or transposed or groups != 1:
        return None
    xv, wv, out = vals
    if xv.dim() != 4 or wv.dim() != 4 or xv.dtype not in _FLOATS or wv.dtype != xv.dtype:
        return None
    if not all(type(s) is int for s in (*xv.shape, *wv.shape)):
        return None
    batch, channels, h, wd = xv.shape
    if (h, wd) != (1, 1) or tuple(wv.shape[1:]) != (channels, 1, 1) or any(p != 0 for p in padding):
        return None
    if tuple(out.shape) != (batch, wv.shape[0], 1, 1):
        return None
    return batch * channels * wv.shape[0]


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


def follows_tf32(gm: torch.fx.GraphModule) -> bool:
    """Could :func:`reduce_pooled_convolutions` rewrite a convolution of `gm` that cuDNN's TF32
    setting rounds? Asked before the graph compiles, so by shapes alone (which readers a
    convolution has may change on the way; its shapes, dtype and device do not)."""
    return any(_pooled_product(n) is not None and _rounds_like_tf32(n) for n in gm.graph.nodes)


def reduce_pooled_convolutions(gm: torch.fx.GraphModule) -> tuple[int, bool | None]:
    """Rewrite each convolution of a pooled image in `gm` (module docstring): how many, and the TF32
    setting their rounding follows (None where no rewritten convolution has one)."""
    found = [n for n in gm.graph.nodes if pooled_convolution(n)]
    tf32 = cudnn_rounds_to_tf32() if any(_rounds_like_tf32(n) for n in found) else None
    follows: list[bool] = []

    def rewrite(graph: torch.fx.Graph, conv: torch.fx.Node) -> int:
        rounds = tf32 is True and _rounds_like_tf32(conv)
        done = _rewrite(graph, conv, rounds)
        follows.append(bool(done) and _rounds_like_tf32(conv))
        return done

    done = rewrite_each(gm, found, rewrite)
    return done, tf32 if any(follows) else None


def _equivalent_strides(got: torch.Tensor, want: torch.Tensor) -> bool:
    """One shape and dtype, and the same strides along every dim longer than 1."""
    return (got.shape, got.dtype) == (want.shape, want.dtype) and all(
        g == w for g, w, size in zip(got.stride(), want.stride(), got.shape, strict=True) if size > 1
    )


def _rewrite(graph: torch.fx.Graph, conv: torch.fx.Node, tf32: bool) -> int:
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
            if tf32:  # the operands as cuDNN rounds them (module docstring)
                rows = new(torch.ops.fuselint.round_to_tf32.default, rows)
                cols = new(torch.ops.fuselint.round_to_tf32.default, cols)
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
