"""SARIF 2.1.0, the format GitHub code scanning uploads (github/codeql-action/upload-sarif).

One run, whose driver lists every rule of the catalog (so a result's `ruleIndex` points
into it and code scanning can show the rule's help beside an alert). Paths are
repository-relative URIs against `%SRCROOT%`, columns count Unicode code points
(`columnKind`), and `primaryLocationLineHash` is the same line-move-proof fingerprint
the baseline uses, so an alert keeps its identity when code above it changes. A traced graph
break adds dynamo's notes to the message and the user's stack as the result's `stacks`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from fuselint import __version__
from fuselint.catalog import Catalog, Rule
from fuselint.findings import Applicability, Finding, Span
from fuselint.report.fingerprint import fingerprints, repo_path
from fuselint.report.gain import saving_suffix
from fuselint.report.traced import Frame, note_lines, traced_break

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/fuselint/fuselint"
SRCROOT = "%SRCROOT%"
# Every finding fails the gate (exit 1), so every finding is an error to code scanning too.
LEVEL = "error"


def _rule_help_markdown(rule: Rule) -> str:
    parts = [f"**{rule.name}** ({rule.code}): {rule.summary}", "", "## Why it blocks fusion", rule.why]
    if rule.bad:
        parts += ["", "## Example", "```python", rule.bad[0].strip("\n"), "```"]
    parts += ["", "## Use instead", rule.use_instead]
    if rule.fix != "none":
        parts += [
            "",
            f"## Fix ({rule.fix})",
            rule.fix_notes or f"`fuselint check --fix` applies a {rule.fix} fix.",
        ]
    return "\n".join(parts)


def _rule_descriptor(rule: Rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": rule.use_instead, "markdown": _rule_help_markdown(rule)},
        "helpUri": rule.url,
        "defaultConfiguration": {"level": LEVEL},
        "properties": {"tags": ["performance", "fusion", rule.kind]},
    }


def _unknown_descriptor(code: str) -> dict:
    # A finding whose rule is not in the catalog (a plugin gone missing) still gets a
    # descriptor: code scanning rejects a ruleIndex that points nowhere.
    return {
        "id": code,
        "shortDescription": {"text": code},
        "defaultConfiguration": {"level": LEVEL},
    }


def artifact_location(path: str, root: Path) -> dict:
    """A `%SRCROOT%`-relative URI inside the repository, an absolute `file:` URI outside it."""
    relative = repo_path(path, root)
    if relative is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    # Percent-encode spaces, commas and non-ASCII: `uri` must be a valid URI reference.
    return {"uri": quote(relative, safe="/"), "uriBaseId": SRCROOT}


def _region(span: Span) -> dict:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": span.end_line,
        "endColumn": span.end_column,
    }


def _fix(finding: Finding, location: dict) -> dict | None:
    fix = finding.fix
    # SARIF replacements are plain text edits; a fix that also adds imports or module-level
    # definitions needs the fixer to find where they go, so it is left out rather than given
    # half-applied.
    if fix is None or fix.imports or fix.definitions or not fix.edits:
        return None
    description = fix.message
    if fix.applicability is Applicability.UNSAFE:
        description += " (unsafe fix: keeps behaviour only under the rule's stated assumptions)"
    return {
        "description": {"text": description},
        "artifactChanges": [
            {
                "artifactLocation": location,
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": e.line,
                            "startColumn": e.column,
                            "endLine": e.end_line,
                            "endColumn": e.end_column,
                        },
                        "insertedContent": {"text": e.content},
                    }
                    for e in fix.edits
                ],
            }
        ],
    }


def _stack(finding: Finding, root: Path) -> dict | None:
    """The user's stack down to a traced graph break, as a SARIF stack (innermost frame first)."""
    brk = traced_break(finding)
    frames = [f for f in brk.stack if isinstance(f, Frame)] if brk is not None else []
    if not frames:
        return None
    return {
        "message": {"text": "user stack where dynamo broke the graph"},
        "frames": [
            {
                "location": {
                    "physicalLocation": {
                        "artifactLocation": artifact_location(f.path, root),
                        "region": {"startLine": f.line},
                    },
                    "message": {"text": f.function},
                }
            }
            for f in reversed(frames)
        ],
    }


def sarif_log(findings: Sequence[Finding], catalog: Catalog, root: Path) -> dict:
    """The SARIF log as a dict (render_sarif serializes it)."""
    descriptors = [_rule_descriptor(rule) for rule in catalog]
    index = {d["id"]: n for n, d in enumerate(descriptors)}
    for code in sorted({f.code for f in findings} - set(index)):
        index[code] = len(descriptors)
        descriptors.append(_unknown_descriptor(code))

    results = []
    for finding, fingerprint in zip(findings, fingerprints(findings, root), strict=True):
        location = artifact_location(finding.span.path, root)
        result = {
            "ruleId": finding.code,
            "ruleIndex": index[finding.code],
            "level": LEVEL,
            "message": {
                "text": "\n".join([finding.message + saving_suffix(finding.gain), *note_lines(finding)])
            },
            "locations": [
                {"physicalLocation": {"artifactLocation": location, "region": _region(finding.span)}}
            ],
            "partialFingerprints": {"primaryLocationLineHash": fingerprint.line_hash},
        }
        stack = _stack(finding, root)
        if stack is not None:
            result["stacks"] = [stack]
        fix = _fix(finding, location)
        if fix is not None:
            result["fixes"] = [fix]
        properties = {}
        if finding.gain is not None:
            properties["gain"] = finding.gain.to_json()
        if finding.details:
            properties["details"] = dict(finding.details)
        if properties:
            result["properties"] = properties
        results.append(result)

    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "fuselint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": descriptors,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def render_sarif(findings: Sequence[Finding], catalog: Catalog, root: Path) -> str:
    return json.dumps(sarif_log(findings, catalog, root), indent=2, ensure_ascii=False) + "\n"
