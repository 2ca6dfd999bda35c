"""Lint files: read, parse with `ast`, run the source checks and the pattern engine.

`lint_text` is pure (text in, findings out); `lint_paths` adds the edges: reading
files, the on-disk cache and the process pool that spreads files over cores.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
import sys
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fuselint import __version__
from fuselint.catalog import Catalog, load_catalog
from fuselint.config import Config
from fuselint.findings import Finding, Span
from fuselint.source.checks import load_checks
from fuselint.source.module import SourceFile, Unreadable, decode
from fuselint.source.scope import model_functions

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.IGNORECASE)
PYTHON_SUFFIXES = (".py", ".pyi")


def _parse_error(path: str, message: str, line: int = 1, column: int = 1) -> Finding:
    return Finding(
        code="FL000",
        message=message,
        span=Span(path, max(line, 1), max(column, 1), max(line, 1), max(column, 1)),
    )


def comments(text: str) -> dict[int, str]:
    """The comment on each line (1-based) that has one; `# noqa` counts only in a comment."""
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError):
        # The file parsed with `ast`, so this is rare; fall back to reading whole lines.
        return {i: line for i, line in enumerate(text.splitlines(), start=1) if "#" in line}
    return found


def suppressed(finding: Finding, lines: list[str] | dict[int, str]) -> bool:
    """`# noqa` or `# noqa: FL101,FL2` on the finding's first line.

    `lines` is the file's lines, or better its `comments()`, so that a string holding
    "# noqa" does not silence the line it is on.
    """
    if isinstance(lines, dict):
        text = lines.get(finding.span.line, "")
    else:
        index = finding.span.line - 1
        text = lines[index] if 0 <= index < len(lines) else ""
    match = _NOQA.search(text)
    if not match:
        return False
    codes = match.group("codes")
    if not codes:
        return True
    return any(finding.code.startswith(c.upper()) for c in re.split(r"[\s,]+", codes.strip()) if c)


def without_suppressed(findings: Iterable[Finding]) -> list[Finding]:
    """Findings made elsewhere (a trace) less those a `# noqa` comment on their line silences;
    reads each file once, and keeps a finding whose file cannot be read."""
    notes: dict[str, dict[int, str]] = {}
    kept = []
    for f in findings:
        if f.span.path not in notes:
            text, _encoding, error = read_source(Path(f.span.path))
            notes[f.span.path] = comments(text) if error is None and "noqa" in text.lower() else {}
        if not suppressed(f, notes[f.span.path]):
            kept.append(f)
    return kept


def lint_text(path: str, text: str, catalog: Catalog, config: Config) -> list[Finding]:
    """All enabled findings for one file's text, noqa applied, sorted."""
    try:
        sf = SourceFile.parse(path, text)
    except RecursionError:
        message = "file does not parse: an expression is nested too deeply"
        return [_parse_error(path, message)] if config.enabled("FL000", path) else []
    except SyntaxError as exc:
        finding = _parse_error(path, f"file does not parse: {exc.msg}", exc.lineno or 1, exc.offset or 1)
        return [finding] if config.enabled("FL000", path) else []
    except ValueError as exc:  # e.g. source code string cannot contain null bytes
        return [_parse_error(path, f"file does not parse: {exc}")] if config.enabled("FL000", path) else []
    return _check(sf, catalog, config)


def _check(sf: SourceFile, catalog: Catalog, config: Config) -> list[Finding]:
    enabled = [r for r in catalog if config.enabled(r.code, sf.path)]
    if not enabled or not sf.imports.imports_torch():
        return []
    functions = model_functions(sf.tree, sf.imports, sf.text)
    checks = load_checks()
    findings: list[Finding] = []
    # A visitor can recurse past Python's limit on code that CPython still compiles (a sum of
    # hundreds of terms); that file is reported as not fully checked, and the run goes on.
    skipped: list[str] = []
    for rule in enabled:
        if rule.kind == "source" and rule.code in checks:
            try:
                findings.extend(checks[rule.code](sf, functions, rule))
            except RecursionError:
                skipped.append(rule.code)
    patterns = [r for r in enabled if r.kind == "pattern"]
    if patterns:
        from fuselint.source.patterns import pattern_findings

        try:
            findings.extend(pattern_findings(sf, patterns))
        except RecursionError:
            skipped.extend(r.code for r in patterns)
    if skipped and config.enabled("FL000", sf.path):
        codes = _code_range(skipped)
        findings.append(
            _parse_error(sf.path, f"file not fully checked: an expression is nested too deeply for {codes}")
        )
    if any(_NOQA.search(sf.line_text(f.span.line)) for f in findings):
        notes = comments(sf.text)
        findings = [f for f in findings if not suppressed(f, notes)]
    unique = {(f.code, f.span): f for f in findings}
    return sorted(unique.values(), key=lambda f: f.sort_key)


def _code_range(codes: list[str]) -> str:
    """["FL201", "FL202", ..., "FL221"] -> "FL201..FL221": a message that stays short."""
    ordered = sorted(set(codes))
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}..{ordered[-1]}"


def read_source(path: Path) -> tuple[str | None, str, Finding | None]:
    """(text, encoding, None) or (None, "", FL000 finding) for unreadable files."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, "", _parse_error(str(path), f"cannot read file: {exc.strerror or exc}")
    try:
        text, encoding = decode(raw)
    except Unreadable as exc:
        return None, "", _parse_error(str(path), f"file is not valid text in its encoding: {exc}")
    return text, encoding, None


class LintCrash(Exception):
    """A bug in a rule, with the file it met it in: the user can report it, or exclude the file."""


def lint_file(path: Path, catalog: Catalog, config: Config) -> list[Finding]:
    text, _encoding, error = read_source(path)
    if error is not None:
        return [error] if config.enabled("FL000", str(path)) else []
    try:
        return lint_text(str(path), text, catalog, config)
    except Exception as exc:
        # Without the path, "internal error: KeyError" in a run over 3000 files helps nobody.
        raise LintCrash(f"{path}: {type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------- discovery


class PathError(Exception):
    """A path the user named that does not exist."""


def discover(paths: Iterable[str], config: Config) -> list[Path]:
    """Python files under `paths`, skipping excluded folders.

    A file named explicitly is kept even when excluded (as ruff does), unless
    `config.force_exclude`: pre-commit names every staged file, and the project's
    excludes must still hold there.
    """
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise PathError(f"{name}: no such file or directory")
        if path.is_file():
            if not (config.force_exclude and _excluded_anywhere(path, config)):
                found.append(path)
            continue
        for root, dirs, files in os.walk(path):
            root_path = Path(root)
            # A virtualenv is known by its pyvenv.cfg whatever its name; a folder merely named
            # `env` (an RL project's environments) is the user's code.
            dirs[:] = sorted(
                d
                for d in dirs
                if not config.excluded(root_path / d) and not (root_path / d / "pyvenv.cfg").exists()
            )
            for file in sorted(files):
                candidate = root_path / file
                # Not a FIFO or socket named *.py: reading one would block forever.
                if file.endswith(PYTHON_SUFFIXES) and not config.excluded(candidate) and _regular(candidate):
                    found.append(candidate)
    # `m.py` and `/abs/m.py` are one file: checked (and fixed) once, under the first spelling.
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _regular(path: Path) -> bool:
    """A regular file, or a link to one; a dangling link is kept, to be reported unreadable."""
    return path.is_file() or (path.is_symlink() and not path.exists())


def _excluded_anywhere(path: Path, config: Config) -> bool:
    """The file or any folder above it (up to the project root) matches an exclude."""
    if config.excluded(path):
        return True
    root = config.root.resolve()
    for folder in path.resolve().parents:
        if folder == root or root not in folder.parents:
            break
        if config.excluded(folder):
            return True
    return False


# ---------------------------------------------------------------- cache and pool


@dataclass(frozen=True)
class Cache:
    """Findings per file, keyed by a digest of its bytes; one pickle per fuselint build and settings.

    Not by (mtime, size): `cp -p`, `tar` and `rsync -t` restore an mtime, and an edit within
    one timestamp tick keeps it, so a stale entry would hide a new finding. Hashing a file
    costs microseconds next to parsing it, and a digest also survives a fresh checkout (CI).
    """

    path: Path

    @classmethod
    def for_settings(cls, root: Path, catalog: Catalog, config: Config) -> Cache:
        digest = hashlib.sha256()
        digest.update(__version__.encode())
        digest.update(_code_stamp().encode())
        for rule in catalog:
            digest.update(Path(rule.path).read_bytes() if rule.path else rule.code.encode())
        digest.update(repr((config.select, config.ignore, config.per_file_ignores)).encode())
        digest.update(sys.version.encode())
        return cls(root / ".fuselint_cache" / f"{__version__}-{digest.hexdigest()[:16]}.pickle")

    def load(self) -> dict[str, tuple[bytes, list[Finding]]]:
        try:
            with self.path.open("rb") as fh:
                return pickle.load(fh)
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError):
            return {}

    def save(self, entries: dict[str, tuple[bytes, list[Finding]]]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            ignore = self.path.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as fh:
                pickle.dump(entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written only costs speed


def _code_stamp() -> str:
    """Size and mtime of fuselint's own modules: a checkout that changes the rules' code
    without bumping the version must not be answered from the old code's cache."""
    package = Path(__file__).resolve().parent.parent
    stamps = []
    for module in sorted(package.rglob("*.py")):
        try:
            st = module.stat()
        except OSError:
            continue
        stamps.append(f"{module.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(stamps)


def _content_key(path: Path) -> bytes | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
    except OSError:
        return None


_WORKER_STATE: tuple[Catalog, Config] | None = None


def _init_worker(extra_rules: tuple[str, ...], config: Config) -> None:
    global _WORKER_STATE
    _WORKER_STATE = (load_catalog(extra_rules), config)


def _lint_batch(paths: list[str]) -> list[tuple[str, list[Finding]]]:
    assert _WORKER_STATE is not None
    catalog, config = _WORKER_STATE
    return [(p, lint_file(Path(p), catalog, config)) for p in paths]


def lint_paths(
    files: list[Path],
    catalog: Catalog,
    config: Config,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
) -> list[Finding]:
    """Findings for every file: from the cache when unchanged, else computed, in parallel."""
    entries = cache.load() if cache else {}
    results: dict[str, list[Finding]] = {}
    todo: list[str] = []
    keys: dict[str, bytes | None] = {}
    for path in files:
        name = str(path)
        keys[name] = _content_key(path) if cache else None
        hit = entries.get(name)
        if hit is not None and keys[name] is not None and hit[0] == keys[name]:
            results[name] = hit[1]
        else:
            todo.append(name)
    jobs = jobs or os.cpu_count() or 1
    if len(todo) >= 16 and jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        batches = [todo[i :: jobs * 4] for i in range(jobs * 4)]
        with ProcessPoolExecutor(
            jobs, initializer=_init_worker, initargs=(config.extra_rules, config)
        ) as pool:
            for batch in pool.map(_lint_batch, [b for b in batches if b]):
                results.update(batch)
    else:
        for name in todo:
            results[name] = lint_file(Path(name), catalog, config)
    if cache is not None and todo:
        for name in todo:
            if keys[name] is not None:
                entries[name] = (keys[name], results[name])
        cache.save(entries)
    return sorted((f for name in results for f in results[name]), key=lambda f: f.sort_key)
