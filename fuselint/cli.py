"""The `fuselint` command: parse arguments, call into the rooms, print, choose the exit code.

Exit codes: 0 no findings (or none that fail the gate), 1 findings, 2 the tool could not
do what was asked. Errors are one line on stderr, never a traceback (set
FUSELINT_DEBUG=1 to see one).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click

from fuselint import __version__, pipeline
from fuselint.catalog import Catalog, CatalogError, load_catalog
from fuselint.config import Config, ConfigError, find_pyproject, load_config
from fuselint.findings import Finding
from fuselint.pipeline import CheckError, CheckRequest, run_check
from fuselint.report.gate import Thresholds
from fuselint.source.lint import (
    Cache,
    PathError,
    discover,
    read_source,
)

FORMATS = ("text", "json", "sarif", "github", "markdown")
# ruff's names for its two text layouts: `full` (with the source line) and `concise` (without).
TEXT_STYLES = {"full": True, "concise": False}


class UsageFailure(click.ClickException):
    """A one-line error that exits with 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"fuselint: error: {self.message}", err=True)


def _settings(config_path: str | None, paths: tuple[str, ...]) -> Config:
    try:
        if config_path:
            if not Path(config_path).is_file():
                raise UsageFailure(f"{config_path}: no such config file")
            return load_config(Path(config_path))
        # The nearest folder that exists: --stdin-filename may name a file not yet saved.
        named = Path(paths[0]) if paths else Path.cwd()
        start = next((p for p in (named, *named.parents) if p.exists()), Path.cwd())
        return load_config(find_pyproject(start))
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


def _catalog(config: Config) -> Catalog:
    try:
        return load_catalog(config.extra_rules)
    except CatalogError as exc:
        raise UsageFailure(str(exc)) from None


