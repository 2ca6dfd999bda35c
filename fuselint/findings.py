"""The values that cross rooms: a Finding at a Span, with an optional Gain and Fix.

Every room (source rules, graph rules, the planner) speaks in these types and every
report formats them, so they are small, frozen and free of any room's internals.
Lines are 1-based; columns are 1-based and count characters (not UTF-8 bytes), as
editors and ruff's JSON do. An end column points one past the last character.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True, order=True)
class Span:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int


class Applicability(str, enum.Enum):
    """How far a fix can be trusted (ruff's vocabulary)."""

    SAFE = "safe"  # preserves behaviour for every input
    UNSAFE = "unsafe"  # preserves behaviour under the assumptions the rule states

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between (line, column) and (end_line, end_column) with `content`."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]
    # Import statements the edited code needs, e.g. "import torch.nn.functional as F".
    # The fixer adds each one that the file does not already have.
    imports: tuple[str, ...] = ()
    # Module-level definitions the edited code calls (a custom op and its fake implementation),
    # each a block of top-level statements. The fixer adds each one, once, after the file's
    # imports, unless the file already binds the name of its first `def` (running twice adds none).
    definitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gain:
    """What fixing a finding is expected to save, per call of the code it is in."""

    launches: float = 0.0
    bytes: float = 0.0
    time_us: float | None = None
    device: str | None = None

    def __add__(self, other: Gain) -> Gain:
        same_device = self.device if self.device == other.device else None
        time = None
        if self.time_us is not None or other.time_us is not None:
            time = (self.time_us or 0.0) + (other.time_us or 0.0)
        return Gain(self.launches + other.launches, self.bytes + other.bytes, time, same_device)

    def to_json(self) -> dict:
        return {
            "launches": self.launches,
            "bytes": self.bytes,
            "time_us": self.time_us,
            "device": self.device,
        }


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    span: Span
    gain: Gain | None = None
    fix: Fix | None = None
    # The stripped text of the span's first line: baselines match findings by it, so
    # a finding survives lines moving above it.
    source_line: str = ""
    # Extra machine-readable facts (e.g. a graph break's dynamo id and reason).
    details: tuple[tuple[str, str], ...] = field(default=())
    # Other lines whose noqa comment silences the finding too: one placed on a later line of a
    # multi-line test (where dynamo names the break) stays silenced by one on any line of it.
    noqa_lines: tuple[int, ...] = ()

    @property
    def sort_key(self) -> tuple:
        return (self.span.path, self.span.line, self.span.column, self.code)


def display_path(file: str) -> str:
    """Relative to the working directory when the file is under it, as paths given on the command line are."""
    try:
        return os.path.relpath(file) if Path(file).resolve().is_relative_to(Path.cwd()) else file
    except (ValueError, OSError):
        return file


def with_display_path(finding: Finding) -> Finding:
    """The finding with its path as `display_path` writes it (traced findings carry absolute paths)."""
    path = display_path(finding.span.path)
    return finding if path == finding.span.path else replace(finding, span=replace(finding.span, path=path))


# ---------------------------------------------------------------- units of a Gain
# Bytes use decimal units (1 KB = 1000 B) because the cost model turns them into time through
# bandwidths quoted in decimal GB/s; messages and reports share these so they never disagree.


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
