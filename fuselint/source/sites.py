"""One finding per site: the break rules' findings on one line become one finding.

A line like `torch.unique(m[m < sz])` or `if bool(mask.all()):` holds two blockers, and the
break rules (FL101..FL108) each report theirs. Dynamo stops at the first of them, so the user
has one site to fix, and a report that counts it twice inflates it. `one_per_site` keeps one
finding per (file, line) and names the others in its message and in `details["also"]`.

Which one is kept (a stated, deterministic rule):
1. the blocker Python evaluates first, which is where dynamo breaks: an expression completes
   before the expression that contains it, and of two side by side the left one completes
   first, so spans are ordered by where they end, then the inner (later start) first;
2. on the same span, by `SITE_PRIORITY`: the op that reads or reshapes a tensor (host sync,
   data-dependent shape, untraceable call) before the statement around it (a branch, a loop);
3. then by code.

The merge is for reports only: `lint_text` keeps every finding, so the fixer still sees (and
fixes) each one, and `# noqa` of any code on the line silences the whole site (`site_codes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from fuselint.findings import Finding

# The break rules, in the order a tie on one span is broken (see the module docstring).
SITE_PRIORITY = ("FL101", "FL106", "FL108", "FL105", "FL104", "FL103", "FL102", "FL107")
_RANK = {code: i for i, code in enumerate(SITE_PRIORITY)}
ALSO_KEY = "also"

# A message's first clause ends at the first ": " outside backquotes.
_CLAUSE = re.compile(r"^(?:`[^`]*`|[^`:]|:(?! ))*")


def in_site(finding: Finding) -> bool:
    """A finding of a break rule, which shares its line's site with the others."""
    return finding.code in _RANK


def _evaluation_order(finding: Finding) -> tuple:
    span = finding.span
    return (span.end_line, span.end_column, -span.line, -span.column, _RANK[finding.code], finding.code)


def _clause(finding: Finding) -> str:
    match = _CLAUSE.match(finding.message)
    text = match.group(0).strip() if match else ""
    return f"{finding.code} {text or finding.message}"


def site_codes(findings: Iterable[Finding]) -> dict[tuple[str, int], set[str]]:
    """(path, line) -> the codes of the break rules' findings there."""
    codes: dict[tuple[str, int], set[str]] = {}
    for f in findings:
        if in_site(f):
            codes.setdefault((f.span.path, f.span.line), set()).add(f.code)
    return codes


def one_per_site(findings: Iterable[Finding]) -> list[Finding]:
    """The findings with those of the break rules merged to one per line, in input order
    (each site where its kept finding was)."""
    findings = list(findings)
    sites: dict[tuple[str, int], list[Finding]] = {}
    for f in findings:
        if in_site(f):
            sites.setdefault((f.span.path, f.span.line), []).append(f)
    kept: dict[int, Finding | None] = {}
    for group in sites.values():
        if len(group) == 1:
            continue
        ordered = sorted(group, key=_evaluation_order)
        first, rest = ordered[0], ordered[1:]
        note = "; ".join(_clause(f) for f in rest)
        where = ", ".join(f"{f.code} {f.span.line}:{f.span.column}" for f in rest)
        kept[id(first)] = replace(
            first,
            message=f"{first.message} (also on this line: {note})",
            details=(*first.details, (ALSO_KEY, where)),
        )
        for f in rest:
            kept[id(f)] = None
    out = []
    for f in findings:
        site = kept.get(id(f), f)
        if site is not None:
            out.append(site)
    return out
