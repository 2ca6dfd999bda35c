"""The op table: how each ATen pointwise op is written in Triton (fp32 math on tiles).

An entry maps an ATen overload packet name (``"add"``, ``"exp"``, ...) to a lowering
``fn(lo, args, kwargs) -> Value`` where ``args`` are the op's bound schema arguments in
order, tensors already turned into kernel values and Python numbers left as they are.
``lo`` is the :class:`~fuselint.backend.lowering.Lowering` building the kernel; its
``math(expr, *operands)`` makes a value whose Triton expression is ``expr`` formatted with
the operands' variable names. Ops missing here make their group fall back to ATen.

Only what works on every Triton 3.6-3.9 build and in the CPU interpreter is used: no
libdevice, so tanh, sigmoid, log1p and expm1 are written from exp/log.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from fuselint.backend.lowering import Lowering, Value

Lower = Callable[["Lowering", list, dict], "Value"]

# The 16-bit float types: tensor-core GEMM operands, and values a kernel computes in float32.
HALF = (torch.bfloat16, torch.float16)
NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"


def _binary(expr: str) -> Lower:
    def lower(lo: Lowering, args: list, kwargs: dict) -> Value:
        return lo.math(expr, args[0], args[1])

    return lower


def _unary(expr: str) -> Lower:
    def lower(lo: Lowering, args: list, kwargs: dict) -> Value:
        return lo.math(expr, args[0])

    return lower


def _with_alpha(expr: str, of_bools: str | None = None) -> Lower:
    """add/sub/rsub carry `alpha`: a + alpha * b. `of_bools`: the expression when both operands
    are bools, where Triton's int1 arithmetic wraps (True + True is False; torch gives their or)."""

    def lower(lo: Lowering, args: list, kwargs: dict) -> Value:
        if of_bools and all(lo.ctype_of(a) == "b" for a in args[:2]):
            return lo.math(of_bools, args[0], args[1])
        alpha = kwargs.get("alpha", 1)
        other = args[1] if alpha in (1, None) else lo.math("({} * {})", args[1], alpha)
        return lo.math(expr, args[0], other)

    return lower


# A square root rounded as IEEE float32 rounds it, as ATen's CUDA kernels and Inductor's
# (`tl.sqrt_rn`) do: `tl.sqrt` is the GPU's approximate square root, and in float32 BatchNorm's
# 1 / sqrt(var + eps) made MobileNetV3's error against float64 15% larger than Inductor's
# (bench/results/h200-s23, `tf32_errors.py --bn-random 1`). Values are computed in float32 here.
_SQRT = "tl.sqrt_rn({})"


def _div(lo: Lowering, args: list, kwargs: dict) -> Value:
    if kwargs.get("rounding_mode") is not None:
        lo.unsupported("div with rounding_mode")
    a, b = args[0], args[1]
    # Integer true division gives floats in torch; Triton's `/` on ints is not that.
    if lo.ctype_of(a) != "f" and lo.ctype_of(b) != "f":
        a = lo.math("{}.to(tl.float32)", a)
    return lo.math("({} / {})", a, b)


def _pow_tensor_scalar(lo: Lowering, args: list, kwargs: dict) -> Value:
    x, e = args[0], args[1]
    if not isinstance(e, (int, float)) or isinstance(e, bool):
        lo.unsupported("pow with a non-numeric exponent")
    if e == 0:
        return lo.literal(1.0)
    special = {1: "{}", 0.5: _SQRT, -0.5: "tl.rsqrt({})", -1: "(1.0 / {})"}
    if e in special:
        return lo.math(special[e], x)
    if float(e).is_integer() and 2 <= abs(e) <= 8:
        # Repeated multiplication is exact for negative bases, unlike exp2(e * log2(x)).
        product = " * ".join(["{0}"] * int(abs(e)))
        return lo.math(f"({product})" if e > 0 else f"(1.0 / ({product}))", x)
    return lo.math(f"tl.exp2({float(e)!r} * tl.log2({{}}))", x)


def _pow_scalar(lo: Lowering, args: list, kwargs: dict) -> Value:
    base, x = args[0], args[1]
    if not isinstance(base, (int, float)) or base <= 0:
        lo.unsupported("pow with a non-positive scalar base")
    return lo.math(f"tl.exp2({{}} * {math.log2(base)!r})", x)


