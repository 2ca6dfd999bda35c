"""The `fuselint` command: parse arguments, call into the rooms, print, choose the exit code.

Exit codes: 0 no findings (or none that fail the gate), 1 findings, 2 the tool could not
do what was asked. Errors are one line on stderr, never a traceback (set
FUSELINT_DEBUG=1 to see one).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from fuselint import __version__
from fuselint.catalog import Catalog, CatalogError, load_catalog
from fuselint.config import Config, ConfigError, find_pyproject, load_config
from fuselint.findings import Finding, with_display_path
from fuselint.source.lint import (
    Cache,
    PathError,
    discover,
    lint_paths,
    lint_text,
    read_source,
    without_suppressed,
)

FORMATS = ("text", "json", "sarif", "github", "markdown")


class UsageFailure(click.ClickException):
    """A one-line error that exits with 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"fuselint: error: {self.message}", err=True)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip().upper() for value in values for v in value.split(",") if v.strip())


def _settings(config_path: str | None, paths: tuple[str, ...]) -> Config:
    try:
        if config_path:
            if not Path(config_path).is_file():
                raise UsageFailure(f"{config_path}: no such config file")
            return load_config(Path(config_path))
        start = Path(paths[0]) if paths and Path(paths[0]).exists() else Path.cwd()
        return load_config(find_pyproject(start))
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


def _catalog(config: Config) -> Catalog:
    try:
        return load_catalog(config.extra_rules)
    except CatalogError as exc:
        raise UsageFailure(str(exc)) from None


