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