def _clamp(lo: Lowering, args: list, kwargs: dict) -> Value:
    x = args[0]
    lo_, hi = (args + [None, None])[1:3]
    if lo_ is not None:
        x = lo.math(f"tl.maximum({{}}, {{}}, {NAN_ALL})", x, lo_)
    if hi is not None:
        x = lo.math(f"tl.minimum({{}}, {{}}, {NAN_ALL})", x, hi)
    return x


def _convert(lo: Lowering, args: list, kwargs: dict) -> Value:
    """_to_copy / convert_element_type: only the number kind changes inside a kernel."""
    dtype = kwargs.get("dtype") if "dtype" in kwargs else (args[1] if len(args) > 1 else None)
    if kwargs.get("device") is not None and lo.device is not None and kwargs["device"] != lo.device:
        lo.unsupported("copy to another device")
    x = args[0]
    if dtype is None:
        return lo.math("{}", x)
    target = lo.ctype_for(dtype)
    source = lo.ctype_of(x)
    if target == source:
        return lo.math("{}", x)
    if target == "b":
        return lo.math("({} != 0)", x)
    if target == "f":
        return lo.math("{}.to(tl.float32)", x)
    return lo.math(f"{{}}.to({lo.tl_dtype(dtype)})", x)


def _constant(lo: Lowering, args: list, kwargs: dict) -> Value:
    """full(size, value) / scalar_tensor(value): a literal in the node's dtype."""
    value = args[1] if lo.current_packet == "full" else args[0]
    return lo.literal(value)


def _where(lo: Lowering, args: list, kwargs: dict) -> Value:
    cond = args[0]
    if lo.ctype_of(cond) != "b":
        cond = lo.math("({} != 0)", cond)
    return lo.math("tl.where({}, {}, {})", cond, args[1], args[2])


def _logical(expr: str) -> Lower:
    def lower(lo: Lowering, args: list, kwargs: dict) -> Value:
        bools = [a if lo.ctype_of(a) == "b" else lo.math("({} != 0)", a) for a in args[:2]]
        return lo.math(expr, *bools)

    return lower


# tanh(x) = sign(x) (1 - e^{-2|x|}) / (1 + e^{-2|x|}): no overflow for any x, and tl has no
# tanh in every supported version.
_TANH = (
    "tl.where({0} < 0, -1.0, 1.0) * ((1.0 - tl.exp(-2.0 * tl.abs({0}))) / (1.0 + tl.exp(-2.0 * tl.abs({0}))))"
)
# log1p via Kahan's trick: u = 1 + x; log(u) * x / (u - 1), exact where u == 1.
_LOG1P = "tl.where(1.0 + {0} == 1.0, {0}, tl.log(1.0 + {0}) * {0} / ((1.0 + {0}) - 1.0))"
# expm1 likewise: (e^x - 1) computed as (u - 1) * x / log(u).
_EXPM1 = (
    "tl.where(tl.exp({0}) == 1.0, {0}, tl.where(tl.exp({0}) - 1.0 == -1.0, -1.0,"
    " (tl.exp({0}) - 1.0) * {0} / tl.log(tl.exp({0}))))"
)

