"""Lint files: read, parse with `ast`, run the source checks and the pattern engine.

`lint_text` is pure (text in, findings out); `lint_tree` adds the edges: reading
files, the on-disk cache, the process pool that spreads files over cores, and the rounds of
whole-program reach (`fuselint.source.reach`) that carry entries' calls into other files of the
tree until nothing changes. A finding in a function that only another file's entry reaches says
so: "(reached from pkg/m.py:Model.forward → helper)".
"""

from __future__ import annotations

import ast
import gc
import hashlib
import os
import pickle
import re
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from fuselint import __version__
from fuselint.catalog import Catalog, load_catalog
from fuselint.config import Config
from fuselint.findings import Applicability, Edit, Finding, Fix, Span
from fuselint.source.aliases import imported_aliases
from fuselint.source.checks import load_checks
from fuselint.source.guards import dead_lines
from fuselint.source.module import SourceFile, Unreadable, comment_tokens, decode
from fuselint.source.nodes import Memo, made_once, new_memo, remembered_walks
from fuselint.source.paths import PATH_KEY, off_path, path_note
from fuselint.source.reach import (
    Call,
    FileSummary,
    Index,
    inherited_modules,
    module_name,
    outgoing_calls,
    reach_roots,
    reached_note,
    summarize,
)
from fuselint.source.scope import ModelFunction, Reached, innermost_function, model_functions
from fuselint.source.scripted import scripted_lines, without_scripted_fixes
from fuselint.source.sites import in_site, site_codes
from fuselint.source.unresumable import CODE as UNRESUMABLE
from fuselint.source.unresumable import BrokenPath, FreshCall, broken_paths, fresh_calls, unresumable

# A bare noqa silences every rule; "noqa: FL101, FL2" those codes or prefixes. A code is letters
# then digits, as ruff reads them, so words after the list ("noqa: FL101 reason") are not codes;
# a colon followed by no code at all is an invalid directive and silences nothing.
_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Z]+[0-9]+)*)|(?P<invalid>:)|\b)",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
PYTHON_SUFFIXES = (".py", ".pyi")


def _parse_error(path: str, message: str, line: int = 1, column: int = 1) -> Finding:
    return Finding(
        code="FL000",
        message=message,
        span=Span(path, max(line, 1), max(column, 1), max(line, 1), max(column, 1)),
    )


@dataclass(frozen=True)
class NoqaMap:
    """Where a file's `# noqa` comments are, and which line's comment covers each line.

    A line inside a multi-line string, or continued with a backslash, cannot end in a comment:
    its findings are silenced by the comment on the line that ends the string or statement,
    as ruff maps them. `carriers` holds only those lines; every other line carries its own.
    """

    comments: dict[int, tuple[int, str]]  # line -> (0-based column of "#", the comment)
    carriers: dict[int, int]

    def carrier(self, line: int) -> int:
        return self.carriers.get(line, line)

    def comment(self, line: int) -> str:
        found = self.comments.get(line)
        return found[1] if found else ""


def noqa_map(text: str) -> NoqaMap:
    """The comments of `text` (a "# noqa" inside a string is not one) and the carrier lines."""
    found = comment_tokens(text)
    if found is None:
        # The file parsed with `ast`, so this is rare; fall back to reading whole lines.
        lines = text.splitlines()
        return NoqaMap(
            {i: (line.index("#"), line[line.index("#") :]) for i, line in enumerate(lines, 1) if "#" in line},
            {},
        )
    comments, ends = found
    carriers: dict[int, int] = {}
    last = max(ends, default=0)
    nearest = None
    for line in range(last, 0, -1):
        if line in ends:
            nearest = line
        elif nearest is not None:
            carriers[line] = nearest
    return NoqaMap(comments, carriers)


def _directive(comment: str) -> re.Match | None:
    """The first valid noqa directive in a comment (an invalid one does not hide a later one)."""
    return next((m for m in _NOQA.finditer(comment) if not m.group("invalid")), None)


def noqa_codes(comment: str) -> tuple[str, ...] | None:
    """None when `comment` holds no valid noqa directive; () for a bare `# noqa`; else its codes."""
    match = _directive(comment)
    if match is None:
        return None
    codes = match.group("codes")
    return tuple(c.upper() for c in _CODE.findall(codes)) if codes else ()


_MENTIONS_NOQA = re.compile("noqa", re.IGNORECASE)


def _mentions_noqa(text: str) -> bool:
    # Tokenizing costs about as much as parsing: only files that mention noqa pay for it.
    return _MENTIONS_NOQA.search(text) is not None


# ---------------------------------------------------------------- unused and added noqa

UNUSED_NOQA = "FL001"
# Line breaks that str.splitlines() honours and the tokenizer does not: where one occurs, line
# numbers could disagree between the finder and the splicer, so no edit is offered.
_ODD_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]|\r(?!\n)")


