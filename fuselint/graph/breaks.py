"""Graph breaks as findings: FL150, and the merge with the static FL1xx findings.

A traced break on a line where a static rule (FL101 host sync, FL103 print, ...) already
reports keeps the static finding, enriched with dynamo's details, so the user sees one
finding per line: the static rule says what to write instead, dynamo confirms it breaks.
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Iterable, Sequence
from pathlib import Path

from fuselint.findings import Finding, Gain, Span, display_path
from fuselint.graph.capture import Capture, GraphBreak, is_user_file

CODE = "FL150"


def break_details(brk: GraphBreak) -> tuple[tuple[str, str], ...]:
    details = [("gb_id", brk.gb_id), ("reason", brk.reason)]
    if brk.explanation:
        details.append(("explanation", brk.explanation))
    if brk.url:
        details.append(("url", brk.url))
    if brk.explored:
        details.append(("explored", brk.explored))
    if brk.skipped_frame:
        details.append(("frame", "runs in eager: dynamo could not resume after the break"))
    if brk.dynamo_file:
        details.append(("dynamo_location", f"{brk.dynamo_file}:{brk.dynamo_line}"))
    if brk.hits > 1:
        details.append(("hits", str(brk.hits)))
    if brk.hints:
        details.append(("hints", "\n".join(brk.hints)))
    if brk.stack:
        details.append(("stack", break_stack(brk)))
    elif not is_user_file(brk.file):
        details.append(
            ("location", "no frame of the model's own code is on the stack: placed where it broke")
        )
    return tuple((k, v) for k, v in details if v)


def break_stack(brk: GraphBreak) -> str:
    """The user's frames down to the break, outermost first: `path:line in function` a line."""
    return "\n".join(
        f"{display_path(file)}:{line} in {func}" if func else f"{display_path(file)}:{line}"
        for file, line, func in brk.stack
    )


def break_message(brk: GraphBreak) -> str:
    gb = f" ({brk.gb_id})" if brk.gb_id else ""
    message = f"graph break{gb}: {brk.reason}"
    if brk.skipped_frame:
        message += "; the whole frame falls back to eager"
    if brk.explored:
        message += f"; traced on meta, only {brk.explored} explored"
    return message


def break_finding(brk: GraphBreak, gain: Gain | None = None) -> Finding:
    text = linecache.getline(brk.file, brk.line) if brk.line else ""
    stripped = text.strip()
    column = len(text) - len(text.lstrip()) + 1 if stripped else 1
    end_column = len(text.rstrip("\r\n")) + 1 if stripped else 1
    return Finding(
        code=CODE,
        message=break_message(brk),
        span=Span(display_path(brk.file), brk.line, column, brk.line, end_column),
        source_line=stripped,
        details=break_details(brk),
        gain=gain,
    )


def break_findings(capture: Capture, gains: Sequence[Gain | None] = ()) -> list[Finding]:
    """One FL150 finding per graph break of the capture, in source order; `gains` (one per
    break, priced by the planner) says what fixing each would save."""
    gains = list(gains) or [None] * len(capture.breaks)
    return sorted(
        (break_finding(b, g) for b, g in zip(capture.breaks, gains, strict=True)), key=lambda f: f.sort_key
    )


def _place(finding: Finding) -> tuple[str, int]:
    return str(Path(finding.span.path).resolve()), finding.span.line


def merge_findings(static: Iterable[Finding], traced: Iterable[Finding]) -> list[Finding]:
    """Static findings, with each traced FL150 folded into the FL1xx static finding on its line.

    A traced break with no static FL1xx finding on its (path, line) is kept as FL150.
    """
    static = list(static)
    by_place: dict[tuple[str, int], list[int]] = {}
    for i, f in enumerate(static):
        if f.code.startswith("FL1") and f.code != CODE:
            by_place.setdefault(_place(f), []).append(i)
    kept: list[Finding] = []
    for t in traced:
        hits = by_place.get(_place(t), []) if t.code == CODE else []
        if not hits:
            kept.append(t)
            continue
        for i in hits:
            have = {k for k, _ in static[i].details}
            extra = tuple((k, v) for k, v in t.details if k not in have)
            static[i] = dataclasses.replace(
                static[i], details=static[i].details + extra, gain=static[i].gain or t.gain
            )
    return sorted(static + kept, key=lambda f: f.sort_key)
