"""The check pipeline: lint, trace and merge, fix and re-lint, prove, the baseline.

`fuselint check` parses its arguments into a `CheckRequest` and calls `run_check`, which
returns a `CheckResult`: the findings to report, what was fixed, what a proof rejected and
the exit status. Nothing here parses arguments or renders a report. The effects the
pipeline cannot avoid reach it as arguments: `say` for the lines a user reads on stderr,
and `trace` for building and tracing the user's model (only with entries). Files are
written only when the request asks (--fix, --add-noqa, --update-baseline).

Like `check`, this module imports no torch, libcst or networkx at import time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fuselint.catalog import Catalog, CatalogError
from fuselint.config import Config
from fuselint.findings import Finding, with_display_path
from fuselint.report.gate import Thresholds
from fuselint.source.lint import (
    Cache,
    ambiguous_lines,
    decode_source,
    excluded_anywhere,
    heap_frozen,
    lint_text,
    lint_tree,
    read_source,
    with_noqa,
    without_suppressed,
)
from fuselint.source.paths import normal_path_only
from fuselint.source.sites import one_per_site
from fuselint.source.user_rules import check_user_rules

if TYPE_CHECKING:  # imported when a proof runs, entries are traced, a fix is diffed: not for a lint
    from fuselint.fusion.model_summary import ModelSummary
    from fuselint.verify.prove import ProveSettings

# How loud a line on stderr is; the CLI maps these onto -s/-q/-v: VERBOSE only with -v,
# INFO hidden by -q, ALWAYS hidden only by -s, WARNING (errors and warnings) shown even with -s.
Level = Literal["verbose", "info", "always", "warning"]
VERBOSE: Level = "verbose"
INFO: Level = "info"
ALWAYS: Level = "always"
WARNING: Level = "warning"
Say = Callable[[str, Level], None]


def _silent(line: str, level: Level) -> None:
    pass


class CheckError(Exception):
    """The pipeline could not do what was asked (a baseline it cannot read, a proof that
    cannot start, an entry that does not trace); the message is one line and the CLI exits 2.
    `detail` is the full log of a failed trace, for --verbose."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class CheckRequest:
    """What `fuselint check` was asked to do, after settings and options were merged."""

    files: tuple[Path, ...]
    catalog: Catalog
    config: Config
    action: Literal["report", "diff", "add-noqa"] = "report"
    jobs: int | None = None
    cache: Cache | None = None
    normal_paths_only: bool = False  # --paths normal
    entries: tuple[str, ...] = ()
    prove: ProveSettings | None = None  # with entries and a fix: prove the fixes first
    baseline: str | None = None
    update_baseline: bool = False
    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass(frozen=True)
class CheckResult:
    """What came of a check. `status` is the exit code before --exit-zero: 2 when a file that
    was to be fixed or annotated could not be written (never a pass), else the gate's verdict
    (for a diff: 1 when there is one)."""

    findings: tuple[Finding, ...]
    status: int
    fixed: int = 0  # fixes applied (or, for a diff, that would be)
    applied: tuple[tuple[str, tuple[Finding, ...]], ...] = ()  # per fixed file, the findings fixed
    unwritable: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()  # the proof's rejected fixes, one line each
    models: tuple[ModelSummary, ...] = ()  # the traced entries' summaries, for the markdown report
    diff: str = ""
    noqa_added: int = 0
    hidden: int = 0  # findings the baseline knew
    gate_reason: str = ""
    baseline_written: bool = False


def with_options(
    config: Config,
    *,
    select=(),
    extend_select=(),
    ignore=(),
    exclude=(),
    extend_exclude=(),
    fix=None,
    unsafe_fixes=None,
    force_exclude=None,
) -> Config:
    """The settings file overridden by the command line, as ruff layers them: --select and
    --exclude replace the file's lists, --extend-select, --ignore and --extend-exclude add."""
    if select:
        config = replace(config, select=_split(select))
    if extend_select:
        config = replace(config, select=config.select + _split(extend_select))
    if ignore:
        config = replace(config, ignore=config.ignore + _split(ignore))
    if exclude:
        config = replace(config, exclude=_globs(exclude))
    if extend_exclude:
        config = replace(config, extend_exclude=config.extend_exclude + _globs(extend_exclude))
    if fix is not None:
        config = replace(config, fix=fix)
    if unsafe_fixes is not None:
        config = replace(config, unsafe_fixes=unsafe_fixes)
    if force_exclude is not None:
        config = replace(config, force_exclude=force_exclude)
    return config


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip().upper() for value in values for v in value.split(",") if v.strip())