def unused_noqa(
    path: str, text: str, notes: NoqaMap, findings: list[Finding], catalog: Catalog, config: Config
) -> list[Finding]:
    """FL001 for every fuselint code (`FL...`) in a `# noqa` that silences nothing on its line.

    A bare `# noqa` and other tools' codes (`E501`) are shared with those tools, which alone know
    whether they are used; codes of traced (graph) rules cannot be judged without a trace. The
    safe fix removes the unused codes, or the directive when none is left.
    """
    used: dict[int, set[str]] = {}
    for f in findings:
        for line in _noqa_lines(f):
            used.setdefault(notes.carrier(line), set()).add(f.code)
    lines = text.split("\n")
    fixable = _ODD_BREAKS.search(text) is None
    out: list[Finding] = []
    for line, (column, comment) in sorted(notes.comments.items()):
        match = _directive(comment)
        if match is None or not match.group("codes"):
            continue
        codes = [c.upper() for c in _CODE.findall(match.group("codes"))]
        verdicts = [(c, _noqa_verdict(c, used.get(line, set()), path, catalog, config)) for c in codes]
        unused = [(c, v) for c, v in verdicts if v]
        if not unused:
            continue
        kept = [c for c, v in verdicts if not v]
        line_text = lines[line - 1].rstrip("\r")
        start, end = column + match.start(), column + match.end()
        fix = _noqa_removal(line, line_text, column, comment, match, kept) if fixable else None
        out.append(
            Finding(
                code=UNUSED_NOQA,
                message=f"Unused `noqa` directive ({_reasons(unused)})",
                span=Span(path, line, start + 1, line, end + 1),
                fix=fix,
                source_line=line_text.strip(),
            )
        )
    return out


def _noqa_verdict(code: str, used: set[str], path: str, catalog: Catalog, config: Config) -> str:
    """Why a noqa code is unused ("unknown", "non-enabled", "unused"), or "" when it is not."""
    if not code.startswith("FL") or code == UNUSED_NOQA:
        return ""
    rules = [r for r in catalog if r.code.startswith(code)]
    if not rules:
        return "unknown"
    if any(r.kind == "graph" for r in rules):
        return ""
    if not any(config.enabled(r.code, path) for r in rules):
        return "non-enabled"
    return "" if any(c.startswith(code) for c in used) else "unused"


def _reasons(unused: list[tuple[str, str]]) -> str:
    groups: dict[str, list[str]] = {}
    for code, reason in unused:
        groups.setdefault(reason, []).append(f"`{code}`")
    return "; ".join(f"{reason}: {', '.join(codes)}" for reason, codes in groups.items())


def _noqa_removal(
    line: int, line_text: str, column: int, comment: str, match: re.Match, kept: list[str]
) -> Fix:
    if kept:
        new = comment[: match.start("codes")] + ", ".join(kept) + comment[match.end("codes") :]
        edit = Edit(line, column + 1, line, column + len(comment) + 1, new)
        return Fix(Applicability.SAFE, "Remove the unused codes from the `noqa` directive", (edit,))
    before, after = comment[: match.start()].rstrip(), comment[match.end() :].strip()
    if after and not after.startswith("#"):
        after = f"# {after}"  # words after the codes explain the directive: keep them a comment
    new = f"{before}  {after}" if before and after else before or after
    if new:
        edit = Edit(line, column + 1, line, column + len(comment) + 1, new)
    else:
        # The whole comment goes, with the spaces that separated it from the code.
        code_end = len(line_text[:column].rstrip())
        edit = Edit(line, code_end + 1, line, column + len(comment) + 1, "")
    return Fix(Applicability.SAFE, "Remove the unused `noqa` directive", (edit,))


_LONE_CR = re.compile("\r(?!\n)")


def ambiguous_lines(text: str) -> bool:
    """A lone carriage return ends a line for Python but not for a split on newlines: such a
    file's line numbers cannot be trusted for an edit by line, so `with_noqa` leaves it alone."""
    return _LONE_CR.search(text) is not None


