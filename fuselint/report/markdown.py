"""A Markdown summary for a CI job page (`$GITHUB_STEP_SUMMARY`).

Totals first, then a table of findings by rule with what fixing each rule's findings
would save, then the graph breaks dynamo confirmed (with their gb id's page and the calls
that led there), then, when the planner's model summaries are given, a table of models
with eager against fused launches, bytes and time. A summary is read by people
skimming a job page, so numbers come in readable units (KB/MB, µs/ms).
"""

from __future__ import annotations

from collections.abc import Sequence

from fuselint.catalog import Catalog
from fuselint.findings import Applicability, Finding, Gain
from fuselint.fusion.model_summary import ModelSummary
from fuselint.report.gain import describe_gain, format_bytes, format_count, format_time_us, total_gain
from fuselint.report.traced import traced_break

DASH = "–"


def _cell(text: str) -> str:
    # A `|` ends a table cell and a newline ends the row.
    return " ".join(str(text).split()).replace("|", "\\|")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _totals(findings: Sequence[Finding]) -> list[str]:
    files = len({f.span.path for f in findings})
    line = f"**{_plural(len(findings), 'finding')}** in {_plural(files, 'file')}"
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    if safe:
        line += f" · {safe} fixable with `fuselint check --fix`"
    if unsafe:
        line += f" · {unsafe} more with `--unsafe-fixes`"
    saving = describe_gain(total_gain(findings))
    if saving:
        line += f" · expected saving if fixed: {saving} per call"
    return [line, ""]


def _rules_table(findings: Sequence[Finding], catalog: Catalog) -> list[str]:
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    rows = [
        "| Code | Rule | Findings | Fixable | Launches saved | Bytes saved |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for code in sorted(by_code, key=lambda c: (-len(by_code[c]), c)):
        group = by_code[code]
        rule = catalog.rules.get(code)
        label = f"[{code}]({rule.url})" if rule and rule.url else code
        gain = total_gain(group) or Gain()
        fixable = sum(1 for f in group if f.fix is not None)
        rows.append(
            f"| {label} | {_cell(rule.name) if rule else ''} | {len(group)} | {fixable} "
            f"| {format_count(gain.launches) if gain.launches else DASH} "
            f"| {format_bytes(gain.bytes) if gain.bytes else DASH} |"
        )
    return rows + [""]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _change(eager: float | None, fused: float | None, fmt) -> tuple[str, str]:
    """(`eager → fused`, saved) cells; a dash where a side is missing."""
    if eager is None or fused is None:
        return DASH, DASH
    return f"{fmt(eager)} → {fmt(fused)}", fmt(eager - fused)


def _models_table(models: Sequence[ModelSummary]) -> list[str]:
    rows = [
        "| Model | Launches (eager → fused) | Launches saved | Bytes (eager → fused) | Bytes saved "
        "| Time (eager → fused) | Expected speedup |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in models:
        eager, fused = m.eager, m.fused
        launches = _change(_number(eager.launches), _number(fused.launches), format_count)
        moved = _change(_number(eager.bytes), _number(fused.bytes), format_bytes)
        t_eager, t_fused = _number(eager.time_us), _number(fused.time_us)
        time = _change(t_eager, t_fused, format_time_us)[0]
        speedup = f"{t_eager / t_fused:.2f}×" if t_eager is not None and t_fused else DASH
        rows.append(
            f"| {_cell(m.model)} | {launches[0]} | {launches[1]} | {moved[0]} | {moved[1]} "
            f"| {time} | {speedup} |"
        )
    return rows + [""]


def _breaks_table(findings: Sequence[Finding]) -> list[str]:
    """One row per finding behind which dynamo saw a graph break; none when no entry was traced."""
    rows = []
    for f in findings:
        brk = traced_break(f)
        if brk is None:
            continue
        gb = f"[{brk.gb_id}]({brk.url})" if brk.gb_id and brk.url else brk.gb_id or DASH
        called_from = " → ".join(str(frame) for frame in brk.stack[:-1]) or DASH
        rows.append(
            f"| {_cell(f'{f.span.path}:{f.span.line}')} | {f.code} | {gb} | {_cell(brk.reason) or DASH} "
            f"| {_cell(called_from)} |"
        )
    if not rows:
        return []
    head = [
        "### Graph breaks seen by dynamo",
        "",
        "| Where | Finding | Dynamo | Reason | Called from |",
        "| --- | --- | --- | --- | --- |",
    ]
    return head + rows + [""]


def render_markdown(
    findings: Sequence[Finding], catalog: Catalog, models: Sequence[ModelSummary] | None = None
) -> str:
    out = ["## fuselint", ""]
    if findings:
        out += _totals(findings)
        out += _rules_table(findings, catalog)
        out += _breaks_table(findings)
    else:
        out += ["No findings: nothing stops fusion in the checked files.", ""]
    if models:
        out += ["### Models", ""]
        out += _models_table(models)
    return "\n".join(out)
