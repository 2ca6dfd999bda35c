"""JSON in ruff's shape: a list of objects with code, message, location, fix and url."""

from __future__ import annotations

import json

from fuselint.catalog import Catalog
from fuselint.findings import Finding


def finding_to_json(f: Finding, catalog: Catalog) -> dict:
    rule = catalog.rules.get(f.code)
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": str(f.fix.applicability),
            "message": f.fix.message,
            "edits": [
                {
                    "content": e.content,
                    "location": {"row": e.line, "column": e.column},
                    "end_location": {"row": e.end_line, "column": e.end_column},
                }
                for e in f.fix.edits
            ],
            "imports": list(f.fix.imports),
            "definitions": list(f.fix.definitions),
        }
    return {
        "code": f.code,
        "name": rule.name if rule else "",
        "message": f.message,
        "filename": f.span.path,
        "location": {"row": f.span.line, "column": f.span.column},
        "end_location": {"row": f.span.end_line, "column": f.span.end_column},
        "noqa_row": f.span.line,
        "fix": fix,
        "gain": f.gain.to_json() if f.gain else None,
        "details": dict(f.details),
        "url": rule.url if rule else None,
    }


def render_json(findings: list[Finding], catalog: Catalog) -> str:
    return json.dumps([finding_to_json(f, catalog) for f in findings], indent=2) + "\n"


def render_statistics_json(findings: list[Finding], catalog: Catalog) -> str:
    """`--statistics --format json`: one object per rule, most frequent first (ruff's shape)."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.code] = counts.get(f.code, 0) + 1
    fixable = {f.code for f in findings if f.fix is not None}
    rows = [
        {
            "code": code,
            "name": catalog.rules[code].name if code in catalog.rules else "",
            "count": count,
            "fixable": code in fixable,
        }
        for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return json.dumps(rows, indent=2) + "\n"