def _prove_options(default: bool | None, what: str):
    """The proof's options, shared by `check` and `verify`."""

    def apply(command):
        for option in reversed(
            (
                click.option("--prove/--no-prove", default=default, help=what),
                click.option(
                    "--prove-timeout",
                    type=click.FloatRange(min=1),
                    default=600,
                    show_default=True,
                    help="Seconds one proof trial (one run of the entry) may take.",
                ),
                click.option(
                    "--prove-backends",
                    default="fuselint,inductor",
                    show_default=True,
                    help="Backends a proven fix must still compile with (comma-separated; empty for none).",
                ),
            )
        ):
            command = option(command)
        return command

    return apply


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fuselint")
def main() -> None:
    """Find what stops PyTorch from fusing your model's operators, and fix it."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix/--no-fix", default=None, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply (and count) unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option(
    "--format",
    "--output-format",
    "fmt",
    type=click.Choice(FORMATS + tuple(TEXT_STYLES)),
    default="text",
    show_default=True,
    help="Report format (ruff's `full` and `concise` are text with and without the source line).",
)
@click.option("--select", multiple=True, help="Codes or prefixes to enable (comma-separated).")
@click.option(
    "--extend-select", multiple=True, help="Codes or prefixes to enable on top of --select (comma-separated)."
)
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable (comma-separated).")
@click.option(
    "--exclude",
    multiple=True,
    help="Paths or globs to skip, replacing the default excludes (comma-separated).",
)
@click.option(
    "--extend-exclude", multiple=True, help="Paths or globs to skip on top of the excludes (comma-separated)."
)
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding; exit 0.")
@click.option(
    "--show-fixes/--no-show-fixes", default=False, help="List the fixes applied, per file and rule."
)
@click.option(
    "--stdin-filename",
    type=click.Path(),
    help="Read the source from stdin and report it under this name; with --fix, print the fixed source.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print the findings and nothing else.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing; only the exit code speaks.")
@click.option("-v", "--verbose", is_flag=True, help="Also say which settings and files were used, on stderr.")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option(
    "--force-exclude/--no-force-exclude",
    default=None,
    help="Apply the excludes to files named on the command line too (use in pre-commit).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache.")
@click.option(
    "--paths",
    "code_paths",
    type=click.Choice(("all", "normal")),
    default="all",
    show_default=True,
    help=(
        "normal: leave out findings that break only on deprecation, misuse, error, recording, warmed, export, "
        "compiled-whole or option paths."
    ),
)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Processes to lint with.")
@click.option("--output-file", "-o", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read settings from.")
@click.option("--show-source/--no-show-source", default=True, help="Show the source line under each finding.")
@click.option(
    "--entry", "entries", multiple=True, help="Also trace this model entry (file.py:factory); repeatable."
)
@click.option(
    "--device", type=click.Choice(("meta", "cpu", "cuda")), default=None, help="Where to build entries."
)
@click.option("--train", is_flag=True, help="Trace entries in train mode, backward graphs included.")
@_prove_options(
    default=None,
    what="With --entry: keep only the fixes that re-tracing the fixed source proves (default on).",
)
@click.option(
    "--target",
    default="H200",
    show_default=True,
    help="GPU whose numbers price the gains (H200, H100, A100, L4).",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    help="Hide the findings recorded in this file; exit 1 only for new ones.",
)
@click.option(
    "--update-baseline", is_flag=True, help="Record the current findings in --baseline FILE and exit 0."
)
@click.option(
    "--fail-on-gain-launches",
    type=click.FloatRange(min=0),
    help="Fail only when the new findings together would save at least this many kernel launches.",
)
@click.option(
    "--fail-on-gain-bytes",
    type=click.FloatRange(min=0),
    help="Fail only when the new findings together would save at least this many bytes of memory traffic.",
)
@click.option(
    "--fail-on-gain-us",
    type=click.FloatRange(min=0),
    help="Fail only when the new findings together would save at least this many microseconds per call.",
)
def check(
    paths,
    fix,
    unsafe_fixes,
    diff,
    fmt,
    select,
    extend_select,
    ignore,
    exclude,
    extend_exclude,
    add_noqa,
    show_fixes,
    stdin_filename,
    quiet,
    silent,
    verbose,
    statistics,
    exit_zero,
    force_exclude,
    no_cache,
    code_paths,
    jobs,
    output_file,
    config_path,
    show_source,
    baseline,
    update_baseline,
    fail_on_gain_launches,
    fail_on_gain_bytes,
    fail_on_gain_us,
    entries,
    device,
    train,
    prove,
    prove_timeout,
    prove_backends,
    target,
) -> None:
    """Lint PATHS (default: the current folder) for fusion blockers."""
    named_paths, paths = paths, paths or (".",)
    if fmt in TEXT_STYLES:
        fmt, show_source = "text", TEXT_STYLES[fmt]
    config = _settings(config_path, (stdin_filename,) if stdin_filename else paths)
    config = pipeline.with_options(
        config,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        exclude=exclude,
        extend_exclude=extend_exclude,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        force_exclude=force_exclude,
    )
    catalog = _catalog(config)
    try:
        pipeline.check_selectors(config, catalog)
    except CheckError as exc:
        raise UsageFailure(str(exc)) from None
    if statistics and fmt not in ("text", "json"):
        raise UsageFailure("--statistics works with --format text or json")
    output = _output_level(quiet, silent, verbose)
    _refuse_conflicts(
        add_noqa=add_noqa,
        fix=fix is True,  # `fix = true` in the settings file does not forbid --add-noqa
        diff=diff,
        stdin_filename=stdin_filename,
        entries=entries,
        baseline=baseline or update_baseline,
        gated=any(t is not None for t in (fail_on_gain_launches, fail_on_gain_bytes, fail_on_gain_us)),
    )
    if stdin_filename:
        if named_paths:
            _note(output, f"fuselint: warning: ignoring {' '.join(named_paths)} in favour of stdin")
        report = StdinReport(fmt, statistics, show_source, show_fixes, output_file, output)
        code = _check_stdin(stdin_filename, catalog, config, report, diff=diff)
        if code and not exit_zero:
            sys.exit(code)
        return
    try:
        files = discover(paths, config)
    except PathError as exc:
        raise UsageFailure(str(exc)) from None

    cache = None if no_cache else Cache.for_settings(config.root, catalog, config)
    if output == VERBOSE:
        where = config.root / "pyproject.toml" if config_path is None else Path(config_path)
        source = where if where.is_file() else "defaults (no pyproject.toml)"
        _note(output, f"fuselint: settings: {source}; cache: {cache.path if cache else 'off'}")
    entries = tuple(entries or config.entries)
    fixing = diff or config.fix
    request = CheckRequest(
        files=tuple(files),
        catalog=catalog,
        config=config,
        action="add-noqa" if add_noqa else "diff" if diff else "report",
        jobs=jobs,
        cache=cache,
        normal_paths_only=code_paths == "normal",
        entries=entries,
        prove=(
            _prove_settings(device, train, prove_timeout, prove_backends)
            if entries and fixing and prove is not False
            else None
        ),
        baseline=baseline,
        update_baseline=update_baseline,
        thresholds=Thresholds(fail_on_gain_launches, fail_on_gain_bytes, fail_on_gain_us),
    )

    def trace(chosen: tuple[str, ...]) -> list:
        with _user_output_to_stderr():
            return trace_entries(chosen, device, train, target)

    try:
        result = run_check(request, say=_sayer(output), trace=trace)
    except CheckError as exc:
        raise UsageFailure(str(exc)) from None

    if add_noqa:
        added = result.noqa_added
        _note(output, f"Added {added} noqa directive{'s' if added != 1 else ''}.", always=True)
        sys.exit(result.status)
    if diff:
        _emit_report(result.diff, output_file, output)
        if not exit_zero and result.status:
            sys.exit(result.status)
        return
    if result.baseline_written:
        if result.status:
            sys.exit(result.status)  # a fix that could not be written
        return

    applied = dict(result.applied)
    fixes = _fixes_listing(applied, catalog) if show_fixes else ""
    if fixes and fmt != "text":
        _note(output, fixes.rstrip("\n"))  # stdout holds a machine-readable report
    report = _render(
        fmt,
        list(result.findings),
        catalog,
        config,
        statistics,
        show_source,
        result.fixed,
        result.models,
        quiet=output <= QUIET,
        fixes=fixes,
    )
    _emit_report(report, output_file, output)
    if result.hidden or request.thresholds.any:
        shown = f" ({result.hidden} known in {baseline})" if result.hidden else ""
        _note(output, f"fuselint: {result.gate_reason}{shown}")
    if result.unwritable:
        sys.exit(2)  # asked to fix, could not: not a pass, whatever --exit-zero says
    if result.status and not exit_zero:
        sys.exit(result.status)


def _prove_settings(device, train, timeout, backends):
    from fuselint.verify.prove import ProveSettings, parse_backends

    try:
        chosen = parse_backends(backends)
    except ValueError as exc:
        raise UsageFailure(f"--prove-backends: {exc}") from None
    # The prover builds the entries where it is told (check's meta builds prove on the CPU).
    where = device if device and device.startswith("cuda") else "cpu"
    return ProveSettings(where, train, timeout, chosen)


def _prove(output, run, counted=lambda rejected: ()):
    """Run a proof (`run(say)`, verify/prove.py); each rejected fix is one line on stderr, even with
    -q, but those `counted(rejected)` picks, which the caller counts in one note of its own."""
    from fuselint.verify.prove import ProveError

    try:
        proof = run(lambda line: _note(output, line))
    except ProveError as exc:
        raise UsageFailure(str(exc)) from None
    if proof is not None:
        left = {id(r) for r in counted(proof.rejected)}
        for rejection in proof.rejected:
            if id(rejection) not in left:
                _note(output, str(rejection), always=True)
        _note(output, proof.summary())
    return proof


def _render(
    fmt,
    findings,
    catalog,
    config,
    statistics,
    show_source,
    fixed_count,
    models=(),
    *,
    quiet: bool = False,
    fixes: str = "",
    texts: dict[str, str] | None = None,
) -> str:
    """The report. Text only: `quiet` leaves out the summary (ruff's -q), `fixes` (the
    --show-fixes listing) goes before it, and `texts` gives sources not on disk (stdin)."""
    from fuselint.report import github, json_format, markdown, sarif, text
    from fuselint.report.fingerprint import repository_root

    if statistics:
        if fmt == "json":
            return json_format.render_statistics_json(findings, catalog)
        return text.render_statistics(findings, catalog)
    if fmt == "json":
        return json_format.render_json(findings, catalog)
    if fmt == "text":
        sources = None
        if show_source:
            sources = {}
            for path in {f.span.path for f in findings}:
                source = (texts or {}).get(path)
                if source is None:
                    source, _enc, _err = read_source(Path(path))
                sources[path] = source.splitlines() if source is not None else []
        full = text.render_text(findings, sources, unsafe=config.unsafe_fixes, fixed=fixed_count)
        tail = text.summary(findings, unsafe=config.unsafe_fixes, fixed=fixed_count) + "\n"
        body = full[: len(full) - len(tail)] if full.endswith(tail) else full
        if quiet:
            return body
        if fixes and body and not body.endswith("\n\n"):
            fixes = "\n" + fixes
        return body + fixes + tail
    if fmt == "sarif":
        return sarif.render_sarif(findings, catalog, repository_root(config.root))
    if fmt == "github":
        return github.render_github(findings, catalog, repository_root(config.root))
    return markdown.render_markdown(findings, catalog, list(models) or None)


# How much `check` says: -s nothing, -q the findings only, default, -v also settings and files.
SILENT, QUIET, NORMAL, VERBOSE = range(4)


def _output_level(quiet: bool, silent: bool, verbose: bool) -> int:
    if quiet + silent + verbose > 1:
        raise UsageFailure("choose one of -q/--quiet, -s/--silent and -v/--verbose")
    return SILENT if silent else QUIET if quiet else VERBOSE if verbose else NORMAL


def _sayer(output: int):
    """The pipeline's `say`, at this run's -s/-q/-v level."""

    def say(line: str, level: str) -> None:
        if level == "warning":
            click.echo(line, err=True)
        elif level == "verbose":
            if output == VERBOSE:
                click.echo(line, err=True)
        else:
            _note(output, line, always=level == "always")

    return say


def _note(output: int, message: str, *, always: bool = False) -> None:
    """A line for the user on stderr: hidden by -q unless `always`, and always by -s."""
    if output > QUIET or (always and output > SILENT):
        click.echo(message, err=True)


def _refuse_conflicts(*, add_noqa, fix, diff, stdin_filename, entries, baseline, gated) -> None:
    """Options that cannot mean anything together: one line and exit 2, never a silent pick."""
    if add_noqa and (fix or diff or stdin_filename):
        raise UsageFailure("--add-noqa cannot be used with --fix, --diff or --stdin-filename")
    if stdin_filename and (entries or baseline or gated):
        raise UsageFailure(
            "--stdin-filename cannot be used with --entry, --baseline, --update-baseline or --fail-on-gain-*"
        )


@dataclass(frozen=True)
class StdinReport:
    """How `check --stdin-filename` reports: the report options of a normal run."""

    fmt: str
    statistics: bool
    show_source: bool
    show_fixes: bool
    output_file: str | None
    output: int


def _check_stdin(name: str, catalog: Catalog, config: Config, report: StdinReport, *, diff: bool) -> int:
    """Lint the source on stdin as the file `name` (editors, formatter pipes); returns the exit code.

    The findings are reported under `name`, with its settings (per-file-ignores). With --fix
    stdout carries the fixed source, as ruff does, and the report moves to stderr; with --diff
    stdout carries the diff. A name that --force-exclude excludes is passed through untouched.
    """
    raw = sys.stdin.buffer.read()
    result = pipeline.check_text(name, raw, catalog, config, diff=diff)
    if result.diff is not None:
        click.echo(result.diff, nl=False)
        return 1 if result.changed else 0
    findings, text = list(result.findings), result.text
    applied = {name: result.applied} if result.applied else {}
    if config.fix:
        sys.stdout.flush()
        out = sys.stdout.buffer
        out.write(raw if text is None else text.encode(result.encoding))
        out.flush()
    fixed = sum(len(done) for done in applied.values())
    fixes = _fixes_listing(applied, catalog) if report.show_fixes else ""
    rendered = _render(
        report.fmt,
        findings,
        catalog,
        config,
        report.statistics,
        report.show_source,
        fixed,
        quiet=report.output <= QUIET,
        fixes=fixes,
        texts={name: text} if text is not None else None,
    )
    if report.output_file:
        _emit(rendered, report.output_file)
    elif report.output > SILENT:
        click.echo(rendered, nl=False, err=config.fix)
    return 1 if findings else 0


def _fixes_listing(applied: dict[str, tuple[Finding, ...]], catalog: Catalog) -> str:
    """ruff's --show-fixes block: per file, how many of each rule were fixed."""
    total = sum(len(done) for done in applied.values())
    if not total:
        return ""
    lines = [f"Fixed {total} error{'s' if total != 1 else ''}:"]
    for path in sorted(applied):
        counts: dict[str, int] = {}
        for f in applied[path]:
            counts[f.code] = counts.get(f.code, 0) + 1
        if not counts:
            continue
        lines.append(f"- {path}:")
        for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            name = catalog[code].name if code in catalog else code
            lines.append(f"    {n} × {code} ({name})")
    return "\n".join(lines) + "\n\n"


