"""Rule pages and the rule table: what `fuselint rule CODE` and `fuselint rules` print, and
what scripts/update_readme.py writes into the README."""

from __future__ import annotations

import json

from fuselint.catalog import Catalog, Rule


def explain(r: Rule) -> str:
    """ruff's rule page: what it does, why, an example, what to use instead, fix safety."""
    fix = {
        "none": "This rule has no automatic fix.",
        "safe": "The fix is safe: it keeps behaviour for every input; `--fix` applies it.",
        "unsafe": "The fix is unsafe: it keeps behaviour only under the assumptions below; "
        "`--fix --unsafe-fixes` applies it.",
    }[r.fix]
    parts = [
        f"# {r.name} ({r.code})",
        "",
        f"Kind: {r.kind}",
        "",
        "## What it does",
        r.summary,
        "",
        "## Why it blocks fusion",
        r.why,
        "",
    ]
    if r.bad:
        parts += ["## Example", "```python", r.bad[0].strip("\n"), "```", ""]
    parts += ["## Use instead", r.use_instead, ""]
    example = r.fixed[0] if r.fixed else (r.good[0] if r.good else "")
    if example:
        parts += ["```python", example.strip("\n"), "```", ""]
    parts += ["## Fix safety", fix]
    if r.fix_notes:
        parts += ["", r.fix_notes]
    return "\n".join(parts) + "\n"


def rules_table(catalog: Catalog, fmt: str = "text") -> str:
    rows = list(catalog)
    if fmt == "json":
        return (
            json.dumps(
                [
                    {"code": r.code, "name": r.name, "kind": r.kind, "fix": r.fix, "summary": r.summary}
                    for r in rows
                ],
                indent=2,
            )
            + "\n"
        )
    if fmt == "markdown":
        lines = ["| Code | Name | Kind | Fix | What it flags |", "| --- | --- | --- | --- | --- |"]
        escaped = [r.summary.replace("|", "\\|") for r in rows]
        lines += [
            f"| {r.code} | {r.name} | {r.kind} | {r.fix} | {s} |" for r, s in zip(rows, escaped, strict=True)
        ]
        return "\n".join(lines) + "\n"
    width = max((len(r.name) for r in rows), default=4)
    lines = [f"{'CODE':<6}  {'NAME':<{width}}  {'KIND':<7}  {'FIX':<6}  SUMMARY"]
    lines += [f"{r.code:<6}  {r.name:<{width}}  {r.kind:<7}  {r.fix:<6}  {r.summary}" for r in rows]
    return "\n".join(lines) + "\n"
