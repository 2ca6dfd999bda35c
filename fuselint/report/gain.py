"""How a Gain reads in a report: totals over findings, and numbers in units people read.

Every format says the expected saving the same way, so the wording lives here once.
Bytes use decimal units (1 KB = 1000 B) because the cost model turns them into time
through bandwidths quoted in decimal GB/s.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuselint.findings import Finding, Gain


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


def format_count(value: float) -> str:
    """`3`, `2.5`, `1,200`: whole numbers without a fraction, others with one decimal."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def format_bytes(value: float) -> str:
    """`512 B`, `1.5 KB`, `3.2 MB`, `1.1 GB`."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{_three_digits(value / scale)} {unit}"
    return f"{format_count(round(value))} B"


def format_time_us(value: float) -> str:
    """`0.4 µs`, `12.3 µs`, `1.25 ms`, `2.1 s`, from microseconds."""
    if abs(value) >= 1e6:
        return f"{_three_digits(value / 1e6)} s"
    if abs(value) >= 1e3:
        return f"{_three_digits(value / 1e3)} ms"
    return f"{_three_digits(value)} µs"


def _three_digits(value: float) -> str:
    # Three significant digits are as many as an estimate can honestly claim.
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


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
