"""The check pipeline: lint, trace and merge, fix and re-lint, the baseline.

`fuselint check` parses its arguments and calls in here; nothing in this module parses
arguments or prints a report.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path

import click

from fuselint.catalog import Catalog
from fuselint.config import Config
from fuselint.findings import Finding
from fuselint.source.lint import lint_text, read_source


def carry_traced(traced: list[Finding], before: dict[str, str], after: dict[str, str]) -> list[Finding]:
    """The traced findings (graph breaks, FL301) of fixed files, moved to their lines in the
    new text. The trace ran on the old text, so a finding on a line the fix rewrote no longer
    describes the code and is dropped; one on an untouched line follows it."""
    by_file = {str(Path(p).resolve()): p for p in after}
    moved: list[Finding] = []
    maps: dict[str, dict[int, int]] = {}
    for f in traced:
        path = by_file.get(str(Path(f.span.path).resolve()))
        if path is None:
            continue
        if path not in maps:
            old, new = before[path].splitlines(), after[path].splitlines()
            blocks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
            maps[path] = {a + k + 1: b + k + 1 for a, b, size in blocks for k in range(size)}
        line_map = maps[path]
        start, end = line_map.get(f.span.line), line_map.get(f.span.end_line)
        if start is None or end is None:
            continue
        span = replace(f.span, line=start, end_line=end)
        moved.append(replace(f, span=span))
    return moved


def fix_files(
    findings: list[Finding], catalog: Catalog, config: Config, *, write: bool, keep=None, lint=None
) -> tuple[int, dict[str, str], list[str], list[str], dict[str, str], dict[str, tuple[Finding, ...]]]:
    """Fix every file that has an allowed fix; returns (fixes applied, new texts, diffs,
    files that could not be written, old texts of the changed files, the findings fixed in
    each). A file that cannot be written is left as it was. `keep`: the fixes to apply (a
    predicate on findings, from a proof), None for all."""
    # libcst costs a quarter of a second to import: only runs that fix pay for it.
    from fuselint.source.fixer import allowed, fix_text, line_length_for, write_atomically
    from fuselint.verify.prove import only_kept

    paths = sorted({f.span.path for f in findings if allowed(f, config.unsafe_fixes)})
    total, changed, diffs, unwritable, before, applied = 0, {}, [], [], {}, {}
    for path in paths:
        text, encoding, error = read_source(Path(path))
        if error is not None:
            continue
        result = fix_text(
            text,
            (lambda t, p=path: only_kept(lint(p, t), keep))
            if lint
            else (lambda t, p=path: only_kept(lint_text(p, t, catalog, config), keep)),
            unsafe=config.unsafe_fixes,
            line_length=line_length_for(Path(path)),
        )
        if result.text == text:
            continue
        if write:
            try:
                write_atomically(Path(path), result.text, encoding)
            except OSError as exc:
                click.echo(f"fuselint: error: {path}: cannot write the fix: {exc.strerror or exc}", err=True)
                unwritable.append(path)
                continue
        total += result.fixed
        changed[path] = result.text
        before[path] = text
        applied[path] = result.applied
        if not write:
            diffs.append(unified_diff(text, result.text, path))
    return total, changed, diffs, unwritable, before, applied


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )
