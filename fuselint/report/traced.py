"""What dynamo said about a traced graph break, worded once for every format.

A traced break reaches the reports as a Finding whose `details` carry dynamo's facts (see
fuselint/graph/breaks.py): `gb_id`, `reason`, `explanation`, `url`, `stack` (frames joined by
newlines, each `path:line in function`, outermost first), `dynamo_location`, `hits`, `explored`,
`frame`, and `hints` when the capture passes them on. An FL150 finding is the break itself and its message already says the id, the reason,
whether the frame fell back to eager and what was explored; a static finding (FL101, FL103, ...)
that a break was merged into says none of it, so its notes start with dynamo's confirmation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuselint.findings import Finding, display_path

BREAK_CODE = "FL150"
_FRAME = re.compile(r"^(?P<path>.+):(?P<line>\d+) in (?P<function>.+)$")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{display_path(self.path)}:{self.line} in {self.function}"


@dataclass(frozen=True)
class TracedBreak:
    gb_id: str
    reason: str
    explanation: str
    url: str
    stack: tuple[Frame | str, ...]  # outermost first; a frame that does not parse stays text
    facts: tuple[str, ...]  # the rest, each a short clause: where dynamo broke, hits, ...
    hints: tuple[str, ...] = ()  # dynamo's hints (key `hints`, one a line) when the capture gives them


def _frame(text: str) -> Frame | str:
    m = _FRAME.match(text.strip())
    return Frame(m["path"], int(m["line"]), m["function"]) if m else text.strip()


def traced_break(finding: Finding) -> TracedBreak | None:
    """Dynamo's facts of the finding, None when no traced break is behind it."""
    d = dict(finding.details)
    if not d.get("gb_id") and not d.get("reason"):
        return None
    facts = []
    if d.get("dynamo_location"):
        facts.append(f"dynamo broke at {display_path(d['dynamo_location'])}")
    hits = int(d["hits"]) if d.get("hits", "").isdigit() else 1
    if hits > 1:
        facts.append(f"dynamo hit it {hits} times")
    if finding.code != BREAK_CODE:  # FL150's message says these already
        if d.get("frame"):
            facts.append(d["frame"])
        if d.get("explored"):
            facts.append(f"traced on meta: only {d['explored']} explored")
    stack = tuple(_frame(t) for t in d.get("stack", "").splitlines() if t.strip())
    return TracedBreak(
        d.get("gb_id", ""),
        d.get("reason", ""),
        d.get("explanation", ""),
        d.get("url", ""),
        stack,
        tuple(facts),
        tuple(h.strip() for h in d.get("hints", "").splitlines() if h.strip()),
    )


def confirmation(finding: Finding, brk: TracedBreak) -> str:
    """`confirmed by dynamo (gb0059): reason` for a static finding, empty for FL150 itself."""
    if finding.code == BREAK_CODE:
        return ""
    gb = f" ({brk.gb_id})" if brk.gb_id else ""
    return f"confirmed by dynamo{gb}" + (f": {brk.reason}" if brk.reason else "")


def notes(finding: Finding) -> list[tuple[str, list[str]]]:
    """(label, lines) notes under a finding, in the order a reader needs them: that dynamo
    confirms it, dynamo's explanation and other facts, the user's stack, the page to read."""
    brk = traced_break(finding)
    if brk is None:
        return []
    out: list[tuple[str, list[str]]] = []
    confirmed = confirmation(finding, brk)
    if confirmed:
        out.append(("note", [confirmed]))
    if brk.explanation:
        out.append(("note", [brk.explanation]))
    if brk.facts:
        out.append(("note", ["; ".join(brk.facts)]))
    if brk.stack:
        out.append(("note", ["user stack, outermost first:", *(str(f) for f in brk.stack)]))
    out.extend(("help", [hint]) for hint in brk.hints)
    if brk.url:
        out.append(("help", [f"see {brk.url}"]))
    return out


def note_lines(finding: Finding) -> list[str]:
    """The notes as plain lines (`note: ...`, stack frames indented), for formats whose message
    is free text: GitHub annotations and SARIF messages."""
    lines = []
    for label, (first, *rest) in notes(finding):
        lines.append(f"{label}: {first}")
        lines.extend(f"  {line}" for line in rest)
    return lines
