"""How a Gain reads in a report: totals over findings, and numbers in units people read.

Every format says the expected saving the same way, so the wording lives here once; the
units themselves live beside Gain in fuselint.findings, where findings' messages use them too.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuselint.findings import Finding, Gain, format_bytes, format_count, format_time_us

__all__ = ["describe_gain", "format_bytes", "format_count", "format_time_us", "total_gain"]


def total_gain(findings: Iterable[Finding]) -> Gain | None:
    """The sum of the findings' gains, or None when no finding carries one.

    The device names the time, so gains without a time do not blur it: 12 µs on H100
    plus 2 launches with no time is still 12 µs on H100.
    """
    gains = [f.gain for f in findings if f.gain is not None]
    if not gains:
        return None
    timed = [g for g in gains if g.time_us is not None]
    devices = {g.device for g in timed}
    total = Gain(
        launches=sum(g.launches for g in gains),
        bytes=sum(g.bytes for g in gains),
        time_us=sum(g.time_us for g in timed) if timed else None,
        device=devices.pop() if len(devices) == 1 else None,
    )
    return total


def describe_gain(gain: Gain | None) -> str:
    """`3 launches, 1.5 MB, ~12 µs on H100`; empty when there is nothing to say."""
    if gain is None:
        return ""
    parts = []
    if gain.launches:
        noun = "launch" if gain.launches == 1 else "launches"
        parts.append(f"{format_count(gain.launches)} {noun}")
    if gain.bytes:
        parts.append(format_bytes(gain.bytes))
    if gain.time_us:
        time = f"~{format_time_us(gain.time_us)}"
        if gain.device:
            time += f" on {gain.device}"
        parts.append(time)
    return ", ".join(parts)


def saving_suffix(gain: Gain | None) -> str:
    """` (expected saving: 3 launches, 1.5 MB)` for the end of a message, or empty."""
    described = describe_gain(gain)
    return f" (expected saving: {described})" if described else ""