def with_noqa(text: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """`text` with `# noqa: CODE` on the line that carries each finding, and the number of
    lines that gained a code. An existing directive is extended; another comment keeps its
    words and gets the directive after them."""
    if ambiguous_lines(text):
        return text, 0
    notes = noqa_map(text)
    wanted: dict[int, set[str]] = {}
    for f in findings:
        # FL000: the file does not parse; FL001: the fix is to remove the code, not to add one.
        if f.code not in ("FL000", UNUSED_NOQA):
            wanted.setdefault(notes.carrier(f.span.line), set()).add(f.code)
    lines = text.split("\n")
    added = 0
    for line, codes in sorted(wanted.items()):
        if not 1 <= line <= len(lines):
            continue
        column, comment = notes.comments.get(line, (0, ""))
        match = _directive(comment)
        body = lines[line - 1]
        ending = "\r" if body.endswith("\r") else ""
        body = body[: len(body) - len(ending)]
        if match is not None and not match.group("codes"):
            continue  # a bare noqa already silences every rule
        if match is not None:
            have = [c.upper() for c in _CODE.findall(match.group("codes"))]
            new = sorted(c for c in codes if not any(c.startswith(h) for h in have))
            if not new:
                continue
            start, end = column + match.start("codes"), column + match.end("codes")
            body = body[:start] + ", ".join(have + new) + body[end:]
        else:
            body = body.rstrip(" \t") + "  # noqa: " + ", ".join(sorted(codes))
        lines[line - 1] = body + ending
        added += 1
    return "\n".join(lines), added


def suppressed(
    finding: Finding, lines: list[str] | dict[int, str] | NoqaMap, codes: Iterable[str] | None = None
) -> bool:
    """`# noqa` or `# noqa: FL101,FL2` on the line that carries the finding's first line;
    `codes`: the codes any of which silences it (its own code when None).

    `lines` is best the file's `noqa_map()`, so that a string holding "# noqa" does not silence
    the line it is on and a finding inside a multi-line string is silenced where it ends; the
    file's lines are also accepted (the line itself then carries).
    """
    return any(_silences(_comment(line, lines), finding, codes) for line in _noqa_lines(finding))


def _noqa_lines(finding: Finding) -> tuple[int, ...]:
    return (finding.span.line, *finding.noqa_lines)


def _comment(line: int, lines: list[str] | dict[int, str] | NoqaMap) -> str:
    if isinstance(lines, NoqaMap):
        return lines.comment(lines.carrier(line))
    if isinstance(lines, dict):
        return lines.get(line, "")
    return lines[line - 1] if 0 <= line - 1 < len(lines) else ""


def _silences(text: str, finding: Finding, codes: Iterable[str] | None) -> bool:
    named = noqa_codes(text)
    if named is None:
        return False
    return not named or any(code.startswith(c) for code in codes or (finding.code,) for c in named)


def without_suppressed(findings: Iterable[Finding]) -> list[Finding]:
    """Findings made elsewhere (a trace) less those a `# noqa` comment on their line silences;
    reads each file once, and keeps a finding whose file cannot be read."""
    notes: dict[str, dict[int, str]] = {}
    kept = []
    for f in findings:
        if f.span.path not in notes:
            text, _encoding, error = read_source(Path(f.span.path))
            notes[f.span.path] = noqa_map(text) if error is None and _mentions_noqa(text) else {}
        if not suppressed(f, notes[f.span.path]):
            kept.append(f)
    return kept


@dataclass(frozen=True)
class FileResult:
    """One file's findings, and what whole-program reach needs from it: its summary, the calls
    its in-scope functions make into other files, and the roots it was analysed with."""

    findings: tuple[Finding, ...]
    summary: FileSummary | None = None
    calls: tuple[Call, ...] = ()
    reached: tuple[Reached, ...] = ()
    # Functions this file's own entries reach: a root naming one of them changes nothing.
    local: frozenset[str] = frozenset()
    # What the pattern rules found before reach notes and noqa, and the codes they could not
    # finish. Roots do not change it: a file linted again for new roots in the same run reuses it.
    patterns: PatternResult | None = None
    # Method calls on objects the caller builds, and the paths to this file's breaks: joined over
    # the tree (`unresumable`), a call whose method reaches a break is a site of its own.
    fresh: tuple[FreshCall, ...] = ()
    broken: tuple[BrokenPath, ...] = ()


PatternResult = tuple[tuple[Finding, ...], tuple[str, ...]]


# How many files were parsed in this process: tests check that a warm run parses none.
PARSED = {"files": 0}


def lint_text(
    path: str, text: str, catalog: Catalog, config: Config, reached: tuple[Reached, ...] = ()
) -> list[Finding]:
    """All enabled findings for one file's text, noqa applied, sorted. `reached` holds the
    functions that entries of other files call (see `lint_tree`)."""
    return list(lint_unit(path, text, catalog, config, reached).findings)


def lint_unit(
    path: str,
    text: str,
    catalog: Catalog,
    config: Config,
    reached: tuple[Reached, ...] = (),
    patterns: PatternResult | None = None,
    summary: FileSummary | None = None,
) -> FileResult:
    """`lint_text`, with the file's summary and outgoing calls for whole-program reach.
    `patterns` and `summary`: the pattern rules' result and the summary of this same text, when
    an earlier round has them (roots change neither)."""
    # One file's analysis allocates millions of objects that die by reference count, and the
    # cyclic collector would scan them over and over (8-13% of a cold lint's CPU on
    # transformers/models); it runs after the file instead, for the cycles the file left.
    kept = _KEPT.get(path, text) if _KEPT is not None else None
    memo = kept[1] if kept is not None else new_memo()
    with collector_paused(), remembered_walks(memo):
        parsed = kept[0] if kept is not None else _parse(path, text, config)
        if isinstance(parsed, FileResult):
            return parsed
        summary = (
            summary if summary is not None else summarize(parsed.tree, *module_name(path), parsed.imports)
        )
        found = _check(parsed, catalog, config, reached, summary, patterns)
        if _KEPT is not None and _KEPT.put(path, text, parsed, memo):
            # What a kept file's analysis built stays until the worker ends: the collector need
            # never scan it (nor the few cycles the analysis left beside it). Frozen before the
            # collector runs again, which would otherwise walk all of it once.
            gc.freeze()
    findings, calls, local, patterns, joins = found
    return FileResult(tuple(findings), summary, calls, reached, local, patterns, *joins)


class _KeptFiles:
    """Parsed files and what their analysis remembered (`nodes.remembered_walks`), kept by a
    pool worker across the rounds of one run, up to `room` characters of source.

    A file linted again for new roots is then neither parsed nor walked again; and a kept
    file's tree and memos are never torn down (a worker ends without freeing them), which cost
    ~5% of a cold lint of transformers/models. That tree (45 M characters) kept whole in one
    process takes ~2 GB.
    """

    def __init__(self, room: int):
        self.room = room
        self.files: dict[str, tuple[str, SourceFile, Memo]] = {}

    def get(self, path: str, text: str) -> tuple[SourceFile, Memo] | None:
        found = self.files.get(path)
        if found is None or found[0] != text:
            return None
        return found[1], found[2]

    def put(self, path: str, text: str, sf: SourceFile, memo: Memo) -> bool:
        """Keep `sf` and its memo; False when there is no room left (then nothing is kept)."""
        if path not in self.files:
            if len(text) > self.room:
                return False
            self.room -= len(text)
        # The flows hang on this round's roots (`dataflow.flows` keys them by the functions'
        # list): a later round makes its own.
        memo[0].pop(("flows", None), None)
        self.files[path] = (text, sf, memo)
        return True


# Set in a pool worker (`_init_worker`): the files it keeps across rounds.
_KEPT: _KeptFiles | None = None
# Characters of source that a run's workers keep in all (shared out among them).
KEPT_CHARS = 48_000_000


@contextmanager
def collector_paused():
    """The cyclic garbage collector off inside (as the caller had it after): for work that
    builds many objects and leaves few cycles, such as one file's analysis or unpickling."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextmanager
def heap_frozen():
    """The objects alive on entry out of the cyclic collector's reach inside (`gc.freeze`): work
    that allocates much beside a large heap it does not free (fixing file after file next to a
    whole tree's lint results) would otherwise pay for full collections that walk that heap."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _parse(path: str, text: str, config: Config) -> SourceFile | FileResult:
    """The parsed file, or the result of a file that does not parse."""
    PARSED["files"] += 1
    try:
        return SourceFile.parse(path, text)
    except RecursionError:
        message = "file does not parse: an expression is nested too deeply"
        return FileResult(tuple([_parse_error(path, message)] if config.enabled("FL000", path) else []))
    except SyntaxError as exc:
        finding = _parse_error(path, f"file does not parse: {exc.msg}", exc.lineno or 1, exc.offset or 1)
        return FileResult((finding,) if config.enabled("FL000", path) else ())
    except ValueError as exc:  # e.g. source code string cannot contain null bytes
        return FileResult(
            (_parse_error(path, f"file does not parse: {exc}"),) if config.enabled("FL000", path) else ()
        )


def _check(
    sf: SourceFile,
    catalog: Catalog,
    config: Config,
    reached: tuple[Reached, ...],
    summary: FileSummary,
    patterns: PatternResult | None,
) -> tuple[list[Finding], tuple[Call, ...], frozenset[str], PatternResult | None, tuple]:
    enabled = [r for r in catalog if config.enabled(r.code, sf.path)]
    if not enabled:
        return [], (), frozenset(), None, ()
    findings: list[Finding] = []
    calls: tuple[Call, ...] = ()
    local: frozenset[str] = frozenset()
    functions: list[ModelFunction] = []
    if sf.imports.imports_torch() or reached:
        findings, calls, local, patterns, functions = _rule_findings(
            sf, enabled, config, reached, summary, patterns
        )
        if findings and "jit" in sf.text:  # no fix in code TorchScript compiles (`scripted`)
            spans = scripted_lines(sf.tree, sf.imports)
            if spans:
                findings = without_scripted_fixes(findings, spans)
        if config.extend_safe_fixes or config.extend_unsafe_fixes:
            findings = [_settled_safety(f, config) for f in findings]
    else:
        patterns = None
    judge_noqa = config.enabled(UNUSED_NOQA, sf.path)
    if (findings or judge_noqa) and _mentions_noqa(sf.text):
        notes = made_once("noqa map", sf.tree, lambda _tree: noqa_map(sf.text))  # kept for a later round
        if judge_noqa:
            findings.extend(unused_noqa(sf.path, sf.text, notes, findings, catalog, config))
        # One site, one finding (`sites`): a noqa of any break rule on the line silences them all.
        codes = site_codes(findings)
        findings = [
            f
            for f in findings
            if not suppressed(f, notes, codes.get((f.span.path, f.span.line)) if in_site(f) else None)
        ]
    unique = {(f.code, f.span): f for f in findings}
    joins = ()
    if functions:
        fresh: tuple[FreshCall, ...] = ()
        if config.enabled(UNRESUMABLE, sf.path):
            from fuselint.source.dataflow import flows

            try:  # the flows `_rule_findings` made for this file's reach (`flows` keeps them)
                fresh = fresh_calls(sf, flows(functions, sf.imports), summary)
            except RecursionError:
                fresh = ()
        joins = (fresh, broken_paths(sf.path, unique.values(), functions))
    return sorted(unique.values(), key=lambda f: f.sort_key), calls, local, patterns, joins


def _settled_safety(finding: Finding, config: Config) -> Finding:
    """`finding` with its fix's safety as `extend-safe-fixes` / `extend-unsafe-fixes` say."""
    fix = finding.fix
    if fix is None:
        return finding
    safe = config.fix_safety(finding.code, fix.applicability is Applicability.SAFE)
    wanted = Applicability.SAFE if safe else Applicability.UNSAFE
    if wanted is fix.applicability:
        return finding
    return replace(finding, fix=replace(fix, applicability=wanted))


def _rule_findings(
    sf: SourceFile,
    enabled: list,
    config: Config,
    reached: tuple[Reached, ...],
    summary: FileSummary,
    patterns: PatternResult | None,
) -> tuple[list[Finding], tuple[Call, ...], frozenset[str], PatternResult, list[ModelFunction]]:
    functions = model_functions(
        sf.tree, sf.imports, sf.text, config.traced_functions, reached, summary.qualify
    )
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
    if patterns is None:
        patterns = _pattern_result(sf, [r for r in enabled if r.kind == "pattern"])
    findings.extend(patterns[0])
    skipped.extend(patterns[1])
    if skipped and config.enabled("FL000", sf.path):
        codes = _code_range(skipped)
        findings.append(
            _parse_error(sf.path, f"file not fully checked: an expression is nested too deeply for {codes}")
        )
    calls: tuple[Call, ...] = ()
    if functions:
        from fuselint.source.dataflow import flows
        from fuselint.source.sized_calls import file_sized

        try:
            found = flows(functions, sf.imports)
            calls = outgoing_calls(sf.path, found, summary, file_sized(sf, found).arguments)
        except RecursionError:
            calls = ()
    local = frozenset(m.chain[-1] for m in functions if m.via is None and m.chain)
    return (
        _with_reach_notes(_outside_dead_branches(findings, functions), functions),
        calls,
        local,
        patterns,
        functions,
    )


def _outside_dead_branches(findings: list[Finding], functions: list[ModelFunction]) -> list[Finding]:
    """Drop findings in a method's leading checks that every in-scope caller's guard makes false
    (`if self.merged: self.unmerge()` never runs unmerge's `if not self.merged:` branch)."""
    dead = {id(f.node): dead_lines(f.node, f.facts) for f in functions if f.facts}
    if not any(dead.values()):
        return findings
    kept = []
    for finding in findings:
        inner = innermost_function(functions, finding.span.line)
        ranges = dead.get(id(inner.node), ()) if inner is not None else ()
        if not any(start <= finding.span.line <= end for start, end in ranges):
            kept.append(finding)
    return kept


def _pattern_result(sf: SourceFile, rules: list) -> PatternResult:
    if not rules:
        return (), ()
    from fuselint.source.patterns import pattern_findings

    try:
        return tuple(pattern_findings(sf, rules)), ()
    except RecursionError:
        return (), tuple(r.code for r in rules)


def _with_reach_notes(findings: list[Finding], functions: list[ModelFunction]) -> list[Finding]:
    """A finding inside a function that only another file's entry reaches names the path."""
    reached = [f for f in functions if f.via is not None or f.side is not None]
    if not reached:
        return findings
    out = []
    for finding in findings:
        inner = innermost_function(functions, finding.span.line)
        if inner is not None and inner.via is None and inner.side is not None and off_path(finding) is None:
            # a same-file callee that only a side road reaches (a warmed memo method's body)
            message = f"{finding.message} ({path_note(inner.side)})"
            finding = replace(finding, message=message, details=(*finding.details, (PATH_KEY, inner.side)))
        elif inner is not None and inner.via is not None:
            message = finding.message
            if inner.side is not None and off_path(finding) is None:
                # Every call from other files that reaches it sits on a deprecation/misuse path.
                message = f"{message} ({path_note(inner.side)})"
                finding = replace(finding, details=(*finding.details, (PATH_KEY, inner.side)))
            finding = replace(finding, message=f"{message} ({reached_note(inner.chain)})")
        out.append(finding)
    return out


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
    return decode_source(str(path), raw)


def decode_source(path: str, raw: bytes) -> tuple[str | None, str, Finding | None]:
    """`read_source` for bytes read elsewhere (stdin), reported under `path`."""
    try:
        text, encoding = decode(raw)
    except Unreadable as exc:
        return None, "", _parse_error(path, f"file is not valid text in its encoding: {exc}")
    return text, encoding, None


class LintCrash(Exception):
    """A bug in a rule, with the file it met it in: the user can report it, or exclude the file."""


def lint_file(
    path: Path,
    catalog: Catalog,
    config: Config,
    reached: tuple[Reached, ...] = (),
    patterns: PatternResult | None = None,
    summary: FileSummary | None = None,
) -> FileResult:
    text, _encoding, error = read_source(path)
    if error is not None:
        return FileResult((error,) if config.enabled("FL000", str(path)) else (), reached=reached)
    try:
        return lint_unit(str(path), text, catalog, config, reached, patterns, summary)
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
            if not (config.force_exclude and excluded_anywhere(path, config)):
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


def excluded_anywhere(path: Path, config: Config) -> bool:
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


# The cache file's layout (a dict of `CacheEntry`); part of its name, so that a build reading
# another layout never finds that file.
CACHE_FORMAT = "entries-4"


@dataclass
class CacheEntry:
    """One file's cached result: the digest of the bytes it was linted from, the files its calls
    reach, its summary, and the rest of its result as a pickle, unpickled when first read.

    A run reads every file's summary (reach resolves names through them) but the findings and
    calls only of the files it names and of their callers: a pre-commit run on transformers'
    modeling_llama.py reads 47 of 2,544 results. The summaries are pickled together, apart from
    the entries (`CacheEntries`)."""

    digest: bytes
    targets: frozenset[str]
    summary: FileSummary | None
    rest: bytes = field(repr=False)  # the pickled FileResult without its summary

    @classmethod
    def of(cls, digest: bytes, result: FileResult, targets: frozenset[str]) -> CacheEntry:
        rest = pickle.dumps(replace(result, summary=None), protocol=pickle.HIGHEST_PROTOCOL)
        return cls(digest, targets, result.summary, rest)

    @cached_property
    def result(self) -> FileResult:
        return replace(pickle.loads(self.rest), summary=self.summary)

    def __getstate__(self) -> tuple:
        return self.digest, self.targets, self.rest

    def __setstate__(self, state: tuple) -> None:
        self.digest, self.targets, self.rest = state
        self.summary = None  # `Cache.load` sets it from the summaries' pickle


class CacheEntries(dict):
    """name -> CacheEntry as a cache was read, with its summaries and their pickle: a save whose
    summaries are all equal to these writes that pickle again instead of pickling them anew (an
    edit inside a function changes no summary; pickling all of transformers/models' took most of
    a one-file run's save)."""

    read: tuple[dict[str, FileSummary | None], bytes] = ({}, b"")


@dataclass(frozen=True)
class Cache:
    """Results per file (findings, and the summary and calls that whole-program reach needs),
    keyed by a digest of its bytes; one pickle per fuselint build and settings.

    Not by (mtime, size): `cp -p`, `tar` and `rsync -t` restore an mtime, and an edit within
    one timestamp tick keeps it, so a stale entry would hide a new finding. Hashing a file
    costs microseconds next to parsing it, and a digest also survives a fresh checkout (CI).
    """

    path: Path

    @classmethod
    def for_settings(cls, root: Path, catalog: Catalog, config: Config) -> Cache:
        digest = hashlib.sha256()
        digest.update(__version__.encode())
        digest.update(CACHE_FORMAT.encode())
        digest.update(_code_stamp().encode())
        for rule in catalog:
            digest.update(Path(rule.path).read_bytes() if rule.path else rule.code.encode())
        digest.update(
            repr(
                (
                    config.select,
                    config.ignore,
                    config.per_file_ignores,
                    config.traced_functions,
                    config.extend_safe_fixes,
                    config.extend_unsafe_fixes,
                )
            ).encode()
        )
        digest.update(sys.version.encode())
        return cls(root / ".fuselint_cache" / f"{__version__}-{digest.hexdigest()[:16]}.pickle")

    def load(self) -> CacheEntries:
        try:
            # Unpickling the tree's results (megabytes of small objects) runs 3-4 times faster
            # without the collector scanning them as they are made.
            with self.path.open("rb") as fh, collector_paused():
                raw, entries = pickle.load(fh)
                summaries = pickle.loads(raw)
                # They live until the run ends: the collector need not scan them ever again (its
                # first pass after the load took a third of a warm one-file run).
                gc.freeze()
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            return CacheEntries()
        if (
            not isinstance(entries, dict)
            or not isinstance(summaries, dict)
            or summaries.keys() != entries.keys()
            or not all(isinstance(e, CacheEntry) for e in entries.values())
        ):
            return CacheEntries()  # another format (an older build's)
        for name, entry in entries.items():
            entry.summary = summaries[name]
        read = CacheEntries(entries)
        read.read = (summaries, raw)
        return read

    def save(self, entries: dict[str, CacheEntry]) -> None:
        summaries = {name: entry.summary for name, entry in entries.items()}
        known, raw = entries.read if isinstance(entries, CacheEntries) else ({}, b"")
        if summaries != known or not raw:
            raw = pickle.dumps(summaries, protocol=pickle.HIGHEST_PROTOCOL)
        self._write(pickle.dumps((raw, dict(entries)), protocol=pickle.HIGHEST_PROTOCOL))

    def _write(self, data: bytes) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            ignore = self.path.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written only costs speed


def _code_stamp() -> str:
    """Size and mtime of fuselint's own modules and the data files they read (`dispatchers.toml`):
    a checkout that changes the rules' code without bumping the version must not be answered from
    the old code's cache."""
    package = Path(__file__).resolve().parent.parent
    stamps = []
    for module in sorted([*package.rglob("*.py"), *package.rglob("*.toml")]):
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


def _init_worker(extra_rules: tuple[str, ...], config: Config, keep: int = 0) -> None:
    global _WORKER_STATE, _KEPT
    _WORKER_STATE = (load_catalog(extra_rules), config)
    _KEPT = _KeptFiles(keep) if keep > 0 else None


# A file to lint: its name, its roots, and the pattern rules' result and summary when a round has them.
Item = tuple[str, tuple[Reached, ...], PatternResult | None, FileSummary | None]


def _lint_batch(items: list[Item]) -> list[tuple[str, FileResult]]:
    assert _WORKER_STATE is not None
    catalog, config = _WORKER_STATE
    return [(name, lint_file(Path(name), catalog, config, *rest)) for name, *rest in items]


def _fix_one(item: tuple[str, str, tuple[Reached, ...], int]):
    """Fix one file's text in a worker (`fix_texts`): the fixer's rounds lint it with its roots."""
    from fuselint.source.fixer import fix_text

    assert _WORKER_STATE is not None
    catalog, config = _WORKER_STATE
    path, text, reached, line_length = item
    return fix_text(
        text,
        lambda t: lint_text(path, t, catalog, config, reached),
        unsafe=config.unsafe_fixes,
        line_length=line_length,
    )


def fix_texts(items: list[tuple[str, str, tuple[Reached, ...], int]], config: Config, jobs: int) -> list:
    """`fix_text` for each (path, text, roots, line length), spread over `jobs` worker processes,
    the largest texts first; the results in the order given. Each file's rounds (lint, apply,
    lint again) are its own, so the workers share nothing: a whole package's fixes take their
    time divided by the cores (transformers: each fixed file costs seconds, see NOTES fix12)."""
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(range(len(items)), key=lambda i: len(items[i][1]), reverse=True)
    with ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(config.extra_rules, config)) as pool:
        done = dict(zip(order, pool.map(_fix_one, [items[i] for i in order]), strict=True))
    return [done[i] for i in range(len(items))]


# Rounds of reach after which the linter stops even if roots still change (each round can only
# add roots, shorten a path or add an argument kind, so real trees settle in two or three).
MAX_ROUNDS = 8


class _Linter:
    """Lints batches of (file, roots), in worker processes kept open across rounds when worth it.

    Each worker keeps the files it linted (`_KeptFiles`), and a file linted again in a later
    round goes back to the worker that has it, unless that worker is busy while another has
    nothing left to do."""

    # Batches a worker holds at once: it starts the next while the main process sends another.
    IN_FLIGHT = 2

    def __init__(
        self, catalog: Catalog, config: Config, jobs: int | None, texts: dict[str, str] | None = None
    ):
        self.catalog, self.config = catalog, config
        self.jobs = jobs or os.cpu_count() or 1
        self.texts = texts or {}
        self.workers: list = []
        self.home: dict[str, int] = {}  # file -> the worker that keeps it

    def __call__(self, items: list[Item]) -> dict[str, FileResult]:
        on_disk = [item for item in items if item[0] not in self.texts]
        out = {
            name: lint_unit(name, self.texts[name], self.catalog, self.config, *rest)
            for name, *rest in items
            if name in self.texts
        }
        # A pool pays off from 16 files; once started, it also takes a later round's few files,
        # which its workers keep.
        if self.jobs > 1 and (len(on_disk) >= 16 or (self.workers and on_disk)):
            with collector_paused():  # this process only unpickles the workers' results meanwhile
                out.update(self._spread(on_disk))
        else:
            for name, *rest in on_disk:
                out[name] = lint_file(Path(name), self.catalog, self.config, *rest)
        return {name: out[name] for name, *_rest in items}  # in the order asked

    def _spread(self, items: list[Item]) -> dict[str, FileResult]:
        from concurrent.futures import FIRST_COMPLETED, wait

        if not self.workers:
            from concurrent.futures import ProcessPoolExecutor

            args = (self.config.extra_rules, self.config, KEPT_CHARS // self.jobs)
            self.workers = [
                ProcessPoolExecutor(1, initializer=_init_worker, initargs=args) for _ in range(self.jobs)
            ]
        # The largest files first, in small batches that a worker takes as it gets free: the
        # workers end a round together (with a few large batches, one idled for seconds
        # while the other linted its last). A worker's own files before any other's.
        ordered = sorted(items, key=lambda item: _size(item[0]), reverse=True)
        step = -(-len(ordered) // (self.jobs * 32))
        queues: list[list[list[Item]]] = [[] for _ in range(self.jobs + 1)]  # the last: files of no worker
        for owner in range(self.jobs + 1):
            own = [item for item in ordered if self.home.get(item[0], self.jobs) == owner]
            queues[owner] = [own[i : i + step] for i in range(0, len(own), step)][::-1]  # popped from the end
        running: dict = {}
        out: dict[str, FileResult] = {}
        while True:
            for worker in range(self.jobs):
                while sum(w == worker for w in running.values()) < self.IN_FLIGHT:
                    batch = self._next(queues, worker)
                    if batch is None:
                        break
                    for name, *_rest in batch:
                        self.home[name] = worker
                    running[self.workers[worker].submit(_lint_batch, batch)] = worker
            if not running:
                return out
            done, _pending = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                del running[future]
                out.update(future.result())

    def _next(self, queues: list[list[list[Item]]], worker: int) -> list[Item] | None:
        """The next batch for `worker`: its own largest, else one of no worker's, else the smallest
        left of the worker with the most left."""
        if queues[worker]:
            return queues[worker].pop()
        if queues[-1]:
            return queues[-1].pop()
        other = max(range(self.jobs), key=lambda w: len(queues[w]))
        return queues[other].pop(0) if queues[other] else None

    def close(self) -> None:
        for worker in self.workers:
            worker.shutdown()
        self.workers = []


def _size(name: str) -> int:
    try:
        return os.stat(name).st_size
    except OSError:
        return 0


class _RoundIndex(Index):
    """An `Index` that resolves each call target once: reach asks for the targets of every
    file's calls in every round, and most calls are alike (a target depends only on the call's
    form, qualified name and attribute)."""

    def __init__(self, summaries: dict[str, FileSummary]):
        super().__init__(summaries)
        self._targets: dict[tuple[str, str, str], list[tuple[str, str, bool | str]]] = {}
        # A class's lookup order, asked for each class in every round (`inherited_modules`) and
        # for each call on an instance: like a target, it depends only on the summaries.
        self._orders: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._inner: dict[tuple[str, int], list[tuple[str, str]]] = {}
        # `inherited_modules` and `imported_aliases` of the files of the run: the same in every
        # round this index serves.
        self.inherited: dict[str, tuple[Reached, ...]] | None = None

    def targets(self, call: Call) -> list[tuple[str, str, bool | str]]:
        key = (call.form, call.qualname, call.attr)
        found = self._targets.get(key)
        if found is None:
            found = self._targets[key] = super().targets(call)
        return list(found)

    def classes_of(self, path: str, name: str, depth: int = 0) -> list[tuple[str, str]]:
        if depth:
            return super().classes_of(path, name, depth)
        found = self._orders.get((path, name))
        if found is None:
            found = self._orders[path, name] = super().classes_of(path, name)
        return list(found)

    def instance_classes(self, qualname: str, depth: int = 0) -> list[tuple[str, str]]:
        # `Index` keeps the answers from the top; those of the value flow's inner steps (`X.m.n`
        # asks for `X.m` at depth 1, ...) depend on the summaries and the depth alone.
        if not depth:
            return super().instance_classes(qualname)
        found = self._inner.get((qualname, depth))
        if found is None:
            found = self._inner[qualname, depth] = super().instance_classes(qualname, depth)
        return list(found)


def _settle(
    names: list[str],
    results: dict[str, FileResult],
    outside: dict[str, FileResult],
    summaries: dict[str, FileSummary],
    lint: _Linter,
) -> Index:
    """Re-lint files whose roots changed until no file's roots change; returns the final index."""
    index: _RoundIndex | None = None
    for _round in range(MAX_ROUNDS):
        known = dict(summaries)
        known.update((n, r.summary) for n, r in results.items() if r.summary is not None)
        # A file linted again for new roots keeps its summary: the index, and what it has
        # resolved, serve the next round (reach ran over every file's calls afresh each round).
        if index is None or index.summaries != known:
            index = _RoundIndex(known)
        found = reach_roots(index, [(n, r.calls) for n, r in (*outside.items(), *results.items())])
        if index.inherited is None:
            index.inherited = inherited_modules(index, names)
            for n, aliases in imported_aliases(index, names).items():
                index.inherited[n] = (*index.inherited.get(n, ()), *aliases)
        for n, extra in index.inherited.items():
            found[n] = (*extra, *found.get(n, ()))
        # A root that the file's own entries already reach adds nothing (and re-linting for it
        # would cost a parse): modular files' `super().forward(...)` name other files' forwards.
        # Unless a caller hands it elements it iterates from the object (`Reached.elements`).
        roots = {
            n: tuple(r for r in rs if n not in results or r.name not in results[n].local or r.elements)
            for n, rs in found.items()
        }
        stale = [
            (n, roots.get(n, ()), results[n].patterns, results[n].summary)
            for n in names
            if roots.get(n, ()) != results[n].reached
        ]
        if not stale:
            return index
        results.update(lint(stale))
    return index


@dataclass
class TreeLint:
    """The result of linting a tree, kept so that files changed by `--fix` can be linted again
    with the roots and the calls of the others."""

    catalog: Catalog
    config: Config
    results: dict[str, FileResult]
    outside: dict[str, FileResult] = field(default_factory=dict)
    summaries: dict[str, FileSummary] = field(default_factory=dict)
    # Findings that join files' results once reach has settled (`unresumable`).
    joined: tuple[Finding, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        found = (f for r in self.results.values() for f in r.findings)
        return sorted((*found, *self.joined), key=lambda f: f.sort_key)

    def lint_text(self, path: str, text: str) -> list[Finding]:
        """`lint_text` for a new text of one file of the tree, with the roots it had."""
        reached = self.results[path].reached if path in self.results else ()
        return lint_text(path, text, self.catalog, self.config, reached)

    def relint(self, changed: dict[str, str]) -> list[Finding]:
        """Findings of the `changed` files (path -> new text), reach run again with the other
        files' calls: a finding that only a forward of another file reaches stays reported."""
        results = dict(self.results)
        lint = _Linter(self.catalog, self.config, 1, changed)
        try:
            results.update(
                lint([(p, results[p].reached if p in results else (), None, None) for p in sorted(changed)])
            )
            _settle(sorted(results), results, self.outside, self.summaries, lint)
        finally:
            lint.close()
        return sorted((f for p in changed for f in results[p].findings), key=lambda f: f.sort_key)


def lint_tree(
    files: list[Path],
    catalog: Catalog,
    config: Config,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
) -> TreeLint:
    """Lint every file, following entries' calls across the files (whole-program reach).

    From the cache, a file whose bytes are unchanged is not parsed: its result holds its findings,
    summary and calls. Files the cache knows that lie outside this run (a pre-commit run names
    only the staged files) still count as callers when their calls reach a file of this run and
    their bytes are unchanged; their summaries resolve names.
    """
    entries = cache.load() if cache else CacheEntries()
    names = [str(p) for p in files]
    keys = {name: _content_key(Path(name)) if cache else None for name in names}
    results: dict[str, FileResult] = {}
    todo: list[Item] = []
    for name in names:
        hit = entries.get(name)
        if hit is not None and keys[name] is not None and hit.digest == keys[name]:
            results[name] = hit.result
        else:
            # Start from the roots it had: after a small edit they are still right, saving a round.
            todo.append((name, hit.result.reached if hit is not None else (), None, None))
    in_run = set(names)
    outside: dict[str, FileResult] = {}
    summaries: dict[str, FileSummary] = {}
    for name, entry in sorted(entries.items()):
        if name in in_run:
            continue
        if entry.summary is not None:
            summaries[name] = entry.summary
        if entry.targets & in_run and entry.result.calls and _content_key(Path(name)) == entry.digest:
            outside[name] = entry.result
    summaries.update(_package_summaries(names, in_run, summaries))
    lint = _Linter(catalog, config, jobs)
    try:
        results.update(lint(todo))
        index = _settle(names, results, outside, summaries, lint)
    finally:
        lint.close()
    if cache is not None:
        changed = False
        for name in names:
            if keys[name] is None:
                continue
            hit = entries.get(name)
            # The pattern result serves only this run's rounds: a changed text is linted afresh.
            stored = replace(results[name], patterns=None)
            if hit is None or hit.digest != keys[name] or hit.result != stored:
                targets = frozenset(p for call in stored.calls for p, _n, _b in index.targets(call))
                entries[name] = CacheEntry.of(keys[name], stored, targets - {name})
                changed = True
        if changed:
            cache.save(entries)
    return TreeLint(catalog, config, results, outside, summaries, _joined(results, outside, index))


def _joined(
    results: dict[str, FileResult], outside: dict[str, FileResult], index: Index
) -> tuple[Finding, ...]:
    """Calls on objects the caller builds whose method reaches a break (`unresumable`), less those
    a `# noqa` silences and those a file's own findings already hold. The breaks of files the
    cache knows outside this run count too (a pre-commit run names only the staged files)."""
    fresh = {name: r.fresh for name, r in results.items() if r.fresh}
    if not fresh:
        return ()
    broken = (b for r in (*results.values(), *outside.values()) for b in r.broken)
    found = unresumable((c for calls in fresh.values() for c in calls), broken, index)
    known = {(f.code, f.span) for name in fresh for f in results[name].findings}
    return tuple(without_suppressed(f for f in found if (f.code, f.span) not in known))


def _package_summaries(
    names: list[str], in_run: set[str], known: dict[str, FileSummary]
) -> dict[str, FileSummary]:
    """Summaries of the `__init__.py` of each package that holds a file of the run, where the run
    does not name it: a package's `__init__` re-exports its classes (`from ...schedulers import
    DDIMScheduler`), so a run naming only a pipeline and its scheduler still resolves the one
    through the other's package. They resolve names only; nothing in them is linted."""
    found: dict[str, FileSummary] = {}
    for folder in sorted({str(Path(name).parent) for name in names}):
        init = str(Path(folder) / "__init__.py")
        if init in in_run or init in known or not Path(init).is_file():
            continue
        text, _encoding, error = read_source(Path(init))
        if error is not None or text is None:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        found[init] = summarize(tree, *module_name(init))
    return found


def lint_paths(
    files: list[Path],
    catalog: Catalog,
    config: Config,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
) -> list[Finding]:
    """Findings for every file: from the cache when unchanged, else computed, in parallel."""
    return lint_tree(files, catalog, config, jobs=jobs, cache=cache).findings
