"""The CI gate: a baseline of accepted findings, and the verdict on the new ones.

A team adopting fuselint on a large codebase records today's findings in a baseline
file (`--update-baseline`), commits it, and from then on CI fails only on findings that
are not in it. Findings are matched by `Fingerprint` (code, path, line text, occurrence),
so lines inserted or deleted above a finding do not make it new.

When two identical lines carry the same finding and the baseline knows one of them,
the first in file order is the known one; whichever line was added, one finding is new.

Thresholds let a team fail only when the new findings are worth fixing: with
`--fail-on-gain-launches 10`, CI fails when the new findings together would save at
least 10 kernel launches per call. Findings without an estimated gain count as zero
toward a threshold; without thresholds every new finding fails the gate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fuselint.findings import Finding, Gain
from fuselint.report.gain import describe_gain, format_bytes, format_count, format_time_us, total_gain

if TYPE_CHECKING:  # fingerprints (tokenize) are read only with a baseline: `check` starts without them
    from fuselint.report.fingerprint import Fingerprint

BASELINE_VERSION = 1


class BaselineError(Exception):
    """A baseline file that cannot be read or written; the message is one line."""


@dataclass(frozen=True)
class Baseline:
    entries: frozenset[Fingerprint] = frozenset()

    def __contains__(self, fingerprint: Fingerprint) -> bool:
        return fingerprint in self.entries

    def __len__(self) -> int:
        return len(self.entries)


def load_baseline(path: str | Path) -> Baseline:
    """Read a baseline written by `write_baseline`; any problem raises BaselineError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BaselineError(f"{path}: cannot read baseline: {reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: baseline is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: baseline must be an object with a `findings` list")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(
            f"{path}: baseline version {data.get('version')!r} is not supported "
            f"(expected {BASELINE_VERSION}); regenerate it with --update-baseline"
        )
    entries = set()
    for n, item in enumerate(data["findings"]):
        entries.add(_entry(item, f"{path}: findings[{n}]"))
    return Baseline(frozenset(entries))


def _entry(item: object, where: str) -> Fingerprint:
    fields = {
        "path": (str, "a string"),
        "code": (str, "a string"),
        "source": (str, "a string"),
        "occurrence": (int, "an integer"),
    }
    if not isinstance(item, dict):
        raise BaselineError(f"{where} must be an object")
    for key, (kind, described) in fields.items():
        value = item.get(key)
        # bool is an int in Python; a baseline saying `"occurrence": true` is broken.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise BaselineError(f"{where}.{key} must be {described}")
    if item["occurrence"] < 1:
        raise BaselineError(f"{where}.occurrence must be at least 1")
    from fuselint.report.fingerprint import Fingerprint

    return Fingerprint(item["path"], item["code"], item["source"], item["occurrence"])


def new_findings(findings: Sequence[Finding], baseline: Baseline, root: Path) -> list[Finding]:
    """The findings the baseline does not know, in the order given."""
    from fuselint.report.fingerprint import fingerprints

    prints = fingerprints(findings, root)
    return [f for f, fp in zip(findings, prints, strict=True) if fp not in baseline]


def baseline_json(findings: Sequence[Finding], root: Path) -> str:
    """The baseline file's text: sorted and without line numbers, so it changes only
    when findings do and diffs of it review well."""
    from fuselint.report.fingerprint import fingerprints

    entries = sorted(set(fingerprints(findings, root)))
    data = {
        "version": BASELINE_VERSION,
        "tool": "fuselint",
        "findings": [
            {"path": e.path, "code": e.code, "source": e.source, "occurrence": e.occurrence} for e in entries
        ],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: str | Path, findings: Sequence[Finding], root: Path) -> None:
    """Write the baseline atomically: a crash never leaves half a file for CI to read."""
    target = Path(path)
    text = baseline_json(findings, root)
    tmp = None
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise BaselineError(f"{target}: cannot write baseline: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Thresholds:
    """Fail only when the new findings' summed expected saving reaches one of these."""

    launches: float | None = None
    bytes: float | None = None
    time_us: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.launches, self.bytes, self.time_us))


@dataclass(frozen=True)
class Verdict:
    exit_code: int  # 0 pass, 1 fail (the CLI's `--exit-zero` still overrides)
    reason: str  # one line for the log, saying why


def gate(findings: Sequence[Finding], thresholds: Thresholds = Thresholds()) -> Verdict:
    """Judge the new findings (those left after the baseline)."""
    n = len(findings)
    noun = f"{n} new finding{'s' if n != 1 else ''}"
    if n == 0:
        return Verdict(0, "no new findings")
    if not thresholds.any:
        return Verdict(1, noun)
    gain = total_gain(findings) or Gain()
    reached = []
    if thresholds.launches is not None and gain.launches >= thresholds.launches:
        reached.append(
            f"{format_count(gain.launches)} launches >= --fail-on-gain-launches "
            f"{format_count(thresholds.launches)}"
        )
    if thresholds.bytes is not None and gain.bytes >= thresholds.bytes:
        reached.append(f"{format_bytes(gain.bytes)} >= --fail-on-gain-bytes {format_bytes(thresholds.bytes)}")
    if thresholds.time_us is not None and (gain.time_us or 0.0) >= thresholds.time_us:
        reached.append(
            f"{format_time_us(gain.time_us or 0.0)} >= --fail-on-gain-us {format_time_us(thresholds.time_us)}"
        )
    if reached:
        return Verdict(1, f"{noun}, expected saving {'; '.join(reached)}")
    saving = describe_gain(gain) or "none estimated"
    return Verdict(0, f"{noun}, expected saving ({saving}) below every --fail-on-gain threshold")
