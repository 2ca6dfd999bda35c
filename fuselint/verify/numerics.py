"""Compare outputs against a reference: any pytree of tensors, and the tensors held by
objects pytree does not know (a transformers DynamicCache, a user's dataclass).

Tolerances follow the dtype: what fp32 reassociation gives is far below 1e-4 relative;
bf16 storage alone loses ~4e-3. Errors are measured as ||out - ref|| / ||ref|| in
float64 (robust to single tiny elements), and NaN or a shape mismatch never passes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}

# Values whose `==` means "the same value"; anything else is opened up for its tensors.
_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size, enum.Enum)
# Deep enough for a cache of layers of tensors; a bound, because user objects can nest anything.
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_rel_error: float
    tensors: int
    problem: str = ""


@dataclass(frozen=True)
class Kind:
    """Stands for an opaque object in a flattened output: only its class name is compared
    (the fixed source re-imports user classes, so class identity would always differ)."""

    name: str


def _type_name(value: object) -> str:
    return getattr(type(value), "__qualname__", type(value).__name__)


def _held(value: object) -> list[tuple[str, object]]:
    """What an object pytree does not know holds, in a fixed order: mapping items in their
    order, sequence items by index, attributes in definition order (dataclass fields, then
    __dict__ in insertion order, then __slots__)."""
    if isinstance(value, Mapping):
        return [(f"[{k!r}]", v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return [("", Kind(f"{_type_name(value)}{sorted(map(repr, value))}"))]
    names: list[str] = []
    if dataclasses.is_dataclass(value):
        names += [f.name for f in dataclasses.fields(value)]
    names += [n for n in getattr(value, "__dict__", {}) if n not in names]
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [n for n in ([slots] if isinstance(slots, str) else slots) if n not in names]
    return [
        (f".{n}", v) for n in names if not n.startswith("__") and (v := _attribute(value, n)) is not _MISSING
    ]


_MISSING = object()


def _attribute(value: object, name: str) -> object:
    try:
        return getattr(value, name)
    except Exception:  # an unset slot, a property that fails: nothing held there
        return _MISSING


def _pytree_leaves(value: object) -> list[tuple[str, object]]:
    try:
        pairs, _ = pytree.tree_flatten_with_path(value)
        return [(pytree.keystr(path), leaf) for path, leaf in pairs]
    except ValueError:  # a node registered without key names: number its leaves
        return [(f"[{i}]", leaf) for i, leaf in enumerate(pytree.tree_leaves(value))]


def flatten(value: object, prefix: str = "out", depth: int = 0, seen: frozenset[int] = frozenset()) -> list:
    """(path, leaf) pairs: tensors, plain values, and a Kind for each opaque object, whose
    own contents follow it. Cycles and depth beyond _MAX_DEPTH end in a Kind."""
    out: list[tuple[str, object]] = []
    for path, leaf in _pytree_leaves(value):
        name = prefix + path
        if isinstance(leaf, (torch.Tensor, *_PLAIN)):
            out.append((name, leaf))
        elif isinstance(leaf, type):
            out.append((name, Kind(f"class {leaf.__qualname__}")))
        elif id(leaf) in seen or depth >= _MAX_DEPTH:
            out.append((name, Kind(f"{_type_name(leaf)} (not opened)")))
        else:
            out.append((name, Kind(_type_name(leaf))))
            for suffix, child in _held(leaf):
                out += flatten(child, name + suffix, depth + 1, seen | {id(leaf)})
    return out


def _plain_equal(a: object, b: object) -> bool:
    if isinstance(a, enum.Enum) and isinstance(b, enum.Enum):  # the fixed source re-imports its enums
        return (_type_name(a), a.name) == (_type_name(b), b.name)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-4) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def compare(out, ref, tolerance: float | None = None) -> Comparison:
    got, want = flatten(out), flatten(ref)
    if [k for k, _ in got] != [k for k, _ in want]:
        extra = sorted({k for k, _ in got} ^ {k for k, _ in want})
        where = f" at {extra[0]}" if extra else " (leaf order)"
        return Comparison(False, float("inf"), 0, f"output structure differs from eager{where}")
    worst, count = 0.0, 0
    for (name, a), (_, b) in zip(got, want, strict=True):
        if not isinstance(b, torch.Tensor):
            if isinstance(a, torch.Tensor) or not _plain_equal(a, b):
                return Comparison(False, float("inf"), count, f"{name}: {a!r} != {b!r}")
            continue
        if not isinstance(a, torch.Tensor) or a.shape != b.shape:
            return Comparison(
                False, float("inf"), count, f"{name}: shape {getattr(a, 'shape', None)} != {b.shape}"
            )
        count += 1
        if not b.is_floating_point():
            if not torch.equal(a.cpu(), b.cpu()):
                return Comparison(False, float("inf"), count, f"{name}: integer outputs differ")
            continue
        a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
        if torch.isnan(a64).any() and not torch.isnan(b64).any():
            return Comparison(False, float("nan"), count, f"{name}: NaN where eager has none")
        mask = ~(torch.isnan(b64) | torch.isinf(b64))
        denom = b64[mask].norm().item() or 1.0
        err = (a64[mask] - b64[mask]).norm().item() / denom
        worst = max(worst, err)
        limit = tolerance if tolerance is not None else TOLERANCE.get(b.dtype, 1e-4)
        if err > limit:
            return Comparison(
                False, worst, count, f"{name}: relative error {err:.2e} > {limit:.0e} ({b.dtype})"
            )
    return Comparison(True, worst, count)
