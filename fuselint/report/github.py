"""GitHub Actions workflow commands: one `::error` annotation per finding.

GitHub shows each line as an annotation on the pull request's diff, at the finding's
span. The line's shape follows ruff's `--output-format github`:

    ::error title=fuselint (FL101),file=a.py,line=3,col=5,endLine=3,endColumn=12::a.py:3:5: FL101 ...

Workflow commands have their own escaping (actions/toolkit, `command.ts`): in the
message `%`, CR and LF become `%25`, `%0D`, `%0A`; in a property value `:` and `,`
also become `%3A` and `%2C`, since they separate the properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fuselint.catalog import Catalog
from fuselint.findings import Finding
from fuselint.report.fingerprint import repo_path
from fuselint.report.gain import saving_suffix
from fuselint.report.traced import note_lines


def escape_data(text: str) -> str:
    # `%` first, or the escapes just written would be escaped again.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, catalog: Catalog, root: Path | None = None) -> str:
    s = finding.span
    path = (repo_path(s.path, root) if root is not None else None) or s.path
    rule = catalog.rules.get(finding.code)
    name = f" ({rule.name})" if rule else ""
    properties = {
        "title": f"fuselint ({finding.code})",
        "file": path,
        "line": s.line,
        "col": s.column,
        "endLine": s.end_line,
        "endColumn": s.end_column,
    }
    head = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    message = "\n".join(
        [
            f"{path}:{s.line}:{s.column}: {finding.code}{name} {finding.message}{saving_suffix(finding.gain)}",
            *note_lines(finding),  # dynamo's facts; GitHub shows an escaped newline as a line break
        ]
    )
    return f"::error {head}::{escape_data(message)}"


def render_github(findings: Sequence[Finding], catalog: Catalog, root: Path | None = None) -> str:
    """One annotation a line. GitHub places `file=` relative to the repository checkout:
    with `root` (the repository root) paths are made relative to it, so annotations land
    even when fuselint runs in a subfolder; without it they are printed as given."""
    return "".join(annotation(f, catalog, root) + "\n" for f in findings)