def _globs(values: tuple[str, ...]) -> tuple[str, ...]:
    # Paths keep their case (unlike rule codes).
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def check_selectors(config: Config, catalog: Catalog) -> None:
    """A selector that matches no rule is a typo (`FL21O`): fail, as ruff does, instead of
    silently selecting nothing and letting CI pass."""
    codes = [r.code for r in catalog]
    named = [
        *config.select,
        *config.ignore,
        *(c for _glob, cs in config.per_file_ignores for c in cs),
        *config.extend_safe_fixes,
        *config.extend_unsafe_fixes,
    ]
    for selector in named:
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            raise CheckError(f"unknown rule selector {selector!r}; `fuselint rules` lists the codes")
    try:
        check_user_rules(catalog, config)
    except CatalogError as exc:
        raise CheckError(str(exc)) from None


def run_check(
    request: CheckRequest,
    *,
    say: Say = _silent,
    trace: Callable[[tuple[str, ...]], list] | None = None,
) -> CheckResult:
    """Lint the request's files, add the traced findings of its entries, fix (proving the
    fixes when it has entries), re-lint what changed, and judge the result against the
    baseline and thresholds. `trace(entries)` returns fusion.model analyses."""
    config, catalog = request.config, request.catalog
    started = time.perf_counter()
    tree = lint_tree(request.files, catalog, config, jobs=request.jobs, cache=request.cache)
    findings = tree.findings
    if request.normal_paths_only:
        findings = normal_path_only(findings)
    say(f"fuselint: checked {len(request.files)} file(s) in {time.perf_counter() - started:.2f} s", VERBOSE)

    traced: list[Finding] = []
    models: tuple[ModelSummary, ...] = ()
    if request.entries:
        if trace is None:
            raise CheckError("tracing entries needs a tracer")
        analyses = trace(request.entries)
        from fuselint.graph.breaks import break_findings, merge_findings

        traced = [
            with_display_path(f)
            for a in analyses
            for f in (*break_findings(a.capture, a.break_gains), *a.findings)
        ]
        traced = without_suppressed(f for f in traced if config.enabled(f.code, f.span.path))
        findings = sorted(merge_findings(findings, traced), key=lambda f: f.sort_key)
        models = tuple(a.summary() for a in analyses)

    if request.action == "add-noqa":
        added, unwritable = add_noqa(findings, say)
        return CheckResult(
            tuple(findings), 2 if unwritable else 0, noqa_added=added, unwritable=tuple(unwritable)
        )

    fixed_count = 0
    unwritable: list[str] = []
    applied: dict[str, tuple[Finding, ...]] = {}
    proof = None
    diff = request.action == "diff"
    if diff or config.fix:
        if request.entries and request.prove is not None:
            proof = _prove(request, findings, say, tree.lint_text)
        fixed_count, changed, diffs, unwritable, before, applied = fix_files(
            findings,
            catalog,
            config,
            write=not diff,
            keep=proof.keeps if proof else None,
            lint=tree.lint_text,
            say=say,
            reached={path: result.reached for path, result in tree.results.items()},
            jobs=request.jobs or os.cpu_count() or 1,
        )
        if diff:
            text = "".join(diffs)
            return CheckResult(tuple(findings), 1 if text else 0, fixed=fixed_count, diff=text)
        if changed:
            # Linted again with whole-program reach: findings in a fixed file that only another
            # file's forward reaches stay reported.
            findings = [f for f in findings if f.span.path not in changed]
            findings.extend(tree.relint(changed))
            carried = carry_traced(traced, before, changed)
            if carried:
                from fuselint.graph.breaks import merge_findings

                findings = merge_findings(findings, carried)
            findings.sort(key=lambda f: f.sort_key)

    if request.normal_paths_only:  # again: fixed files were linted anew
        findings = normal_path_only(findings)
    if proof is not None:
        findings = proof.mark(findings)
    # Fixes and noqa saw every finding; the report shows one per site (source/sites.py).
    findings = one_per_site(findings)
    done = {
        "fixed": fixed_count,
        "applied": tuple(sorted(applied.items())),
        "unwritable": tuple(unwritable),
        "rejected": tuple(str(r) for r in proof.rejected) if proof else (),
        "models": models,
    }
    from fuselint.report.gate import BaselineError, gate, load_baseline, new_findings, write_baseline

    if request.update_baseline:
        if not request.baseline:
            raise CheckError("--update-baseline needs --baseline FILE")
        try:
            write_baseline(request.baseline, findings, config.root)
        except BaselineError as exc:
            raise CheckError(str(exc)) from None
        n = len(findings)
        say(f"fuselint: recorded {n} finding{'s' if n != 1 else ''} in {request.baseline}", INFO)
        # Recorded; but a fix that could not be written is never a pass.
        return CheckResult(tuple(findings), 2 if unwritable else 0, baseline_written=True, **done)
    hidden = 0
    if request.baseline:
        try:
            known = load_baseline(request.baseline)
        except BaselineError as exc:
            raise CheckError(str(exc)) from None
        new = new_findings(findings, known, config.root)
        hidden, findings = len(findings) - len(new), new
    verdict = gate(findings, request.thresholds)
    status = 2 if unwritable else verdict.exit_code
    return CheckResult(tuple(findings), status, hidden=hidden, gate_reason=verdict.reason, **done)


