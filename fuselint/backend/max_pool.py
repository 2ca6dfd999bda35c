"""Max-pool with indices, forward and backward, as hand-written kernels for training graphs.

A training graph keeps max-pool's indices for its backward, so the lowering's window op (values
only) cannot take it, and ATen ran both halves. For ResNet-50's stem (32 x 64 x 112 x 112,
channels_last, bf16, an H100) that was `max_pool_forward_nhwc` at 119 µs and
`max_pool_backward_nhwc` at 238 µs of a step, where the bytes each must move take about 40
(docs/NOTES.md). Two custom ops replace them:

- `fuselint::max_pool2d_with_indices`: each output keeps its window's maximum and where it was,
  as ATen's kernels choose it: taps visited row by row, a later tap taken only when greater (the
  first of equal maxima wins) or NaN (the last NaN wins), the index `h * W + w` in the input plane.
- `fuselint::max_pool2d_grad`: each input element's gradient by gathering, as ATen's CUDA kernels
  compute it: it visits the (at most ceil(k / s) per dim) windows that cover the element and adds
  the gradient of each whose recorded argmax is this element, in a fixed order (so the sum is
  deterministic), in float32, rounded once.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
import triton
import triton.language as tl

from fuselint.backend.runtime import HandKernel, can_generate_for, direct_impl, interpreting
from fuselint.graph.layout import channels_last

aten = torch.ops.aten


@triton.jit
def _tile(count, C, H, W, CHANNELS_LAST: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    """This program's (n, c, h, w) over an (N, C, H, W) space and which of them exist. In
    channels_last a tile of BLOCK pixels by BLOCK_C channels (channels fastest in memory, one
    division per pixel); otherwise BLOCK elements in NCHW order. WIDE: an offset may pass 2**31,
    so the index arithmetic runs in int64 (slower: emulated division)."""
    start = tl.program_id(0) * BLOCK
    if WIDE:
        start = start.to(tl.int64)
    if CHANNELS_LAST:
        p = (start + tl.arange(0, BLOCK))[:, None]
        c = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C))[None, :]
        live = (p < count) & (c < C)
        w = p % W
        h = (p // W) % H
        n = p // (W * H)
    else:
        i = start + tl.arange(0, BLOCK)
        live = i < count
        w = i % W
        h = (i // W) % H
        c = (i // (W * H)) % C
        n = i // (W * H * C)
    return n, c, h, w, live


@triton.jit
def _pool_with_indices(
    x, out, idx, count, C, H, W, OH, OW,
    xs_n, xs_c, xs_h, xs_w,
    os_n, os_c, os_h, os_w,  # out's and idx's strides (the same layout)
    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PH: tl.constexpr, PW: tl.constexpr, UNSEEN_AT_ZERO: tl.constexpr,
    CHANNELS_LAST: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    n, c, oh, ow, live = _tile(count, C, OH, OW, CHANNELS_LAST, WIDE, BLOCK, BLOCK_C)
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = n * xs_n + c * xs_c
    best = tl.full(live.shape, float("-inf"), tl.float32)
    # a window of -inf takes no tap: it records its first (CPU, CUDA NCHW) or 0 (CUDA channels_last)
    if UNSEEN_AT_ZERO:
        arg = tl.zeros(live.shape, dtype=tl.int64)
    else:
        arg = (tl.maximum(h0, 0) * W + tl.maximum(w0, 0)).to(tl.int64)
    for dh in tl.static_range(KH):
        for dw in tl.static_range(KW):
            h = h0 + dh
            w = w0 + dw
            inside = live & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            v = tl.load(x + base + h * xs_h + w * xs_w, mask=inside, other=float("-inf")).to(tl.float32)
            take = inside & ((v > best) | (v != v))
            best = tl.where(take, v, best)
            arg = tl.where(take, (h * W + w).to(tl.int64), arg)
    at = n * os_n + c * os_c + oh * os_h + ow * os_w
    tl.store(out + at, best.to(out.dtype.element_ty), mask=live)
    tl.store(idx + at, arg, mask=live)


@triton.jit
def _gather_grads(
    grad, indices, out, count, C, H, W, OH, OW,
    gs_n, gs_c, gs_h, gs_w,  # grad's and indices' strides (the same layout: checked by the caller)
    os_n, os_c, os_h, os_w,
    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PH: tl.constexpr, PW: tl.constexpr, RH: tl.constexpr, RW: tl.constexpr,
    CHANNELS_LAST: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    n, c, h, w, live = _tile(count, C, H, W, CHANNELS_LAST, WIDE, BLOCK, BLOCK_C)
    # the first window (oh, ow) whose span [o * S - P, o * S - P + K) holds (h, w)
    oh0 = tl.maximum(h + PH - KH + SH, 0) // SH
    ow0 = tl.maximum(w + PW - KW + SW, 0) // SW
    here = h * W + w
    base = n * gs_n + c * gs_c
    acc = tl.zeros(live.shape, dtype=tl.float32)
    for dh in tl.static_range(RH):
        for dw in tl.static_range(RW):
            oh = oh0 + dh
            ow = ow0 + dw
            covers = live & (oh < OH) & (ow < OW) & (oh * SH - PH <= h) & (ow * SW - PW <= w)
            at = base + oh * gs_h + ow * gs_w
            arg = tl.load(indices + at, mask=covers, other=-1)
            g = tl.load(grad + at, mask=covers & (arg == here), other=0.0)
            acc += g.to(tl.float32)
    tl.store(out + n * os_n + c * os_c + h * os_h + w * os_w, acc.to(out.dtype.element_ty), mask=live)


def _extent(x: torch.Tensor) -> int:
    """One past the largest element offset `x` reaches."""
    return 1 + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride(), strict=True))


def _layout(x: torch.Tensor) -> torch.memory_format:
    """The layout ATen gives max-pool's outputs and input gradient (the input's suggested format;
    the fx pass checks the graph's strides agree before it replaces a node)."""
    return torch.channels_last if channels_last(x) else torch.contiguous_format