def _check_selectors(config: Config, catalog: Catalog) -> None:
    """A selector that matches no rule is a typo (`FL21O`): fail, as ruff does, instead of
    silently selecting nothing and letting CI pass."""
    codes = [r.code for r in catalog]
    named = [*config.select, *config.ignore, *(c for _glob, cs in config.per_file_ignores for c in cs)]
    for selector in named:
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            raise UsageFailure(f"unknown rule selector {selector!r}; `fuselint rules` lists the codes")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fuselint")
def main() -> None:
    """Find what stops PyTorch from fusing your model's operators, and fix it."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix/--no-fix", default=None, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply (and count) unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--select", multiple=True, help="Codes or prefixes to enable (comma-separated).")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable (comma-separated).")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option(
    "--force-exclude/--no-force-exclude",
    default=None,
    help="Apply the excludes to files named on the command line too (use in pre-commit).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the cache.")
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
    ignore,
    statistics,
    exit_zero,
    force_exclude,
    no_cache,
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
    target,
) -> None:
    """Lint PATHS (default: the current folder) for fusion blockers."""
    paths = paths or (".",)
    config = _settings(config_path, paths)
    if select:
        config = replace(config, select=_split(select))
    if ignore:
        config = replace(config, ignore=config.ignore + _split(ignore))
    if fix is not None:
        config = replace(config, fix=fix)
    if unsafe_fixes is not None:
        config = replace(config, unsafe_fixes=unsafe_fixes)
    if force_exclude is not None:
        config = replace(config, force_exclude=force_exclude)
    catalog = _catalog(config)
    _check_selectors(config, catalog)
    if statistics and fmt not in ("text", "json"):
        raise UsageFailure("--statistics works with --format text or json")
    try:
        files = discover(paths, config)
    except PathError as exc:
        raise UsageFailure(str(exc)) from None

    cache = None if no_cache else Cache.for_settings(config.root, catalog, config)
    findings = lint_paths(files, catalog, config, jobs=jobs, cache=cache)

    models: list[dict] = []
    traced: list[Finding] = []
    entries = entries or config.entries
    if entries:
        with _user_output_to_stderr():
            analyses = trace_entries(entries, device, train, target)
        from fuselint.graph.breaks import break_findings, merge_findings

        traced = [
            with_display_path(f)
            for a in analyses
            for f in (*break_findings(a.capture, a.break_gains), *a.findings)
        ]
        traced = without_suppressed(f for f in traced if config.enabled(f.code, f.span.path))
        findings = sorted(merge_findings(findings, traced), key=lambda f: f.sort_key)
        models = [a.summary() for a in analyses]

    fixed_count = 0
    unwritable: list[str] = []
    if diff or config.fix:
        fixed_count, changed, diffs, unwritable, before = _fix_files(
            findings, catalog, config, write=not diff
        )
        if diff:
            _emit("".join(diffs), output_file)
            if not exit_zero and diffs:
                sys.exit(1)
            return
        if changed:
            findings = [f for f in findings if f.span.path not in changed]
            for path in sorted(changed):
                findings.extend(lint_text(path, changed[path], catalog, config))
            carried = _carry_traced(traced, before, changed)
            if carried:
                from fuselint.graph.breaks import merge_findings

                findings = merge_findings(findings, carried)
            findings.sort(key=lambda f: f.sort_key)

    from fuselint.report.gate import (
        BaselineError,
        Thresholds,
        gate,
        load_baseline,
        new_findings,
        write_baseline,
    )

    if update_baseline:
        if not baseline:
            raise UsageFailure("--update-baseline needs --baseline FILE")
        try:
            write_baseline(baseline, findings, config.root)
        except BaselineError as exc:
            raise UsageFailure(str(exc)) from None
        n = len(findings)
        click.echo(f"fuselint: recorded {n} finding{'s' if n != 1 else ''} in {baseline}", err=True)
        return
    hidden = 0
    if baseline:
        try:
            known = load_baseline(baseline)
        except BaselineError as exc:
            raise UsageFailure(str(exc)) from None
        new = new_findings(findings, known, config.root)
        hidden, findings = len(findings) - len(new), new
    thresholds = Thresholds(fail_on_gain_launches, fail_on_gain_bytes, fail_on_gain_us)
    verdict = gate(findings, thresholds)

    _emit(_render(fmt, findings, catalog, config, statistics, show_source, fixed_count, models), output_file)
    if hidden or thresholds.any:
        shown = f" ({hidden} known in {baseline})" if hidden else ""
        click.echo(f"fuselint: {verdict.reason}{shown}", err=True)
    if unwritable:
        sys.exit(2)  # asked to fix, could not: not a pass, whatever --exit-zero says
    if verdict.exit_code and not exit_zero:
        sys.exit(verdict.exit_code)


def _carry_traced(traced: list[Finding], before: dict[str, str], after: dict[str, str]) -> list[Finding]:
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


def _fix_files(
    findings: list[Finding], catalog: Catalog, config: Config, *, write: bool
) -> tuple[int, dict[str, str], list[str], list[str], dict[str, str]]:
    """Fix every file that has an allowed fix; returns (fixes applied, new texts, diffs,
    files that could not be written, old texts of the changed files). A file that cannot be
    written is left as it was."""
    # libcst costs a quarter of a second to import: only runs that fix pay for it.
    from fuselint.source.fixer import allowed, fix_text, write_atomically

    paths = sorted({f.span.path for f in findings if allowed(f, config.unsafe_fixes)})
    total, changed, diffs, unwritable, before = 0, {}, [], [], {}
    for path in paths:
        text, encoding, error = read_source(Path(path))
        if error is not None:
            continue
        result = fix_text(
            text, lambda t, p=path: lint_text(p, t, catalog, config), unsafe=config.unsafe_fixes
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
        total += len(result.applied)
        changed[path] = result.text
        before[path] = text
        if not write:
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        text.splitlines(keepends=True),
                        result.text.splitlines(keepends=True),
                        fromfile=f"a/{path}",
                        tofile=f"b/{path}",
                    )
                )
            )
    return total, changed, diffs, unwritable, before


def _render(fmt, findings, catalog, config, statistics, show_source, fixed_count, models=()) -> str:
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
                source, _enc, _err = read_source(Path(path))
                sources[path] = source.splitlines() if source is not None else []
        return text.render_text(findings, sources, unsafe=config.unsafe_fixes, fixed=fixed_count)
    if fmt == "sarif":
        return sarif.render_sarif(findings, catalog, repository_root(config.root))
    if fmt == "github":
        return github.render_github(findings, catalog, repository_root(config.root))
    return markdown.render_markdown(findings, catalog, list(models) or None)


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


@main.command()
@click.argument("code")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read extra rules from.")
def rule(code: str, config_path: str | None) -> None:
    """Explain one rule: what it does, why it blocks fusion, an example, what to use instead."""
    catalog = _catalog(_settings(config_path, ()))
    found = catalog.by_name_or_code(code)
    if found is None:
        raise UsageFailure(f"unknown rule {code!r}; `fuselint rules` lists them")
    click.echo(explain(found))


def explain(r) -> str:
    fix = {
        "none": "This rule has no automatic fix.",
        "safe": "The fix is safe: it keeps behaviour for every input; `--fix` applies it.",
        "unsafe": "The fix is unsafe: it keeps behaviour only under the assumptions below; "
        "`--fix --unsafe-fixes` applies it.",
    }[r.fix]
    parts = [
        f"# {r.name} ({r.code})",
        "",
        f"Kind: {r.kind}",
        "",
        "## What it does",
        r.summary,
        "",
        "## Why it blocks fusion",
        r.why,
        "",
    ]
    if r.bad:
        parts += ["## Example", "```python", r.bad[0].strip("\n"), "```", ""]
    parts += ["## Use instead", r.use_instead, ""]
    example = r.fixed[0] if r.fixed else (r.good[0] if r.good else "")
    if example:
        parts += ["```python", example.strip("\n"), "```", ""]
    parts += ["## Fix safety", fix]
    if r.fix_notes:
        parts += ["", r.fix_notes]
    return "\n".join(parts) + "\n"


@main.command(name="rules")
@click.option("--format", "fmt", type=click.Choice(("text", "markdown", "json")), default="text")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read extra rules from.")
def rules_command(fmt: str, config_path: str | None) -> None:
    """List the rule catalog."""
    catalog = _catalog(_settings(config_path, ()))
    click.echo(rules_table(catalog, fmt), nl=False)


def rules_table(catalog: Catalog, fmt: str = "text") -> str:
    import json

    rows = list(catalog)
    if fmt == "json":
        return (
            json.dumps(
                [
                    {"code": r.code, "name": r.name, "kind": r.kind, "fix": r.fix, "summary": r.summary}
                    for r in rows
                ],
                indent=2,
            )
            + "\n"
        )
    if fmt == "markdown":
        lines = ["| Code | Name | Kind | Fix | What it flags |", "| --- | --- | --- | --- | --- |"]
        escaped = [r.summary.replace("|", "\\|") for r in rows]
        lines += [
            f"| {r.code} | {r.name} | {r.kind} | {r.fix} | {s} |" for r, s in zip(rows, escaped, strict=True)
        ]
        return "\n".join(lines) + "\n"
    width = max((len(r.name) for r in rows), default=4)
    lines = [f"{'CODE':<6}  {'NAME':<{width}}  {'KIND':<7}  {'FIX':<6}  SUMMARY"]
    lines += [f"{r.code:<6}  {r.name:<{width}}  {r.kind:<7}  {r.fix:<6}  {r.summary}" for r in rows]
    return "\n".join(lines) + "\n"


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
    """Capture and plan every entry (a progress bar on a terminal); EntryError exits 2."""
    _need_torch("tracing an entry")
    from fuselint.fusion.model import analyse
    from fuselint.graph.capture import capture_entries
    from fuselint.graph.entry import EntryError

    table = _device_of(target)
    try:
        captures = capture_entries(list(entries), device=device, train=train)
    except EntryError as exc:
        raise UsageFailure(str(exc)) from None
    for cap in captures:
        # A partial trace is still useful, but the user must know it is partial.
        if cap.error:
            click.echo(f"fuselint: warning: {cap.entry}: the run stopped early ({cap.error})", err=True)
        for name in cap.unlowered:
            click.echo(
                f"fuselint: warning: {cap.entry}: could not lower {name} to ATen; not planned", err=True
            )
    analyses = [analyse(cap, table) for cap in captures]
    return analyses


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
            f"{s['model']}: {s['graphs']} graph(s), {s['breaks']} break(s); launches "
            f"{s['eager']['launches']:.0f} eager -> {s['fused']['launches']:.0f} fused, "
            f"expected speedup {s['speedup']:.2f}x on {s['device']}"
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
    help="Comma-separated: eager, fuselint, inductor, inductor-max-autotune, cudagraphs.",
)
@click.option("--device", default=None, help="cuda or cpu (default: cuda when available).")
@click.option("--unsafe-fixes", is_flag=True, help="Build the fixed variant with unsafe fixes too.")
@click.option("--no-fixed", is_flag=True, help="Run only the original source.")
@click.option(
    "--dump-kernels", type=click.Path(file_okay=False), help="Write fuselint's generated kernels here."
)
@click.option("--target", default=None, help="GPU table for the prediction (default: from the device).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text")
@click.option("--config", "config_path", type=click.Path(), help="pyproject.toml to read settings from.")
def verify(entries, backends, device, unsafe_fixes, no_fixed, dump_kernels, target, fmt, config_path) -> None:
    """Prove it: original vs fixed source under eager, fuselint and Inductor; numerics and time."""
    _need_torch("verify")
    from fuselint.graph.entry import EntryError
    from fuselint.verify import run as verify_run
    from fuselint.verify.table import render_json, render_text

    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    unknown = [b for b in chosen if b not in verify_run.BACKENDS]
    if unknown:
        raise UsageFailure(f"unknown backend {unknown[0]!r}; choose from {', '.join(verify_run.BACKENDS)}")
    config = _settings(config_path, ())
    catalog = _catalog(config)
    verify_run.dump_dir(dump_kernels)
    table = _device_of(target) if target else _device_for_prediction(device)
    failed = False
    for spec in entries:
        try:
            with _user_output_to_stderr():
                result = verify_run.verify(
                    spec,
                    catalog,
                    config,
                    backends=chosen,
                    device=device,
                    unsafe=unsafe_fixes,
                    with_fixed=not no_fixed,
                    predict_on=table,
                )
        except EntryError as exc:
            raise UsageFailure(str(exc)) from None
        click.echo(render_json(result) if fmt == "json" else render_text(result), nl=False)
        failed |= not result.ok
    if failed:
        sys.exit(1)


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
    from fuselint.fusion.devices import device as device_named

    try:
        return device_named(target)
    except KeyError as exc:
        raise UsageFailure(str(exc.args[0])) from None


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