def _emit_report(report: str, output_file: str | None, output: int) -> None:
    if output_file:
        _emit(report, output_file)
    elif output > SILENT:
        _emit(report, None)


def _emit(report: str, output_file: str | None) -> None:
    if output_file:
        try:
            # CI writes reports into folders that do not exist yet (`-o reports/fuselint.sarif`).
            Path(output_file).parent.mkdir(parents=True, exist_ok=True)
            Path(output_file).write_text(report, encoding="utf-8")
        except OSError as exc:
            raise UsageFailure(f"{output_file}: cannot write: {exc.strerror}") from None
    else:
        click.echo(report, nl=False)


CACHE_DIR = ".fuselint_cache"


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
def clean(paths: tuple[str, ...]) -> None:
    """Remove fuselint's caches (.fuselint_cache/) under PATHS (default: the current folder)."""
    caches: list[Path] = []
    for name in paths or (".",):
        if not Path(name).is_dir():
            raise UsageFailure(f"{name}: no such directory")
        caches.extend(find_caches(Path(name)))
    if not caches:
        click.echo(f"No {CACHE_DIR} found.")
        return
    import shutil

    failed = False
    for cache in caches:
        files = sum(1 for f in cache.rglob("*") if f.is_file())
        try:
            shutil.rmtree(cache)
        except OSError as exc:
            click.echo(f"fuselint: error: {cache}: cannot remove: {exc.strerror or exc}", err=True)
            failed = True
            continue
        click.echo(f"Removed {cache} ({files} file{'s' if files != 1 else ''})")
    if failed:
        sys.exit(2)


def find_caches(top: Path) -> list[Path]:
    """Every cache folder at or under `top`, sorted; links are not followed (a link to another
    project's cache is not ours to empty)."""
    if top.name == CACHE_DIR and not top.is_symlink():
        return [top]
    found = []
    for root, dirs, _files in os.walk(top):
        if CACHE_DIR in dirs and not (Path(root) / CACHE_DIR).is_symlink():
            found.append(Path(root) / CACHE_DIR)
        dirs[:] = sorted(d for d in dirs if d != CACHE_DIR)
    return sorted(found)


@main.command()
@click.argument("code", required=False)
@click.option(
    "--test",
    "run_tests",
    is_flag=True,
    help="Prove the rule instead: its examples, its fix and its numeric identity. "
    "CODE may be a rule file or a folder of them; without it, every rule.",
)
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read extra rules from.")
def rule(code: str | None, run_tests: bool, config_path: str | None) -> None:
    """Explain one rule: what it does, why it blocks fusion, an example, what to use instead."""
    if run_tests:
        sys.exit(_test_rules(code, config_path))
    if code is None:
        raise UsageFailure("name a rule, e.g. `fuselint rule FL201`; `fuselint rules` lists them")
    catalog = _catalog(_settings(config_path, ()))
    found = catalog.by_name_or_code(code)
    if found is None:
        raise UsageFailure(f"unknown rule {code!r}; `fuselint rules` lists them")
    from fuselint.report.rules import explain

    click.echo(explain(found))


def _rules_to_test(target: str | None, config_path: str | None) -> tuple[Catalog, list]:
    """The catalog and the rules that `rule --test TARGET` names: a code, a rule file, a folder, or all."""
    config = _settings(config_path, ())
    if target is not None and (target.endswith(".toml") or Path(target).is_dir()):
        path = Path(target)
        if not path.exists():
            raise UsageFailure(f"{target}: no such rule file or folder")
        folder = path if path.is_dir() else path.parent
        catalog = _catalog(replace(config, extra_rules=(*config.extra_rules, str(folder))))
        wanted = {str(p.resolve()) for p in ([path] if path.is_file() else folder.glob("*.toml"))}
        return catalog, [r for r in catalog if str(Path(r.path).resolve()) in wanted]
    catalog = _catalog(config)
    if target is None:
        return catalog, list(catalog)
    found = catalog.by_name_or_code(target)
    if found is None:
        raise UsageFailure(f"unknown rule {target!r}; `fuselint rules` lists them")
    return catalog, [found]


def _test_rules(target: str | None, config_path: str | None) -> int:
    catalog, chosen = _rules_to_test(target, config_path)
    if not chosen:
        raise UsageFailure(f"{target}: no rule files there")
    if any(r.kind in ("pattern", "graph") for r in chosen):
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise UsageFailure("proving pattern and graph rules needs torch: pip install 'fuselint[torch]'")
    from fuselint.verify.rule_check import check_rule

    passed = failed = 0
    for r in chosen:
        for outcome in check_rule(r, catalog):
            mark = "ok  " if outcome.ok else "FAIL"
            click.echo(f"{mark} {outcome.code} {outcome.case}")
            if not outcome.ok:
                click.echo("     " + outcome.detail.replace("\n", "\n     "))
            passed, failed = passed + outcome.ok, failed + (not outcome.ok)
    click.echo(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


@main.command(name="rules")
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "json")), default="text")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read extra rules from.")
def rules_command(fmt: str, config_path: str | None) -> None:
    """List the rule catalog."""
    config = _settings(config_path, ())
    from fuselint.report.rules import rules_table

    click.echo(rules_table(_catalog(config), fmt, config), nl=False)


@contextlib.contextmanager
def _user_output_to_stderr():
    """While the user's model is imported, built and run, its prints go to stderr: stdout
    carries only fuselint's report, so `--format json` stays JSON."""
    sys.stdout.flush()
    with contextlib.redirect_stdout(sys.stderr):
        yield
    sys.stderr.flush()


def _need_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageFailure(f"{what} needs torch: pip install 'fuselint[torch]'") from None


def trace_entries(entries, device: str | None, train: bool, target: str) -> list:
    """The pipeline's trace, with its notes on stderr; a failed trace exits 2 (the full log on -v)."""
    try:
        return pipeline.trace_entries(
            entries, device, train, target, say=lambda line, _level: click.echo(line, err=True)
        )
    except CheckError as exc:
        context = click.get_current_context(silent=True)
        if exc.detail and context is not None and context.params.get("verbose"):
            click.echo(exc.detail.rstrip(), err=True)
        raise UsageFailure(str(exc)) from None


@main.command()
@click.option(
    "--entry", "entries", multiple=True, required=True, help="Model entry (file.py:factory); repeatable."
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Drawing to write: .svg, .html, .dot or .json (by suffix).",
)
@click.option(
    "--device", type=click.Choice(("meta", "cpu", "cuda")), default=None, help="Where to build entries."
)
@click.option("--train", is_flag=True, help="Trace in train mode, backward graphs included.")
@click.option("--target", default="H200", show_default=True, help="GPU whose numbers price the plan.")
def graph(entries, output, device, train, target) -> None:
    """Draw the graphs torch.compile builds for ENTRY, coloured by planned kernel."""
    suffix = Path(output).suffix.lower()
    if suffix not in (".svg", ".html", ".htm", ".dot", ".json"):
        raise UsageFailure(f"{output}: the output must end in .svg, .html, .dot or .json")
    try:
        # Before tracing, which takes a while: a folder we cannot make is an error now.
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageFailure(f"{output}: cannot write: {exc.strerror}") from None
    with _user_output_to_stderr():
        analyses = trace_entries(entries, device, train, target)
    from fuselint.fusion.model import kernel_numbers, plan_json
    from fuselint.graph import render

    graphs = [g for a in analyses for g in a.capture.graphs]
    breaks = [b for a in analyses for b in a.capture.breaks]
    plan = plan_json(analyses, _device_of(target)) if suffix == ".json" else None
    try:
        title = render.title_for([a.capture.entry for a in analyses])
        path = render.write(output, graphs, breaks, kernel_numbers(analyses), plan=plan, title=title)
    except OSError as exc:
        raise UsageFailure(f"{output}: cannot write: {exc.strerror}") from None
    for a in analyses:
        s = a.summary()
        click.echo(
            f"{s.model}: {s.graphs} graph(s), {s.breaks} break(s); launches "
            f"{s.eager.launches:.0f} eager -> {s.fused.launches:.0f} fused, "
            f"expected speedup {s.speedup:.2f}x on {s.device}"
        )
    click.echo(f"wrote {path}")


@main.command()
@click.option(
    "--entry", "entries", multiple=True, required=True, help="Model entry (file.py:factory); repeatable."
)
@click.option(
    "--backend",
    "backends",
    default="eager,fuselint,inductor",
    show_default=True,
    help="Comma-separated: eager, fuselint, inductor, inductor-max-autotune, cudagraphs, torchscript.",
)
@click.option("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when available).")
@click.option("--unsafe-fixes", is_flag=True, help="Build the fixed variant with unsafe fixes too.")
@click.option("--no-fixed", is_flag=True, help="Run only the original source.")
@click.option(
    "--dump-kernels", type=click.Path(file_okay=False), help="Write fuselint's generated kernels here."
)
@click.option("--target", default=None, help="GPU table for the prediction (default: from the device).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read settings from.")
@click.option("--verbose", "-v", is_flag=True, help="Show what the model printed while it was built and run.")
@_prove_options(default=True, what="Build the fixed variant from proven fixes only (re-traced first).")
def verify(
    entries,
    backends,
    device,
    unsafe_fixes,
    no_fixed,
    dump_kernels,
    target,
    fmt,
    config_path,
    verbose,
    prove,
    prove_timeout,
    prove_backends,
) -> None:
    """Prove it: original vs fixed source under eager, fuselint and Inductor; numerics and time."""
    _need_torch("verify")
    from fuselint.graph.entry import EntryError
    from fuselint.verify import run as verify_run
    from fuselint.verify.table import render_json, render_text

    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    unknown = [b for b in chosen if b not in verify_run.BACKENDS]
    if unknown:
        raise UsageFailure(f"unknown backend {unknown[0]!r}; choose from {', '.join(verify_run.BACKENDS)}")
    _check_verify_device(device)
    config = _settings(config_path, ())
    catalog = _catalog(config)
    verify_run.dump_dir(dump_kernels)
    table = _device_of(target) if target else _device_for_prediction(device)
    failed = False
    settings = _verify_prove_settings(device, prove_timeout, prove_backends)
    for spec in entries:
        proof = None
        if prove and not no_fixed:
            from fuselint.verify.prove import entry_sources, prove

            with _model_output_held(spec, verbose):  # it builds the model to find its package files
                files = entry_sources(spec, catalog, config, unsafe=unsafe_fixes)
            if files:
                proof = _prove(
                    NORMAL,
                    lambda say, spec=spec, files=files: prove([spec], files, settings, say),
                    lambda rejected, spec=spec: _never_run_in_packages(spec, rejected),
                )
        with _model_output_held(spec, verbose):
            try:
                result = verify_run.verify(
                    spec,
                    catalog,
                    config,
                    backends=chosen,
                    device=device,
                    unsafe=unsafe_fixes,
                    with_fixed=not no_fixed,
                    predict_on=table,
                    keep=proof.keeps if proof else None,
                )
            except EntryError as exc:
                raise UsageFailure(str(exc)) from None
        if proof is not None:
            result = replace(result, notes=(*result.notes, *_rejection_notes(spec, proof.rejected)))
        click.echo(render_json(result) if fmt == "json" else render_text(result), nl=False)
        failed |= not result.ok
    if failed:
        sys.exit(1)


