"""The row a traced model leaves for the reports: what it costs eager and fused, in plain values.

These frozen values cross from the fusion room into `report/` (the Markdown model table), into
`fuselint graph`'s printout and, as JSON, into its `plan` key. This module imports nothing heavy:
`check` reads them without loading torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Totals:
    """One side (eager or fused) of a model's cost per run: kernel launches, bytes moved, time."""

    launches: float
    bytes: float | None = None
    time_us: float | None = None  # rounded to 3 decimals, as the JSON shows it


@dataclass(frozen=True)
class ModelSummary:
    """A traced entry's summary: its graphs and breaks, and its cost eager against fused."""

    model: str
    device: str
    graphs: int
    breaks: int
    eager: Totals
    fused: Totals
    speedup: float
    fusible_speedup: float

    def as_json(self) -> dict:
        """The dict `fuselint graph` writes under `plan.models` (keys in field order)."""
        return asdict(self)