def device_table(target: str):
    """The GPU table named by --target (H200, H100, ... or a table's .json path)."""
    from fuselint.fusion.devices import device as device_named

    try:
        return device_named(target)
    except KeyError as exc:
        raise CheckError(str(exc.args[0])) from None


def trace_entries(
    entries: Sequence[str], device: str | None, train: bool, target: str, say: Say = _silent
) -> list:
    """Capture every entry with dynamo and plan it on the `target` GPU table (fusion.model
    analyses); the notes on the trace (the mode traced, ops left unlowered) go to `say`."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CheckError("tracing an entry needs torch: pip install 'fuselint[torch]'") from None
    from fuselint.fusion.model import analyse
    from fuselint.graph.capture import capture_entries
    from fuselint.graph.entry import EntryError

    table = device_table(target)
    try:
        captures = capture_entries(list(entries), device=device, train=train)
    except EntryError as exc:
        # A trace that did not complete is never a pass.
        raise CheckError(str(exc), exc.detail or "") from None
    for cap in captures:
        if cap.mode_note:
            say(f"fuselint: note: {cap.entry}: {cap.mode_note}", WARNING)
        for name in cap.unlowered:
            say(f"fuselint: warning: {cap.entry}: could not lower {name} to ATen; not planned", WARNING)
    return [analyse(cap, table) for cap in captures]


@dataclass(frozen=True)
class TextCheck:
    """What came of checking one source text that is not on disk (stdin): its findings
    (after the fix, when fixed), the text to write back (None when it could not be decoded,
    so the raw bytes pass through) and, for --diff, the diff."""

    findings: tuple[Finding, ...]
    text: str | None
    encoding: str
    applied: tuple[Finding, ...] = ()
    diff: str | None = None  # None unless a diff was asked for and the text was checked
    changed: bool = False


def check_text(name: str, raw: bytes, catalog: Catalog, config: Config, *, diff: bool = False) -> TextCheck:
    """Lint `raw` as the file `name`, with its settings (per-file-ignores), and fix it when
    the settings say --fix. A name that --force-exclude excludes is left untouched."""
    text, encoding, error = decode_source(name, raw)
    skipped = error is not None or (config.force_exclude and excluded_anywhere(Path(name), config))
    if error is not None:
        findings = [error] if config.enabled("FL000", name) else []
    else:
        findings = [] if skipped else lint_text(name, text, catalog, config)
    applied: tuple[Finding, ...] = ()
    if (config.fix or diff) and not skipped:
        from fuselint.source.fixer import fix_text

        result = fix_text(text, lambda t: lint_text(name, t, catalog, config), unsafe=config.unsafe_fixes)
        if diff:
            return TextCheck(
                tuple(one_per_site(findings)),
                text,
                encoding,
                diff=unified_diff(text, result.text, name),
                changed=result.text != text,
            )
        if result.applied:
            applied = tuple(result.applied)
            text, findings = result.text, lint_text(name, result.text, catalog, config)
    return TextCheck(tuple(one_per_site(findings)), text, encoding, applied=applied)


def _prove(request: CheckRequest, findings: Sequence[Finding], say: Say, lint):
    """Prove the fixes on the entries (verify/prove.py); each rejected fix is one line even with -q.
    `lint(path, text)` is the tree's: a file is linted again with the roots reach gave it."""
    from fuselint.verify.prove import ProveError, prove_findings

    try:
        proof = prove_findings(
            request.entries,
            findings,
            request.catalog,
            request.config,
            request.prove,
            lambda line: say(line, INFO),
            lint,
        )
    except ProveError as exc:
        raise CheckError(str(exc)) from None
    if proof is not None:
        for rejection in proof.rejected:
            say(str(rejection), ALWAYS)
        say(proof.summary(), INFO)
    return proof


