"""Compare outputs against a reference: any nesting of tensors, tuples, lists, dicts.

Tolerances follow the dtype: what fp32 reassociation gives is far below 1e-4 relative;
bf16 storage alone loses ~4e-3. Errors are measured as ||out - ref|| / ||ref|| in
float64 (robust to single tiny elements), and NaN or a shape mismatch never passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_rel_error: float
    tensors: int
    problem: str = ""


def _flatten(value, prefix: str = "out") -> list[tuple[str, object]]:
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    if isinstance(value, (tuple, list)):
        return [item for i, v in enumerate(value) for item in _flatten(v, f"{prefix}[{i}]")]
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in _flatten(v, f"{prefix}[{k!r}]")]
    if hasattr(value, "to_tuple"):  # transformers ModelOutput
        return _flatten(value.to_tuple(), prefix)
    return [(prefix, value)]


def compare(out, ref, tolerance: float | None = None) -> Comparison:
    got, want = _flatten(out), _flatten(ref)
    if [k for k, _ in got] != [k for k, _ in want]:
        return Comparison(False, float("inf"), 0, "output structure differs from eager")
    worst, count = 0.0, 0
    for (name, a), (_, b) in zip(got, want, strict=True):
        if not isinstance(b, torch.Tensor):
            if a != b:
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
