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
