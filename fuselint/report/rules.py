"""Rule pages and the rule table: what `fuselint rule CODE` and `fuselint rules` print, and
what scripts/update_readme.py writes into the README."""

from __future__ import annotations

import json

from fuselint.catalog import Catalog, Rule
from fuselint.config import Config


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


NOT_SELECTED = "(not selected) "


def rules_table(catalog: Catalog, fmt: str = "text", config: Config | None = None) -> str:
    """The catalog as a text, markdown or JSON table. With `config`, a rule that these settings
    never run (outside `select`, ignored, or opt-in) says so: its summary starts with
    "(not selected)" and its JSON entry has `"selected": false`. Without it (the README), no mark."""
    rows = list(catalog)
    off = {r.code for r in rows if config is not None and not config.enabled(r.code)}
    if fmt == "json":
        entries = []
        for r in rows:
            entry = {"code": r.code, "name": r.name, "kind": r.kind, "fix": r.fix, "summary": r.summary}
            if config is not None:
                entry["selected"] = r.code not in off
            entries.append(entry)
        return json.dumps(entries, indent=2) + "\n"
    summaries = [(NOT_SELECTED if r.code in off else "") + r.summary for r in rows]
    if fmt == "markdown":
        lines = ["| Code | Name | Kind | Fix | What it flags |", "| --- | --- | --- | --- | --- |"]
        escaped = [s.replace("|", "\\|") for s in summaries]
        lines += [
            f"| {r.code} | {r.name} | {r.kind} | {r.fix} | {s} |" for r, s in zip(rows, escaped, strict=True)
        ]
        return "\n".join(lines) + "\n"
    width = max((len(r.name) for r in rows), default=4)
    lines = [f"{'CODE':<6}  {'NAME':<{width}}  {'KIND':<7}  {'FIX':<6}  SUMMARY"]
    lines += [
        f"{r.code:<6}  {r.name:<{width}}  {r.kind:<7}  {r.fix:<6}  {s}"
        for r, s in zip(rows, summaries, strict=True)
    ]
    return "\n".join(lines) + "\n"
