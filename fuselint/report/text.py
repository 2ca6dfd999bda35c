"""ruff-style text: `path:line:col: CODE [*] message`, a source excerpt, and a summary.

A finding that carries a Gain ends with `(expected saving: ...)`, and the summary adds
the total saving when any finding has one; without gains the output is ruff's. A finding
behind which dynamo saw a graph break is followed by `= note:`/`= help:` lines (as ruff and
rustc print notes): dynamo's confirmation and explanation, the user's stack, the break's page.
"""

from __future__ import annotations

from collections import Counter

from fuselint.catalog import Catalog
from fuselint.findings import Applicability, Finding
from fuselint.report.gain import describe_gain, saving_suffix, total_gain
from fuselint.report.traced import notes


def _marker(finding: Finding, unsafe: bool) -> str:
    if finding.fix is None:
        return ""
    if finding.fix.applicability is Applicability.SAFE or unsafe:
        return " [*]"
    return ""


def _excerpt(finding: Finding, lines: list[str]) -> list[str]:
    span = finding.span
    if not 1 <= span.line <= len(lines):
        return []
    text = lines[span.line - 1].rstrip("\r\n").expandtabs(1)
    width = span.end_column - span.column if span.end_line == span.line else len(text) - span.column + 1
    gutter = f"{span.line:>4} | "
    return [f"{gutter}{text}", " " * (len(gutter) + span.column - 1) + "^" * max(width, 1)]


def _notes(finding: Finding) -> list[str]:
    """rustc/ruff-style `  = note: ...` lines with what dynamo said about a traced break."""
    lines = []
    for label, (first, *rest) in notes(finding):
        lines.append(f"  = {label}: {first}")
        lines.extend(" " * (len(label) + 6) + line for line in rest)
    return lines


def render_text(
    findings: list[Finding],
    sources: dict[str, list[str]] | None = None,
    *,
    unsafe: bool = False,
    fixed: int = 0,
) -> str:
    out: list[str] = []
    for f in findings:
        s = f.span
        out.append(
            f"{s.path}:{s.line}:{s.column}: {f.code}{_marker(f, unsafe)} {f.message}{saving_suffix(f.gain)}"
        )
        shown = _excerpt(f, sources[s.path]) if sources is not None and s.path in sources else []
        shown += _notes(f)
        if shown:
            out.extend([*shown, ""])
    out.append(summary(findings, unsafe=unsafe, fixed=fixed))
    return "\n".join(out) + "\n"


def summary(findings: list[Finding], *, unsafe: bool = False, fixed: int = 0) -> str:
    parts = []
    if fixed:
        parts.append(f"Fixed {fixed} error{'s' if fixed != 1 else ''}.")
    if not findings:
        parts.append("All checks passed!" if not fixed else "No errors remaining.")
        return " ".join(parts)
    n = len(findings)
    line = f"Found {n} error{'s' if n != 1 else ''}."
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe_count = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    fixable = safe + (unsafe_count if unsafe else 0)
    if fixable:
        line += f"\n[*] {fixable} fixable with `fuselint check --fix`"
        if unsafe_count and not unsafe:
            line += f" ({unsafe_count} unsafe fixes available with `--unsafe-fixes`)"
        line += "."
    elif unsafe_count:
        line += f"\nNo fixes available ({unsafe_count} unsafe fixes available with `--unsafe-fixes`)."
    saving = describe_gain(total_gain(findings))
    if saving:
        line += f"\nExpected saving if all are fixed: {saving} per call."
    parts.append(line)
    return "\n".join(parts)


def render_statistics(findings: list[Finding], catalog: Catalog) -> str:
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fix is not None}
    rows = []
    for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        name = catalog[code].name if code in catalog else ""
        rows.append(f"{count:>5}\t{code}\t{'[*]' if code in fixable else '[ ]'} {name}")
    return "\n".join(rows) + ("\n" if rows else "")
