"""Which kernel scaled_dot_product_attention runs on a CUDA GPU, and what the math path costs.

SDPA picks its kernel at run time from its inputs (torch/backends/cuda `can_use_*_attention`,
ATen's sdp_utils), on torch 2.11-2.13 and sm80+ GPUs:
- flash (and cuDNN on Hopper): fp16/bf16, no mask (is_causal is fine), head dim a multiple of
  8 and at most 256;
- memory-efficient: fp16/bf16/fp32, takes an additive mask (a boolean mask is turned into one);
- every fused kernel needs the last dimension of q, k, v *and of the mask* to have stride 1
  (`check_last_dim_stride_equals_1_dense`; CPU alone waives the mask's stride). A mask
  broadcast over keys (`expand` with stride 0 there) therefore sends the call to the math path;
- the math path (`_scaled_dot_product_attention_math`) upcasts fp16/bf16 to fp32 and runs two
  batched matmuls with a `_safe_softmax` between them, materialising the (B, H, Lq, Lk) scores.
  Under torch.compile the choice is made once, on the traced tensors, and the math path is what
  Inductor and the fuselint backend then run (fp32 GEMMs + a softmax kernel; measured on an H100
  with torch 2.11 for BERT-base 16x256: ~192 µs per layer compiled vs ~18 µs for the fused kernel).

The traced ATen graph (CPU or meta) holds the CPU flash op; its `attn_mask` is the additive
mask that SDPA's own conversion made from the user's boolean one, so `sdpa_call` reads the
boolean mask before that conversion, where the user's strides still show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from fuselint.graph.eager_probe import EagerSdpa

SDPA_OPS = {
    "aten._scaled_dot_product_flash_attention_for_cpu.default",
    "aten._scaled_dot_product_flash_attention.default",
    "aten._scaled_dot_product_efficient_attention.default",
    "aten._scaled_dot_product_cudnn_attention.default",
}
_HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Mask:
    dtype: torch.dtype
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    # built from positions and constants only (no graph input reaches it), and every element
    # true: the mask transformers materialises only while tracing, and drops in eager
    all_true: bool = False
    # built from positions and constants only, and equal to what `is_causal=True` computes (query i
    # sees keys 0..i). Not taken as tracing-only: users build such masks in eager too (nanoGPT's
    # tril), while transformers builds GPT-2's and LLaMA's only while tracing (torch 2.11)
    causal: bool = False


@dataclass(frozen=True)
class SdpaCall:
    """What SDPA's kernel choice reads: q/k/v sizes, dtype and last strides, the mask, causality."""

    batch_heads: int  # B * H
    q_len: int
    kv_len: int
    head_dim: int
    v_dim: int
    dtype: torch.dtype
    last_strides: tuple[int, int, int]  # q, k, v
    mask: Mask | None
    is_causal: bool


@dataclass(frozen=True)
class Backend:
    name: str  # "flash", "efficient" or "math"
    reason: str = ""  # why it is not a fused kernel ("" when it is)
    fix: str = ""  # the change that keeps the call on a fused kernel

    @property
    def fused(self) -> bool:
        return self.name != "math"


def choose_backend(call: SdpaCall) -> Backend:
    """The kernel SDPA runs for `call` on a CUDA GPU (sm80+, torch 2.11-2.13)."""
    if call.head_dim % 8 or call.head_dim > 256:
        return Backend(
            "math",
            f"the head dimension is {call.head_dim} (fused kernels need a multiple of 8, at most 256)",
            "pad the head dimension to a multiple of 8",
        )
    if any(s != 1 for s in call.last_strides):
        return Backend(
            "math",
            "q, k or v is not contiguous in its last dimension",
            "make q, k and v contiguous in the head dimension (.contiguous() before the call)",
        )
    m = call.mask
    if m is not None and m.stride[-1] != 1 and m.shape[-1] != 1:
        kind = "boolean" if m.dtype == torch.bool else str(m.dtype).removeprefix("torch.")
        return Backend(
            "math",
            f"the mask is {kind} and broadcast over keys (shape {tuple(m.shape)}, strides "
            f"{tuple(m.stride)}): every fused kernel needs the mask's last dimension at stride 1",
            "it is all true: pass no mask"
            if m.all_true
            else "it is causal: pass is_causal=True and no mask"
            if m.causal
            else "pass is_causal=True for a causal mask, no mask when it is all true, or a float "
            "additive mask that is contiguous in its last dimension",
        )
    if call.dtype not in (*_HALF, torch.float32):
        return Backend("math", f"{call.dtype} inputs have no fused kernel", "use fp16, bf16 or fp32")
    if m is None and call.dtype in _HALF:
        return Backend("flash")
    return Backend("efficient")


def _val(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


_EVAL_LIMIT = 1 << 24  # elements: a positions-only mask larger than this is not evaluated


def _positions_only(node: torch.fx.Node) -> torch.Tensor | None:
    """The value of a mask built from positions and constants alone (no graph input among its
    ancestors), found by running its few ops on CPU tensors; None for any other mask."""
    seen: set[torch.fx.Node] = set()
    order: list[torch.fx.Node] = []

    def visit(n: torch.fx.Node) -> bool:
        if n in seen:
            return True
        seen.add(n)
        val = _val(n)
        is_view = isinstance(n.target, torch._ops.OpOverload) and n.target.is_view
        if n.op != "call_function" or (val is not None and not is_view and val.numel() > _EVAL_LIMIT):
            return False
        if not all(visit(a) for a in n.all_input_nodes):
            return False
        order.append(n)
        return True

    if not visit(node):
        return None
    values: dict[torch.fx.Node, object] = {}

    def real(a):
        if isinstance(a, torch.fx.Node):
            return values[a]
        if isinstance(a, torch.device):
            return torch.device("cpu")
        return a

    try:
        for n in order:
            args = torch.fx.node.map_aggregate(n.args, real)
            kwargs = {
                k: (torch.device("cpu") if k == "device" else torch.fx.node.map_aggregate(v, real))
                for k, v in n.kwargs.items()
            }
            values[n] = n.target(*args, **kwargs)
        out = values[node]
        return out if isinstance(out, torch.Tensor) else None
    except Exception:  # an op that cannot run here: its value is not known
        return None


def _is_causal(mask: torch.Tensor) -> bool:
    """Whether a boolean mask equals `is_causal=True` (top left: query i sees keys 0..i) on every
    (query, key) plane."""
    if mask.dim() < 2 or mask.shape[-2] < 2:
        return False
    q, k = mask.shape[-2:]
    return bool((mask == torch.ones(q, k, dtype=torch.bool).tril()).all())


def _mask(node: torch.fx.Node | None) -> Mask | None:
    val = _val(node)
    if val is None:
        return None
    # SDPA's conversion of a boolean mask: where(mask, 0, -inf) right before the call
    if node.target is torch.ops.aten.where.self and (source := _val(node.args[0])) is not None:
        if source.dtype == torch.bool and all(
            _val(a) is not None and _val(a).dim() == 0 for a in node.args[1:]
        ):
            node, val = node.args[0], source
    stride = tuple(int(s) for s in val.stride()) if val.dim() else (1,)
    shape = tuple(int(s) for s in val.shape) if val.dim() else (1,)
    value = _positions_only(node) if val.dtype == torch.bool else None
    return Mask(
        val.dtype,
        shape,
        stride,
        all_true=value is not None and bool(value.all()),
        causal=value is not None and _is_causal(value),
    )


def _mask_and_causal(node: torch.fx.Node) -> tuple[torch.fx.Node | None, bool]:
    """The mask argument of an SDPA node (as the graph passes it) and its is_causal flag."""
    target = str(node.target)
    if "for_cpu" in target:
        is_causal = bool(node.args[4]) if len(node.args) > 4 else bool(node.kwargs.get("is_causal", False))
        return node.kwargs.get("attn_mask"), is_causal
    if "efficient" in target:
        mask_node = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_bias")
        is_causal = bool(node.args[6]) if len(node.args) > 6 else bool(node.kwargs.get("is_causal", False))
        return mask_node, is_causal
    mask_node = node.kwargs.get("attn_bias") if "cudnn" in target else None
    return mask_node, bool(node.args[4]) if len(node.args) > 4 else bool(node.kwargs.get("is_causal", False))


def mask_cone(node: torch.fx.Node) -> frozenset[str]:
    """Names of the nodes that build an SDPA node's mask (its mask argument and every computed
    node above it); empty when the call has no mask. Eager runs none of them when its own call
    passes no mask (`eager_call`), unless something else reads them (cost.eager_absent)."""
    mask_node, _causal = _mask_and_causal(node) if sdpa_call(node) is not None else (None, False)
    if not isinstance(mask_node, torch.fx.Node):
        return frozenset()
    cone: set[str] = set()
    stack = [mask_node]
    while stack:
        n = stack.pop()
        if n.name not in cone and n.op == "call_function":
            cone.add(n.name)
            stack.extend(n.all_input_nodes)
    return frozenset(cone)


def sdpa_call(node: torch.fx.Node) -> SdpaCall | None:
    """The SDPA call an ATen node makes, or None when it is not an SDPA op."""
    if node.op != "call_function" or str(node.target) not in SDPA_OPS:
        return None
    q, k, v = (_val(a) for a in node.args[:3])
    if q is None or k is None or v is None or q.dim() < 2:
        return None
    mask_node, is_causal = _mask_and_causal(node)
    return SdpaCall(
        batch_heads=int(q.numel() // (q.shape[-2] * q.shape[-1])) if q.shape[-2] * q.shape[-1] else 0,
        q_len=int(q.shape[-2]),
        kv_len=int(k.shape[-2]),
        head_dim=int(q.shape[-1]),
        v_dim=int(v.shape[-1]),
        dtype=q.dtype,
        last_strides=(int(q.stride(-1)), int(k.stride(-1)), int(v.stride(-1))),
        mask=_mask(mask_node),
        is_causal=is_causal,
    )


def _probed_mask(call: SdpaCall, mask: tuple | None) -> Mask | None:
    """The Mask of a probed eager call: the graph's own when eager passed one alike (same sizes,
    strides and dtype: the graph's knows its values too), else one from the probe's record."""
    if mask is None:
        return None
    shape, stride, dtype = mask
    if call.mask is not None and (call.mask.shape, call.mask.stride, call.mask.dtype) == (
        shape,
        stride,
        dtype,
    ):
        return call.mask
    return Mask(dtype, shape or (1,), stride or (1,))


def eager_call(call: SdpaCall, probed: tuple[EagerSdpa, ...] | None = None) -> SdpaCall:
    """The call as eager code makes it.

    With the eager probe's record (graph/eager_probe.py): the calls eager made with the same
    sizes and dtype, when they all passed the same mask and causality; eager's mask and
    is_causal replace the graph's. Without a record, or when eager's calls of these sizes differ
    or none has them: the graph's call, less an all-true mask built from positions alone, one
    that libraries build only while tracing (transformers' `_ignore_*_mask_sdpa` drops it in
    eager, where it can look at the values)."""
    if probed is not None:
        seen = {
            (r.mask, r.is_causal)
            for r in probed
            if r.dtype == call.dtype
            and len(r.query) >= 2
            and len(r.key) >= 2
            and (math.prod(r.query[:-2]), r.query[-2], r.query[-1], r.key[-2])
            == (call.batch_heads, call.q_len, call.head_dim, call.kv_len)
        }
        if len(seen) == 1:
            mask, is_causal = seen.pop()
            return replace(call, mask=_probed_mask(call, mask), is_causal=is_causal)
    if call.mask is not None and call.mask.all_true:
        return replace(call, mask=None)
    return call


# Fused attention kernels run well below the dense GEMM rate the device table holds (an
# 8192^3 matmul): measured on an H100 with torch 2.11, BERT-base's flash call (16x12x256x64,
# 3.2 GFLOP) took ~18 µs, ~179 TFLOP/s against the table's 723: a quarter.
FUSED_ATTENTION_EFFICIENCY = 0.25


def _mask_bytes(mask: Mask | None) -> int:
    """The storage a mask really spans (broadcast dims read once)."""
    if mask is None:
        return 0
    span = 1 + sum((s - 1) * st for s, st in zip(mask.shape, mask.stride, strict=False))
    return span * torch.empty((), dtype=mask.dtype).element_size()


def _tile(call: SdpaCall) -> tuple[int, int]:
    """(queries, keys) of the score tile a fused kernel computes at once: the flash kernel
    (FlashAttention-2's forward, as PyTorch ships it) takes 128 queries by 128 keys for head
    dims up to 64 and 128 by 64 above; the memory-efficient one (CUTLASS) 64 by 64."""
    if call.mask is None and call.dtype in _HALF:
        return (128, 128) if call.head_dim <= 64 else (128, 64)
    return 64, 64


def fused_work(call: SdpaCall) -> tuple[int, int]:
    """(bytes, flops) of a fused attention kernel: q, k, v and the mask read once, out written;
    two matmuls' flops over whole score tiles (a sequence of 197 computes 256 x 256 scores on
    the flash kernel's 128 x 128 tiles), half of them when causal (the kernel skips masked-out
    blocks)."""
    e = torch.empty((), dtype=call.dtype).element_size()
    bh, lq, lk = call.batch_heads, call.q_len, call.kv_len
    nbytes = e * bh * (lq * call.head_dim + lk * call.head_dim + lk * call.v_dim + lq * call.v_dim)
    tq, tk = _tile(call)
    lq, lk = -(-lq // tq) * tq, -(-lk // tk) * tk
    flops = 2 * bh * lq * lk * (call.head_dim + call.v_dim)
    return nbytes + _mask_bytes(call.mask), flops // 2 if call.is_causal else flops


@dataclass(frozen=True)
class MathPart:
    """One kernel of the math path: bytes moved, flops, the dtype its math runs in."""

    name: str
    bytes: float
    flops: float
    dtype: str


def math_parts(call: SdpaCall) -> tuple[MathPart, ...]:
    """The kernels the math path runs (as Inductor runs it under compile): q/k/v upcast to fp32
    (one fused pointwise kernel), scores = q @ k^T in fp32, `_safe_softmax` of the scaled
    (and masked) scores, out = p @ v in fp32, out cast back to the input dtype."""
    acc = torch.float32 if call.dtype in _HALF else call.dtype
    a = torch.empty((), dtype=acc).element_size()
    e = torch.empty((), dtype=call.dtype).element_size()
    bh, lq, lk, d, dv = call.batch_heads, call.q_len, call.kv_len, call.head_dim, call.v_dim
    q, k, v, scores, out = bh * lq * d, bh * lk * d, bh * lk * dv, bh * lq * lk, bh * lq * dv
    mask_bytes = _mask_bytes(call.mask)
    dt = str(acc).removeprefix("torch.")
    parts = []
    if acc != call.dtype:
        parts.append(MathPart("upcast q, k, v", (q + k + v) * (e + a), q + k + v, dt))
    parts += [
        MathPart("q @ k^T", (q + k) * a + scores * a, 2 * bh * lq * lk * d, dt),
        MathPart("softmax", 2 * scores * a + mask_bytes, 5 * scores, dt),
        MathPart("p @ v", (scores + v) * a + out * a, 2 * bh * lq * lk * dv, dt),
    ]
    if acc != call.dtype:
        parts.append(MathPart("cast out", out * (a + e), out, dt))
    return tuple(parts)
