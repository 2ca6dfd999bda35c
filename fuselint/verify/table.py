"""verify's report: one row per (variant, backend), then predicted against measured gains."""

from __future__ import annotations

import json

from fuselint.verify.run import Verification


def _speedup(base: float | None, other: float | None) -> str:
    return f"{base / other:.2f}x" if base and other else "–"


def render_text(v: Verification) -> str:
    base = v.row("original", "eager")
    base_ms = base.ms if base else None
    lines = [f"{v.entry} on {v.device}" + (f" ({v.platform})" if v.platform else ""), ""]
    if not v.device.startswith("cuda"):
        # The prediction is for a GPU; CPU timings swing with the machine's load and say little.
        lines[-1:] = ["note: timings on the CPU are indicative only; verify on a CUDA GPU for the proof", ""]
    lines.append(
        f"{'variant':<9} {'backend':<22} {'ms':>9} {'vs eager':>9} {'compile s':>10} {'max rel err':>12}  check"
    )
    for r in v.rows:
        if r.error:
            lines.append(
                f"{r.variant:<9} {r.backend:<22} {'–':>9} {'–':>9} {'–':>10} {'–':>12}  error: {r.error}"
            )
            continue
        err = f"{r.check.max_rel_error:.1e}" if r.check else "–"
        status = "ok" if r.check and r.check.ok else f"MISMATCH: {r.check.problem if r.check else ''}"
        status += f" ({r.how})" if r.how else ""
        compile_s = f"{r.compile_s:.2f}" if r.compile_s is not None else "–"
        lines.append(
            f"{r.variant:<9} {r.backend:<22} {r.ms:>9.4f} {_speedup(base_ms, r.ms):>9} {compile_s:>10} {err:>12}  {status}"
        )
    if v.fixed_files:
        lines += [
            "",
            "fixed source: "
            + ", ".join(f"{f.path} ({f.fixes} fixes: {', '.join(f.codes)})" for f in v.fixed_files),
        ]
    for note in v.notes:
        lines.append(f"note: {note}")
    spread = max((r.spread for r in v.rows if r.ms is not None), default=1.0)
    if not v.device.startswith("cuda") and spread > 2:
        lines.append(
            f"note: the CPU was busy while timing (a row's median run took {spread:.0f}x its fastest); "
            "each row shows its fastest run, timed in rounds interleaved with the other rows"
        )
    elif v.device.startswith("cuda") and spread > 1.25:
        lines.append(
            f"note: the host's speed changed while timing (a row's median round took {spread:.2f}x its "
            "fastest); each row shows its median round, timed in rounds interleaved with the other rows"
        )
    by_variant = {p.variant: p for p in v.predictions}
    if by_variant:
        lines += ["", "predicted vs measured:"]
        for variant, p in by_variant.items():
            eager, fused = v.row(variant, "eager"), v.row(variant, "fuselint")
            measured = _speedup(eager.ms if eager else None, fused.ms if fused else None)
            lines.append(
                f"  {variant}: fuselint vs eager predicted {p.eager_us / p.fused_us:.2f}x "
                f"({p.eager_launches:.0f} -> {p.fused_launches:.0f} launches), measured {measured}"
            )
        if "original" in by_variant and "fixed" in by_variant:
            o, f = by_variant["original"], by_variant["fixed"]
            eo, ef = v.row("original", "eager"), v.row("fixed", "eager")
            lines.append(
                f"  the fix, in eager: predicted {o.eager_us / f.eager_us:.2f}x "
                f"({o.eager_launches:.0f} -> {f.eager_launches:.0f} launches), "
                f"measured {_speedup(eo.ms if eo else None, ef.ms if ef else None)}"
            )
    lines.append("")
    lines.append("numerics: all outputs match eager" if v.ok else "numerics: MISMATCH against eager")
    return "\n".join(lines) + "\n"


def render_json(v: Verification) -> str:
    return (
        json.dumps(
            {
                "entry": v.entry,
                "device": v.device,
                "platform": v.platform,
                "ok": v.ok,
                "rows": [
                    {
                        "variant": r.variant,
                        "backend": r.backend,
                        "ms": r.ms,
                        "compile_s": r.compile_s,
                        "ok": r.check.ok if r.check else None,
                        "max_rel_error": r.check.max_rel_error if r.check else None,
                        "problem": r.check.problem if r.check else r.error,
                        "how": r.how,
                        "spread": r.spread,
                    }
                    for r in v.rows
                ],
                "fixed_files": [
                    {"path": f.path, "fixes": f.fixes, "codes": list(f.codes)} for f in v.fixed_files
                ],
                "predictions": [p.__dict__ for p in v.predictions],
                "notes": list(v.notes),
            },
            indent=2,
        )
        + "\n"
    )