POINTWISE: dict[str, Lower] = {
    "add": _with_alpha("({} + {})", of_bools="({} | {})"),
    "sub": _with_alpha("({} - {})"),
    "rsub": _with_alpha("({1} - {0})"),
    "mul": _binary("({} * {})"),
    "div": _div,
    "neg": _unary("(-{})"),
    "reciprocal": _unary("(1.0 / {})"),
    "exp": _unary("tl.exp({})"),
    "exp2": _unary("tl.exp2({})"),
    "expm1": _unary(_EXPM1),
    "log": _unary("tl.log({})"),
    "log2": _unary("tl.log2({})"),
    "log1p": _unary(_LOG1P),
    "sqrt": _unary(_SQRT),
    "rsqrt": _unary("tl.rsqrt({})"),
    "abs": _unary("tl.abs({})"),
    "sin": _unary("tl.sin({})"),
    "cos": _unary("tl.cos({})"),
    "tanh": _unary(_TANH),
    "sigmoid": _unary("(1.0 / (1.0 + tl.exp(-{})))"),
    "erf": _unary("tl.erf({})"),
    "floor": _unary("tl.floor({})"),
    "ceil": _unary("tl.ceil({})"),
    "sign": _unary("tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, {0} * 0.0))"),
    "relu": _unary(f"tl.maximum({{}}, 0.0, {NAN_ALL})"),
    "pow": _pow_tensor_scalar,
    "maximum": _binary(f"tl.maximum({{}}, {{}}, {NAN_ALL})"),
    "minimum": _binary(f"tl.minimum({{}}, {{}}, {NAN_ALL})"),
    "clamp": _clamp,
    "clamp_min": lambda lo, a, k: _clamp(lo, [a[0], a[1], None], k),
    "clamp_max": lambda lo, a, k: _clamp(lo, [a[0], None, a[1]], k),
    "where": _where,
    "gt": _binary("({} > {})"),
    "lt": _binary("({} < {})"),
    "ge": _binary("({} >= {})"),
    "le": _binary("({} <= {})"),
    "eq": _binary("({} == {})"),
    "ne": _binary("({} != {})"),
    "isnan": _unary("({0} != {0})"),
    "isinf": _unary('(tl.abs({}) == float("inf"))'),
    "logical_not": lambda lo, a, k: lo.math("({} == 0)", a[0]),
    "logical_and": _logical("({} & {})"),
    "logical_or": _logical("({} | {})"),
    "logical_xor": _logical("({} ^ {})"),
    "bitwise_and": _binary("({} & {})"),
    "bitwise_or": _binary("({} | {})"),
    "bitwise_xor": _binary("({} ^ {})"),
    "bitwise_not": lambda lo, a, k: lo.math("({} == 0)" if lo.ctype_of(a[0]) == "b" else "(~{})", a[0]),
    "fma": lambda lo, a, k: lo.math("({} * {} + {})", a[0], a[1], a[2]),
    "_to_copy": _convert,
    "convert_element_type": _convert,
    "clone": lambda lo, a, k: lo.math("{}", a[0]),
    "full": _constant,
    "scalar_tensor": _constant,
}

# float32 rounded to TF32's 10-bit mantissa, to nearest even (squeeze_excite.round_to_tf32; NaN kept).
_TF32_BITS = "{0}.to(tl.int32, bitcast=True)"
_TF32 = (
    f"tl.where({{0}} != {{0}}, {{0}}, "
    f"(({_TF32_BITS} + 4095 + (({_TF32_BITS} >> 13) & 1)) & -8192).to(tl.float32, bitcast=True))"
)

# Overloads whose meaning differs from their packet's entry above, and fuselint's own pointwise ops.
OVERLOADS: dict[str, Lower] = {
    "aten.pow.Scalar": _pow_scalar,
    "fuselint.round_to_tf32.default": _unary(_TF32),
}

# Reductions: packet name -> combine kind. mean and var_mean are built from sums.
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "var_mean", "var", "any", "all"})

# Views a kernel can follow on values it computes (they only relabel tile dimensions; an
# as_strided only when it keeps every element where it is, restriding size-1 dims).
VIEWS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "unsqueeze",
        "squeeze",
        "alias",
        "expand",
        "permute",
        "t",
        "as_strided",
    }
)

COMPUTE_TYPES: dict[torch.dtype, str] = {
    torch.float32: "f",
    torch.float16: "f",
    torch.bfloat16: "f",
    torch.bool: "b",
    torch.int8: "i",
    torch.int16: "i",
    torch.int32: "i",
    torch.int64: "i",
    torch.uint8: "i",
}

TL_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.bool: "tl.int1",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
}


def lowering_for(target: object) -> Lower | None:
    """The lowering of an ATen overload, or None when the codegen does not know the op."""
    key = str(target)
    if key in OVERLOADS:
        return OVERLOADS[key]
    packet = getattr(target, "overloadpacket", None)
    return POINTWISE.get(getattr(packet, "__name__", ""))


def literal(value: object, ctype: str) -> str:
    """A Python number written as Triton source for a value computed as `ctype`."""
    if isinstance(value, bool):
        if ctype == "b":
            return "True" if value else "False"
        return str(int(value))
    if ctype == "f" or isinstance(value, float):
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(int(value))