def add_noqa(findings: Sequence[Finding], say: Say = _silent) -> tuple[int, list[str]]:
    """Write `# noqa: CODE` for every finding into its file; (directives added, unwritable files)."""
    from fuselint.source.fixer import write_atomically

    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.span.path, []).append(f)
    added, unwritable = 0, []
    for path in sorted(by_path):
        text, encoding, error = read_source(Path(path))
        if error is not None:
            continue
        if ambiguous_lines(text):
            say(f"fuselint: warning: {path}: lone carriage returns end its lines; no noqa added", WARNING)
            continue
        new_text, count = with_noqa(text, by_path[path])
        if not count:
            continue
        try:
            write_atomically(Path(path), new_text, encoding)
        except OSError as exc:
            say(f"fuselint: error: {path}: cannot add noqa: {exc.strerror or exc}", WARNING)
            unwritable.append(path)
            continue
        added += count
    return added, unwritable


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
            import difflib

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


# From this many files to fix, worker processes pay for their start (a second each, with the
# rules' imports).
FIX_POOL_FROM = 8


def fix_files(
    findings: list[Finding],
    catalog: Catalog,
    config: Config,
    *,
    write: bool,
    keep=None,
    lint=None,
    say: Say = _silent,
    reached: dict | None = None,
    jobs: int = 1,
) -> tuple[int, dict[str, str], list[str], list[str], dict[str, str], dict[str, tuple[Finding, ...]]]:
    """Fix every file that has an allowed fix; returns (fixes applied, new texts, diffs,
    files that could not be written, old texts of the changed files, the findings fixed in
    each). A file that cannot be written is left as it was. `keep`: the fixes to apply (a
    predicate on findings, from a proof), None for all. With `reached` (each file's roots in the
    tree lint, what `lint` uses) and `jobs` > 1, the files are fixed in worker processes.

    A read error skips the file, as before; the texts are read before any is written."""
    # libcst costs a quarter of a second to import: only runs that fix pay for it.
    from fuselint.source.fixer import allowed, fix_text, line_length_for, write_atomically
    from fuselint.verify.prove import only_kept

    paths = sorted({f.span.path for f in findings if allowed(f, config.unsafe_fixes)})
    total, changed, diffs, unwritable, before, applied = 0, {}, [], [], {}, {}
    sources = {path: read_source(Path(path)) for path in paths}
    paths = [path for path in paths if sources[path][2] is None]
    if reached is not None and keep is None and jobs > 1 and len(paths) >= FIX_POOL_FROM:
        from fuselint.source.lint import fix_texts

        items = [(p, sources[p][0], reached.get(p, ()), line_length_for(Path(p))) for p in paths]
        results = dict(zip(paths, fix_texts(items, config, jobs), strict=True))
    else:
        with heap_frozen():
            results = {
                path: fix_text(
                    sources[path][0],
                    (lambda t, p=path: only_kept(lint(p, t), keep))
                    if lint
                    else (lambda t, p=path: only_kept(lint_text(p, t, catalog, config), keep)),
                    unsafe=config.unsafe_fixes,
                    line_length=line_length_for(Path(path)),
                )
                for path in paths
            }
    for path in paths:
        text, encoding, _error = sources[path]
        result = results[path]
        if result.text == text:
            continue
        if write:
            try:
                write_atomically(Path(path), result.text, encoding)
            except OSError as exc:
                say(f"fuselint: error: {path}: cannot write the fix: {exc.strerror or exc}", WARNING)
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
    import difflib

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )
