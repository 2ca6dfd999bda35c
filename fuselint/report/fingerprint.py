"""Fingerprints: an identity for a finding that survives lines moving around it.

A finding's line number changes whenever someone edits the code above it, so neither
the baseline nor SARIF's `primaryLocationLineHash` may use it. A fingerprint is the
rule code, the repository-relative path, the whitespace-normalized text of the
finding's first line, and which occurrence this is among findings that share all three
in that file (so two identical `x.item()` lines stay two findings, not one).
"""

from __future__ import annotations

import hashlib
import io
import os
import tokenize
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fuselint.findings import Finding


@dataclass(frozen=True, order=True)
class Fingerprint:
    path: str  # repository-relative POSIX path (absolute POSIX when outside the root)
    code: str
    source: str  # the finding's first line, whitespace-normalized
    occurrence: int  # 1-based, in file order, among findings with the same path, code and source

    @property
    def line_hash(self) -> str:
        """`<16 hex digits>:<occurrence>`, the shape GitHub gives its own line hashes."""
        digest = hashlib.sha256(f"{self.code}\0{self.source}".encode()).hexdigest()[:16]
        return f"{digest}:{self.occurrence}"


def normalize(line: str) -> str:
    """Collapse runs of whitespace: re-indenting a block must not make its findings new."""
    return " ".join(line.split())


def repo_path(path: str, root: Path) -> str | None:
    """`path` relative to `root` as a POSIX path, or None when it lies outside `root`."""
    # abspath, not resolve: a symlinked file inside the repository keeps its own path.
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        return None
    return Path(relative).as_posix()


def stable_path(path: str, root: Path) -> str:
    """The path a fingerprint records: repository-relative, else absolute, always POSIX."""
    return repo_path(path, root) or Path(os.path.abspath(path)).as_posix()


def repository_root(start: Path) -> Path:
    """The nearest folder at or above `start` that holds `.git`, else `start` itself.

    Code scanning and annotations resolve paths against the repository checkout, which
    in a monorepo sits above the pyproject.toml that fuselint reads its settings from.
    """
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if (folder / ".git").exists():  # a file, not a folder, in worktrees and submodules
            return folder
    return start


class _LineReader:
    """Reads a file's lines once, decoding as Python does (coding cookie, else UTF-8)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self._files:
            self._files[path] = _read_lines(path)
        lines = self._files[path]
        return lines[number - 1] if 1 <= number <= len(lines) else ""


def _read_lines(path: str) -> list[str]:
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError:
        encoding = "utf-8"
    return raw.decode(encoding, errors="replace").splitlines()


def fingerprints(findings: Sequence[Finding], root: Path) -> list[Fingerprint]:
    """One fingerprint per finding, in the order given.

    Occurrences count in file order (line, then column), whatever order the findings
    come in. The line's text is `Finding.source_line` when the rule recorded it, else
    it is read from the file.
    """
    reader = _LineReader()
    keys = []
    for f in findings:
        text = f.source_line or reader.line(f.span.path, f.span.line)
        keys.append((stable_path(f.span.path, root), f.code, normalize(text)))
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for index in sorted(range(len(findings)), key=lambda i: (findings[i].span.line, findings[i].span.column)):
        groups[keys[index]].append(index)
    occurrence = [0] * len(findings)
    for members in groups.values():
        for n, index in enumerate(members, start=1):
            occurrence[index] = n
    return [Fingerprint(*key, occurrence[i]) for i, key in enumerate(keys)]