def _never_run_in_packages(spec: str, rejected) -> list:
    """The rejected fixes in package files (outside the entry's folder) that the model never runs.
    A package file the model is made of (transformers' activations.py) holds many functions this
    model never runs; verify counts their fixes in one note instead of a line each."""
    from fuselint.verify.prove import NEVER_RUNS

    folder = Path(spec.rpartition(":")[0]).resolve().parent
    return [
        r
        for r in rejected
        if not Path(r.unit.path).resolve().is_relative_to(folder) and r.reason.startswith(NEVER_RUNS)
    ]


def _rejection_notes(spec: str, rejected) -> list[str]:
    """verify's notes for the fixes its proof rejected: a line each, but one counted note for
    those in package code the model never runs."""
    from fuselint.verify.variants import never_run_note, package_root

    def shown(path: str) -> str:  # from its top-level package, as verify's fixed files are shown
        top = package_root(Path(path).resolve())
        return Path(path).resolve().relative_to(top.parent).as_posix() if top else path

    unrun = _never_run_in_packages(spec, rejected)
    notes = [str(r) for r in rejected if r not in unrun]
    if unrun:
        notes.append(never_run_note(len(unrun), sorted({shown(r.unit.path) for r in unrun})))
    return notes


def _verify_prove_settings(device: str | None, timeout: float, backends: str):
    """verify proves its fixes where it measures them (cuda when there is one): an entry may
    build its model differently on a GPU (the suite's models: bf16 on CUDA)."""
    import torch

    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return _prove_settings(where, False, timeout, backends)


def _check_verify_device(device: str | None) -> None:
    """A device torch cannot use here is a usage error before anything is built."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise UsageFailure(f"--device {device!r}: not a device; use cpu, cuda or cuda:N") from None
    if parsed.type not in ("cpu", "cuda"):
        raise UsageFailure(f"--device {device!r}: verify runs on cpu or cuda")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            why = (
                "torch was built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            )
            raise UsageFailure(f"--device {device!r}: {why}; use --device cpu")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise UsageFailure(f"--device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")


@contextlib.contextmanager
def _model_output_held(spec: str, verbose: bool):
    """Hold what the model writes to stdout and stderr while verify builds and runs it (a
    chatty forward, run hundreds of times, would bury the report); then say how many lines it
    wrote, or, with --verbose, show them on stderr. stdout keeps only fuselint's report."""
    import io

    held = io.StringIO()
    sys.stdout.flush()
    try:
        with contextlib.redirect_stdout(held), contextlib.redirect_stderr(held):
            yield
    finally:
        text = held.getvalue()
        if text:
            lines = text.count("\n") + (not text.endswith("\n"))
            if verbose:
                click.echo(f"fuselint: {spec}: the model printed {lines} line(s):", err=True)
                click.echo(text, err=True, nl=not text.endswith("\n"))
            else:
                click.echo(
                    f"fuselint: {spec}: the model printed {lines} line(s); --verbose shows them", err=True
                )


def _device_for_prediction(device: str | None):
    """The device table closest to the GPU we run on (H200 when unknown)."""
    import torch

    from fuselint.fusion.devices import DEFAULT

    if (device or "cuda").startswith("cuda") and torch.cuda.is_available():
        name = torch.cuda.get_device_name().lower()
        for key in ("h200", "h100", "a100", "l4"):
            if key in name:
                return _device_of(key)
    return DEFAULT


def _device_of(target: str):
    """The GPU table named by --target; an unknown name is a usage error (exit 2)."""
    try:
        return pipeline.device_table(target)
    except CheckError as exc:
        raise UsageFailure(str(exc)) from None


def run() -> None:
    """Console-script entry: turn any unexpected failure into one line and exit 2."""
    try:
        main(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("fuselint: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for users
        if os.environ.get("FUSELINT_DEBUG"):
            raise
        click.echo(f"fuselint: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)
