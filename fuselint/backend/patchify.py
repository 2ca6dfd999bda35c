"""A convolution over non-overlapping patches of a few-channel image, run as one GEMM.

A 2-d convolution whose stride equals its kernel, unpadded, undilated and ungrouped (the patch
embedding of ViT, DeiT, BEiT: 16 x 16 patches of the 3-channel image) is a matmul: each output
pixel is one patch, flattened, times the weight flattened to ``(out_channels, in_channels * kh *
kw)``. cuDNN runs it as an implicit GEMM whose tensor-core kernels take channels in multiples of
8: for 3 channels it first converts the image and the weight to NHWC (two more kernels), then
runs a kernel far from the GEMM's speed. ViT-B/16 on 32 images in bf16 on an H100: 80 µs of
conversions and 232 µs of convolution for 7.4 GFLOP, the same under Inductor
(``bench/results/h100-s8/kernel_list-bert32-vit.txt``).

:func:`patchify_convolutions` writes each such convolution, in an inference graph, as

    patches = x.view(N, C, H', kh, W', kw).permute(0, 2, 4, 1, 3, 5)    # one copy kernel
    out = addmm(bias, patches.reshape(N * H' * W', C * kh * kw), w.view(O, -1).t())
    out.view(N, H', W', O).permute(0, 3, 1, 2)                          # channels_last

read through the same views as the convolution's result was, where no reader's own result
changes layout (ViT flattens the grid and transposes it into tokens: a view of the channels_last
result, no copy); elsewhere a copy restores the convolution's layout. The sum over each patch runs in the GEMM's order instead of cuDNN's: the
same products in fp32 accumulation, in another order (a convolution's own algorithm choice
changes that order too). Only images whose channel count is not a multiple of 8 are rewritten:
wider inputs take cuDNN's aligned kernels, and their patches would be a larger copy.
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.bias import VIEWS
from fuselint.backend.runtime import can_generate_for
from fuselint.backend.squeeze_excite import pooled_convolution
from fuselint.graph.layout import NewNodes, rewrite_each, same_layout, value_with

aten = torch.ops.aten

# cuDNN's tensor-core convolution kernels read channels in groups of this many.
CHANNEL_ALIGNMENT = 8

# Ops that read their input's memory at strides of their own (as_strided's explicit strides):
# their values change with the input's strides even where their result's strides do not.
STRIDED = {aten.as_strided_copy.default, aten.as_strided_scatter.default}


def _patch_conv(n: torch.fx.Node) -> bool:
    if n.op != "call_function" or n.target is not aten.convolution.default or len(n.args) != 9:
        return False
    x, w, _, stride, padding, dilation, transposed, _, groups = n.args
    xv, wv, out = x.meta.get("val"), w.meta.get("val"), n.meta.get("val")
    if not all(isinstance(v, torch.Tensor) for v in (xv, wv, out)) or xv.dim() != 4 or transposed:
        return False
    kh, kw = wv.shape[2:]
    return (
        groups == 1
        and list(stride) == [kh, kw]
        and all(p == 0 for p in padding)
        and all(d == 1 for d in dilation)
        and xv.shape[1] % CHANNEL_ALIGNMENT != 0
        and xv.shape[2] % kh == 0
        and xv.shape[3] % kw == 0
        and xv.dtype.is_floating_point
        and can_generate_for(xv.device)
        and not pooled_convolution(n)  # a reduction kernel of its own (squeeze_excite.py)
    )


def patchify_convolutions(gm: torch.fx.GraphModule) -> int:
    """Rewrite each patch convolution of `gm` (module docstring); how many."""
    return rewrite_each(gm, [n for n in gm.graph.nodes if _patch_conv(n)], _rewrite)


def _rewrite(graph: torch.fx.Graph, conv: torch.fx.Node) -> bool:
    x, w, bias = conv.args[:3]
    n, c, h, wd = x.meta["val"].shape
    o, _, kh, kw = w.meta["val"].shape
    rows, cols = h // kh, wd // kw
    want = conv.meta["val"]
    new = NewNodes(graph, conv)
    try:
        with graph.inserting_before(conv):
            tiles = new(aten.view.default, x, [n, c, rows, kh, cols, kw])
            tiles = new(aten.permute.default, tiles, [0, 2, 4, 1, 3, 5])
            tiles = new(aten.clone.default, tiles, memory_format=torch.contiguous_format)
            patches = new(aten.view.default, tiles, [n * rows * cols, c * kh * kw])
            weight = new(aten.permute.default, new(aten.view.default, w, [o, c * kh * kw]), [1, 0])
            if bias is None:
                flat = new(aten.mm.default, patches, weight)
            else:
                flat = new(aten.addmm.default, bias, patches, weight)
            out = new(aten.permute.default, new(aten.view.default, flat, [n, rows, cols, o]), [0, 3, 1, 2])
            views = views_reading(conv, out) if out.meta["val"].stride() != want.stride() else {}
            if views is None:
                out = new(aten.clone.default, out, memory_format=torch.contiguous_format)
                views = {}
            got = out.meta["val"]
            if (got.shape, got.dtype) != (want.shape, want.dtype) or (
                not views and got.stride() != want.stride()
            ):
                raise ValueError("another layout")
    except Exception:  # a view the input's strides cannot take, or another layout: keep the convolution
        new.undo()
        return False
    conv.replace_all_uses_with(out)
    graph.erase_node(conv)
    for view, val in views.items():
        view.meta["val"] = val
    return True


def views_reading(conv: torch.fx.Node, out: torch.fx.Node) -> dict | None:
    """The views between `conv` and its readers, each with its value when it views `out` (the
    GEMM's channels_last result) instead, where every other reader's result keeps its shape,
    dtype and strides (ViT flattens the patches' grid and transposes it to tokens, which the
    channels_last result gives without a copy); None where some reader's would change."""
    vals: dict[torch.fx.Node, object] = {conv: out.meta["val"]}
    stack = [conv]
    while stack:
        node = stack.pop()
        for user in node.users:
            if _reads_storage(user.target):
                return None
            try:
                got = value_with(user, vals)
            except Exception:  # another view or op that refuses the new strides
                return None
            if user.op == "call_function" and user.target in VIEWS and user.args[0] is node:
                vals[user] = got
                stack.append(user)
                continue
            if not same_layout(got, user.meta.get("val")):
                return None
    del vals[conv]
    return vals


def _reads_storage(target: object) -> bool:
    """Whether `target` is an op outside VIEWS whose values depend on its input's strides: an
    aliasing op (as_strided, _reshape_alias, ... and in-place ops) or one of STRIDED."""
    schema = getattr(target, "_schema", None)
    return target in STRIDED or (
        target not in VIEWS and schema is not None and any(r.alias_info is not None for r in schema.returns)
    )