def _pooled(size: int, kernel: int, stride: int, padding: int, ceil: bool) -> int:
    """Output length of a max-pool dim (dilation 1), by ATen's rule: in ceil mode the last
    window must start inside the input or its left padding."""
    out = (size + 2 * padding - kernel + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + padding:
        out -= 1
    return out


INT32_OFFSETS = 2**31  # past this many elements, offsets are computed in int64
# The kernels compare and accumulate in float32: exact for these, not for float64 (ATen's kernels
# work in double there), which stays with ATen.
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _launch(kernel: HandKernel, space: torch.Tensor, *tensors: torch.Tensor, **consts) -> bool:
    """Launch a kernel whose programs tile `space` (N, C, H, W) the way `_tile` walks it."""
    N, C, H, W = space.shape
    last = _layout(space) == torch.channels_last
    if last:  # tiles of pixels by channels
        block_c = min(triton.next_power_of_2(C), 64)
        block = max(1, 1024 // block_c)
        grid: tuple = (triton.cdiv(N * H * W, block), triton.cdiv(C, block_c))
        count = N * H * W
    else:
        block_c, block = 1, 512
        grid = (triton.cdiv(space.numel(), block),)
        count = space.numel()
    # int32 would overflow: an offset, or the index of the last program's last lane (past
    # `count`, so masked, but wrapped to a negative number it would pass the mask)
    wide = max(grid[0] * block, *(_extent(t) for t in tensors)) > INT32_OFFSETS - 1
    return kernel.launch(
        grid, *tensors, count, *consts.pop("sizes"), *consts.pop("strides"),
        **consts, CHANNELS_LAST=last, WIDE=wide, BLOCK=block, BLOCK_C=block_c,
    )  # fmt: skip


POOL_WITH_INDICES = HandKernel(_pool_with_indices, "max-pools with indices")
GATHER_GRADS = HandKernel(_gather_grads, "max-pool gradients")


@torch.library.custom_op("fuselint::max_pool2d_with_indices", mutates_args=())
@direct_impl("fuselint::max_pool2d_with_indices")
def max_pool2d_with_indices(
    x: torch.Tensor, kernel_size: list[int], stride: list[int], padding: list[int], ceil_mode: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`max_pool2d_with_indices` (dilation 1) of `x` (N, C, H, W): the window maxima and their
    positions `h * W + w`, laid out as ATen lays them out."""
    out, idx = _pool_outputs(x, kernel_size, stride, padding, ceil_mode)
    if not can_generate_for(x.device) or x.dtype not in KERNEL_DTYPES:
        return _aten_pool(x, kernel_size, stride, padding, ceil_mode)
    if out.numel() == 0:
        return out, idx
    C, H, W = x.shape[1:]
    launched = _launch(
        POOL_WITH_INDICES, out, x, out, idx,
        sizes=(C, H, W, *out.shape[-2:]), strides=(*x.stride(), *out.stride()),
        KH=kernel_size[0], KW=kernel_size[1], SH=stride[0], SW=stride[1], PH=padding[0], PW=padding[1],
        # ATen's CUDA channels_last kernel starts each window's index at 0 (max_pool_forward_nhwc)
        UNSEEN_AT_ZERO=_layout(x) == torch.channels_last and not interpreting(x.device),
    )  # fmt: skip
    return (out, idx) if launched else _aten_pool(x, kernel_size, stride, padding, ceil_mode)


def _pool_outputs(x, kernel_size, stride, padding, ceil_mode) -> tuple[torch.Tensor, torch.Tensor]:
    N, C, H, W = x.shape
    shape = (
        N,
        C,
        _pooled(H, kernel_size[0], stride[0], padding[0], ceil_mode),
        _pooled(W, kernel_size[1], stride[1], padding[1], ceil_mode),
    )
    fmt = _layout(x)
    out = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=fmt)
    return out, torch.empty(shape, dtype=torch.int64, device=x.device, memory_format=fmt)


def _aten_pool(x, kernel_size, stride, padding, ceil_mode) -> tuple[torch.Tensor, torch.Tensor]:
    out, idx = aten.max_pool2d_with_indices(x, kernel_size, stride, padding, [1, 1], ceil_mode)
    return out, idx


@max_pool2d_with_indices.register_fake
def _(x, kernel_size, stride, padding, ceil_mode):
    return _pool_outputs(x, kernel_size, stride, padding, ceil_mode)


@torch.library.custom_op("fuselint::max_pool2d_grad", mutates_args=())
@direct_impl("fuselint::max_pool2d_grad")
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
    if (
        not can_generate_for(grad.device)
        or grad.stride() != indices.stride()
        or grad.dtype not in KERNEL_DTYPES
    ):
        return _aten_grad(grad, like, indices, kernel_size, stride, padding)
    if out.numel() == 0:
        return out
    launched = _launch(
        GATHER_GRADS, out, grad, indices, out,
        sizes=(*like.shape[1:], *grad.shape[-2:]), strides=(*grad.stride(), *out.stride()),
        KH=kernel_size[0], KW=kernel_size[1], SH=stride[0], SW=stride[1], PH=padding[0], PW=padding[1],
        RH=triton.cdiv(kernel_size[0], stride[0]), RW=triton.cdiv(kernel_size[1], stride[1]),
    )  # fmt: skip
    return out if launched else _aten_grad(grad, like, indices, kernel_size, stride, padding)


def _aten_grad(grad, like, indices, kernel_size, stride, padding) -> torch.Tensor:
    # the op does not take ceil_mode: a pool that made more windows than floor mode makes was ceil
    floor = [
        _pooled(size, k, s, p, False)
        for size, k, s, p in zip(like.shape[-2:], kernel_size, stride, padding, strict=True)
    ]
    ceil = list(grad.shape[-2:]) != floor
    return aten.max_pool2d_with_indices_backward(
        grad, like, kernel_size, stride, padding, [1, 1], ceil, indices
    ).contiguous(memory_format=_layout(like))


@max_pool2d_grad.register_fake
def _(grad, like, indices, kernel_size, stride, padding):
    return torch.empty_like(like, memory_format=_layout(like))


def _fake(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) and val.dim() == 4 else None


def _pool_args(node: torch.fx.Node) -> tuple:
    """(x, kernel, stride, padding, dilation, ceil_mode) of a max_pool2d_with_indices node, its
    defaults filled in (the stride defaults to the kernel)."""
    args = list(node.args) + [None] * (6 - len(node.args))
    x, kernel, stride, padding, dilation, ceil = args

    def pair(v: object, default: list[int]) -> list[int]:  # ATen reads one number as both dims
        v = list(v) if isinstance(v, (list, tuple)) and len(v) else default
        return v * 2 if len(v) == 1 else v

    kernel = pair(kernel, [])
    return x, kernel, pair(stride, kernel), pair(padding, [0]), pair(dilation, [1]), bool(ceil)


def _pool_replaceable(node: torch.fx.Node) -> bool:
    """A forward max-pool whose indices something reads (values only: the lowering's window op)."""
    if node.target is not aten.max_pool2d_with_indices.default:
        return False
    x, kernel, stride, padding, dilation, ceil = _pool_args(node)
    vals = node.meta.get("val")
    if (
        _fake(x) is None
        or not isinstance(vals, (tuple, list))
        or len(vals) != 2
        or len(kernel) != 2
        or len(stride) != 2
        or len(padding) != 2
        or list(dilation) != [1, 1]
        or not all(u.target is operator.getitem for u in node.users)
        or not any(u.args[1] == 1 for u in node.users)
        or _fake(x).dtype not in KERNEL_DTYPES
        or not can_generate_for(_fake(x).device)
    ):
        return False
    want = _pool_outputs(_fake(x), kernel, stride, padding, bool(ceil))
    return all(v.shape == w.shape and v.stride() == w.stride() for v, w in zip(vals, want, strict=True))


def _grad_replaceable(node: torch.fx.Node) -> bool:
    if node.target is not aten.max_pool2d_with_indices_backward.default:
        return False
    grad, like, kernel, stride, padding, dilation, _ceil, indices = node.args
    g, x, i, out = _fake(grad), _fake(like), _fake(indices), _fake(node)
    return (
        None not in (g, x, i, out)
        and list(dilation) == [1, 1]
        and len(kernel) == 2
        and len(stride) == 2
        and len(padding) == 2
        and g.stride() == i.stride()
        and g.dtype in KERNEL_DTYPES
        and out.stride() == torch.empty_like(x, memory_format=_layout(x)).stride()
        and can_generate_for(g.device)
    )


def hand_max_pools(gm: torch.fx.GraphModule) -> int:
    """Run gm's max-pools that keep indices, and their input gradients, as the kernels above;
    how many nodes were replaced."""
    graph = gm.graph
    nodes = [
        n for n in graph.nodes if n.op == "call_function" and (_pool_replaceable(n) or _grad_replaceable(n))
    ]
    for node in nodes:
        if node.target is aten.max_pool2d_with_indices.default:
            x, kernel, stride, padding, _dilation, ceil = _pool_args(node)
            target = torch.ops.fuselint.max_pool2d_with_indices.default
            args: tuple = (x, kernel, stride, padding, ceil)
        else:
            grad, like, kernel, stride, padding, _dilation, _ceil, indices = node.args
            target = torch.ops.fuselint.max_pool2d_grad.default
            args = (grad, like, indices, list(kernel), list(stride), list(padding))
        with graph.inserting_before(node):
            new = graph.call_function(target, args)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    if nodes:
        gm.recompile()
    return len(nodes)
