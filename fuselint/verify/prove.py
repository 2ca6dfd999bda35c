"""Proven fixes: a fix is written only after the fixed source was run and traced and held.

`fuselint check --fix --entry E` (and `verify --entry E`) hand their fixes here before anything
is written. Each trial runs the entry in a child process (`prove_child`) on a version of the
source where some fixes are applied; the files on disk are never touched (the child imports
the fixed text under the original file names). A set of fixes is kept only if, against the
last accepted state (at first the original source):

- the break sites went down, when the set holds a break fix (FL1xx), and did not go up otherwise;
- the outputs equal the original's for the same weights and inputs: exactly, unless the set
  holds a composite rewrite (FL2xx), which must agree within the tolerance that its rule's
  pattern proof uses (`pattern_proof.tolerance`: 1e-4 relative in float32);
- a second call with new inputs of the same shapes compiles no more graphs, and breaks at no
  new site, than the original's second call;
- every backend that compiled the original (fuselint, inductor) compiles it and matches eager.

Which entries a trial runs. The original's run records, per entry, the files it imports and
the functions it runs; a fix "reaches" the entries that run its function (or import its file,
for a fix outside any function). A trial runs only the entries its fixes reach, and an entry's
result is kept per "view" (the fixes under trial and accepted that reach it), so an entry that
a trial does not change is never run again. Fixes that share no entry are proven as separate
groups, each on the break sites of its own entries.

The trial tree, per group: the whole group first, with the backends; a group that fails is
split: when the failing entries are reached by only some of its fixes, those are the suspects
and the rest is tried alone (a suspect alone on a failing entry is rejected with its reason, as
that entry's run was its own trial); otherwise in halves (in source order), down to single
fixes, each then rejected with the reason its own trial gave. Trials below the whole group skip
the backends. Last, every entry that the kept fixes change runs once more on exactly the text
to be written, with the backends, where no such run is kept; an entry that fails sends the
fixes that reach it back to be proven with the backends (and rejected if it fails again). So
one bad fix does not veto the good ones, the order is deterministic, and the fixes finally
written are exactly a set that every entry it changes ran and held on.

A fix is a "unit": the findings of one rule on one (stripped) source line of one file, the key
that survives the line moving between fixing rounds.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fuselint.findings import Finding, display_path
from fuselint.source.fixer import allowed, fix_text

BACKENDS = ("fuselint", "inductor")
DEFAULT_TIMEOUT = 600.0
FUSELINT_PARENT = str(Path(__file__).resolve().parents[2])

Key = tuple[str, str, str]  # (resolved path, code, stripped source line)


def unit_key(finding: Finding) -> Key:
    return (str(Path(finding.span.path).resolve()), finding.code, finding.source_line)


@dataclass(frozen=True, order=True)
class FixUnit:
    """The fixes of one rule on one source line of one file: what is kept or rejected as one."""

    path: str
    line: int
    code: str
    source_line: str
    # The qualified name of the function the fix is in ("" at module level), as Python
    # names its code object: what the entry must run for the fix to be proven.
    function: str = ""

    @property
    def key(self) -> Key:
        return (str(Path(self.path).resolve()), self.code, self.source_line)

    @property
    def break_fix(self) -> bool:
        return self.code.startswith("FL1")

    @property
    def composite(self) -> bool:
        return self.code.startswith("FL2")


NEVER_RUNS = "the entry never runs"  # how a rejection of a fix in a function no entry runs begins


@dataclass(frozen=True)
class Rejection:
    unit: FixUnit
    reason: str

    def __str__(self) -> str:
        u = self.unit
        return f"fix rejected: {display_path(u.path)}:{u.line} {u.code}: {self.reason}"


@dataclass(frozen=True)
class Proof:
    accepted: tuple[FixUnit, ...]
    rejected: tuple[Rejection, ...]
    trials: int
    sites_before: int
    sites_after: int
    seconds: float
    notes: tuple[str, ...] = ()
    runs: int = 0  # runs of single entries, the baseline's included

    @functools.cached_property
    def _accepted_keys(self) -> frozenset[Key]:
        return frozenset(u.key for u in self.accepted)

    def summary(self) -> str:
        return (
            f"fuselint: proved {len(self.accepted)} fix(es), rejected {len(self.rejected)}; break sites "
            f"{self.sites_before} -> {self.sites_after} ({self.trials} trials, {self.runs} entry runs, {self.seconds:.0f} s)"
        )

    def keeps(self, finding: Finding) -> bool:
        """Whether the fix of `finding` was proven (a finding of any later round keyed alike)."""
        return unit_key(finding) in self._accepted_keys

    def mark(self, findings: Sequence[Finding]) -> list[Finding]:
        """The findings, each whose fix was rejected carrying `details.fix_rejected`."""
        reasons = {r.unit.key: r.reason for r in self.rejected}
        out = []
        for f in findings:
            reason = reasons.get(unit_key(f))
            if reason is not None and f.fix is not None:
                f = replace(f, details=(*f.details, ("fix_rejected", reason)))
            out.append(f)
        return out


class ProveError(Exception):
    """Nothing can be proven (the original source does not run); one line for the user."""


@dataclass
class SourceFixes:
    """One file's text and the fixes that may apply to it; texts for any subset of its units."""

    path: str
    text: str
    lint: Callable[[str], list[Finding]]
    unsafe: bool
    line_length: int
    _texts: dict[frozenset, str] = field(default_factory=dict)

    def fixed(self, keys: frozenset | None = None) -> tuple[str, tuple[Finding, ...]]:
        """The text with the fixes whose unit key is in `keys` (all allowed fixes for None)."""

        def lint(text: str) -> list[Finding]:
            return only_kept(self.lint(text), None if keys is None else (lambda f: unit_key(f) in keys))

        result = fix_text(self.text, lint, unsafe=self.unsafe, line_length=self.line_length)
        return result.text, result.applied

    def text_for(self, keys: frozenset) -> str:
        mine = frozenset(k for k in keys if k[0] == str(Path(self.path).resolve()))
        if mine not in self._texts:
            self._texts[mine] = self.fixed(mine)[0] if mine else self.text
        return self._texts[mine]

    def units(self) -> list[FixUnit]:
        """One unit per (rule, source line) among the fixes a full fix run applies, at the
        line of the user's file where that text stands (where the finding was, if moved)."""
        _text, applied = self.fixed(None)
        first = {unit_key(f): f.span.line for f in self.lint(self.text) if allowed(f, self.unsafe)}
        lines = [line.strip() for line in self.text.splitlines()]
        functions = function_spans(self.text)
        found: dict[Key, FixUnit] = {}
        for f in applied:
            key = unit_key(f)
            if key in found:
                continue
            line = first.get(key) or next(
                (i + 1 for i, text in enumerate(lines) if text and text == f.source_line), f.span.line
            )
            function = max((s for s in functions if s[0] <= line <= s[1]), default=(0, 0, ""))[2]
            found[key] = FixUnit(self.path, line, f.code, f.source_line, function)
        return sorted(found.values())


def function_spans(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function, as `co_qualname` names it."""
    return [(node.lineno, node.end_lineno or node.lineno, name) for node, name in _functions(text)]


def body_spans(text: str) -> list[tuple[int, int, str]]:
    """(first line of the body, last line, qualified name) of every function of `text`."""
    return [(node.body[0].lineno, node.end_lineno or node.lineno, name) for node, name in _functions(text)]


def _functions(text: str) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    found: list = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append((child, name))
                visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return found


@dataclass(frozen=True)
class TrialResult:
    """What one child said about one entry, and the failure that decides it, if any."""

    entry: str
    data: dict

    @property
    def sites(self) -> int:
        return len(self.data.get("sites", []))

    @property
    def failure(self) -> str:
        d = self.data
        if d.get("error") and d.get("stage") in ("timeout", "crash"):
            return d["error"]
        if d.get("error"):
            return f"the model fails with the fix ({d.get('stage', 'run')}): {d['error']}"
        problem = d.get("outputs", {}).get("problem")
        if problem:
            return f"outputs differ from the original's: {problem}"
        return ""


class Prover:
    """Runs the entries in child processes, one per entry per run, sources mapped to temporary files."""

    def __init__(
        self,
        entries: Sequence[str],
        files: Sequence[SourceFixes],
        *,
        device: str | None,
        train: bool,
        timeout: float,
        backends: Sequence[str],
        work: Path,
        say: Callable[[str], None],
    ) -> None:
        self.entries, self.files = list(entries), list(files)
        self.device, self.train, self.timeout, self.backends = device, train, timeout, tuple(backends)
        self.work, self.say = work, say
        self.count = 0

    def baseline(self) -> list[TrialResult]:
        """Every entry on the original source, the backends included; saves what later runs compare with."""
        return [self._run(n, frozenset(), full=True, baseline=True) for n in range(len(self.entries))]

    def run(
        self,
        entry: str,
        keys: frozenset,
        *,
        full: bool,
        exact: bool = True,
        max_sites: int | None = None,
        max_second_graphs: int | None = None,
    ) -> TrialResult:
        """One run of `entry` on the source with the fixes in `keys`; the backends only when
        `full`. Above `max_sites` break sites, or `max_second_graphs` graphs compiled by the
        second call, the run is lost anyway and the child skips the backends."""
        n = self.entries.index(entry)
        return self._run(n, keys, full=full, exact=exact, max_sites=max_sites, max_second=max_second_graphs)

    def _run(
        self,
        n: int,
        keys: frozenset,
        *,
        full: bool,
        baseline: bool = False,
        exact: bool = True,
        max_sites: int | None = None,
        max_second: int | None = None,
    ) -> TrialResult:
        self.count += 1
        folder = self.work / f"run{self.count}"
        folder.mkdir()
        sources = {}
        for i, source in enumerate(self.files):
            path = folder / f"source{i}.py"
            path.write_text(source.text_for(keys), encoding="utf-8")
            sources[str(Path(source.path).resolve())] = str(path)
        request = {
            "spec": self.entries[n],
            "sources": sources,
            "device": self.device,
            "train": self.train,
            "seed": 0,
            "backends": list(self.backends) if full else [],
            "exact": exact,
            "max_sites": max_sites,
            "max_second_graphs": max_second,
            "sys_path": [p for p in sys.path if p and os.path.isdir(p)],
        }
        request["save" if baseline else "reference"] = str(self.work / f"baseline{n}.pt")
        return TrialResult(self.entries[n], self._child(request, folder / "entry"))

    def _child(self, request: dict, stem: Path) -> dict:
        req, out = stem.with_suffix(".request.json"), stem.with_suffix(".result.json")
        req.write_text(json.dumps(request), encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (FUSELINT_PARENT, env.get("PYTHONPATH", "")) if p)
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        if str(request.get("device", "")).startswith("cuda"):
            # cuBLAS gives the same bits from run to run only with a fixed workspace (prove_child._deterministic)
            env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        try:
            done = subprocess.run(
                [sys.executable, "-m", "fuselint.verify.prove_child", str(req), str(out)],
                env=env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"the trial ran past its {self.timeout:.0f} s limit", "stage": "timeout"}
        if done.returncode != 0 or not out.is_file():
            tail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            return {"error": f"the trial process died: {tail[:200]}", "stage": "crash"}
        return json.loads(out.read_text(encoding="utf-8"))


def verdict(
    trial: list[TrialResult], state: list[TrialResult], baseline: list[TrialResult], group: Sequence[FixUnit]
) -> str:
    """'' when the trial holds against the accepted state and the original; else the reason.
    The backends are judged only where the trial ran them."""
    for result in trial:
        if result.failure:
            return result.failure
    before, after = sum(s.sites for s in state), sum(t.sites for t in trial)
    worse = any(t.sites > s.sites for t, s in zip(trial, state, strict=True))
    if any(u.break_fix for u in group):
        if after >= before or worse:
            return f"breaks did not go down ({before} -> {after} break sites)"
    elif after > before or worse:
        return f"breaks went up ({before} -> {after} break sites)"
    for t, b in zip(trial, baseline, strict=True):
        again, was = t.data.get("second"), b.data.get("second")
        if again is not None and was is not None:
            if again["graphs"] > was["graphs"]:
                extra = again["graphs"] - was["graphs"]
                return f"recompiles on new inputs of the same shapes ({extra} more graph(s) compiled)"
            old = {(s[0], s[2]) for s in was["sites"]}
            new = [s for s in again["sites"] if (s[0], s[2]) not in old]
            if new:
                return f"breaks anew on new inputs at {display_path(new[0][0])}:{new[0][1]} ({new[0][2]})"
        ran = t.data.get("backends", {})  # a trial below a group's first runs none
        for name, status in b.data.get("backends", {}).items():
            got = ran.get(name, "")
            if got and (not status or (status.startswith("mismatch") and got.startswith("error"))):
                return f"{name} backend: {got}"
    return ""


def reaches(result: TrialResult, unit: FixUnit) -> bool:
    """Whether the entry of `result` (the original's run) runs the code that `unit` changes: the
    function the fix is in, or the file it is in for a fix outside any function."""
    path = unit.key[0]
    if unit.function:
        return [path, unit.function] in result.data.get("ran", [])
    return path in result.data.get("loaded", [])


@dataclass(frozen=True)
class Run:
    """A run of one entry, kept for every later trial that shows the entry the same fixes."""

    result: TrialResult
    keys: frozenset  # the fixes applied in the files when it ran (those it reaches and others)
    full: bool  # the backends were asked for


class Search:
    """The trial tree over runs of single entries (see the module docstring).

    An entry runs only the fixes that reach it (`reaches`): its result depends on its "view",
    the accepted and tried fixes that reach it, so a run is kept per (entry, view) and a trial
    runs only the entries whose view it changes. Fixes that share no entry are proven apart,
    each group on its own entries' breaks. The last step runs every entry that a kept fix
    reaches once more, on exactly the text that will be written and with the backends, unless
    a run of that text is kept already: what the views leave out (a fix's import at the top of
    a file) is checked there, and a failure sends the fixes that reach the entry back to be
    proven on full runs."""

    def __init__(
        self,
        units: Sequence[FixUnit],
        baseline: Sequence[TrialResult],
        run: Callable[..., TrialResult],
        same_text: Callable[[str, frozenset, frozenset], bool],
        say: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.baseline = {b.entry: b for b in baseline}
        self.entries = [b.entry for b in baseline]
        self.reach = {u: frozenset(b.entry for b in baseline if reaches(b, u)) for u in units}
        self.run, self.same_text, self.say = run, same_text, say
        self.runs: dict[tuple[str, frozenset], Run] = {}
        self.accepted: list[FixUnit] = []
        self.rejected: list[Rejection] = []
        self.trials = 0
        self.count = 0  # entry runs started

    def prove(self, units: Sequence[FixUnit]) -> None:
        queue = [(group, True) for group in self.independent(units)]
        struck: set[FixUnit] = set()
        strict = False  # after a failed confirmation every trial runs the backends
        while True:
            while queue:
                group, full = queue.pop(0)
                queue[0:0] = [(g, strict) for g in self.attempt(group, full)]
            failed = self.confirm()
            if not failed:
                return
            blamed = {u: e for e in sorted(failed, reverse=True) for u in self.blame(e)}
            back = [u for u in self.accepted if u in blamed]
            self.accepted = [u for u in self.accepted if u not in blamed]
            again = []
            for u in back:
                if u in struck:  # it failed a confirmation after full runs already
                    self.rejected.append(Rejection(u, self._on(failed[blamed[u]], blamed[u])))
                else:
                    again.append(u)
            struck.update(back)
            strict = True
            queue = [(group, True) for group in self.independent(again)]

    def blame(self, entry: str) -> list[FixUnit]:
        """The kept fixes that can change what `entry` does: those that reach it, else (a change
        at the top of a file) every kept fix in a file it loads."""
        loaded = set(self.baseline[entry].data.get("loaded", []))
        return [u for u in self.accepted if entry in self.reach[u]] or [
            u for u in self.accepted if u.key[0] in loaded
        ]

    def independent(self, units: Sequence[FixUnit]) -> list[list[FixUnit]]:
        """The units in groups that share no entry (each in source order, by first unit)."""
        groups: list[list[FixUnit]] = []
        for u in sorted(units):
            joined = [g for g in groups if any(self.reach[v] & self.reach[u] for v in g)]
            merged = sorted([u, *(v for g in joined for v in g)])
            groups = [g for g in groups if g not in joined] + [merged]
        return sorted(groups)

    def view(self, entry: str, units: Sequence[FixUnit]) -> frozenset:
        return frozenset(u.key for u in units if entry in self.reach[u])

    def state(self, entry: str) -> TrialResult:
        """The entry's result with the accepted fixes."""
        view = self.view(entry, self.accepted)
        if not view:
            return self.baseline[entry]
        return self.result(entry, self.accepted, full=False, max_sites=None)

    def result(
        self, entry: str, units: Sequence[FixUnit], *, full: bool, max_sites: int | None
    ) -> TrialResult:
        """The entry's result with `units` applied: a kept run of the same view, or a new run."""
        view = self.view(entry, units)
        kept = self.runs.get((entry, view))
        if kept is not None and (kept.full or not full):
            return kept.result
        return self._run(entry, view, units, full=full, max_sites=max_sites)

    def _run(
        self, entry: str, view: frozenset, units: Sequence[FixUnit], *, full: bool, max_sites: int | None
    ) -> TrialResult:
        keys = frozenset(u.key for u in units)
        self.count += 1
        result = self.run(
            entry,
            keys,
            full=full,
            exact=not any(u.composite for u in units if entry in self.reach[u]),
            max_sites=max_sites,
            max_second_graphs=(self.baseline[entry].data.get("second") or {}).get("graphs"),
        )
        self.runs[(entry, view)] = Run(result, keys, full)
        return result

    def attempt(self, group: list[FixUnit], full: bool) -> list[list[FixUnit]]:
        """Try `group` on top of the accepted fixes; the groups to try next, at the front."""
        if len(group) == 1 and not self.reach[group[0]]:
            self.rejected.append(Rejection(group[0], "no entry runs it"))
            return []
        entries = sorted(set().union(*(self.reach[u] for u in group)))
        units = [*self.accepted, *group]
        before, after = frozenset(u.key for u in self.accepted), frozenset(u.key for u in units)
        if all(self.same_text(e, before, after) for e in entries):
            if len(group) == 1:
                self.rejected.append(Rejection(group[0], "it applies only together with a rejected fix"))
                return []
            return _halves(group)
        state = {e: self.state(e) for e in entries}
        self.trials += 1
        started = self.count
        trial = {e: self.result(e, units, full=full, max_sites=state[e].sites) for e in entries}
        rows = [(trial[e], state[e], self.baseline[e]) for e in entries]
        reason = verdict(*map(list, zip(*rows, strict=True)), group)
        failing = {
            e: why for e, (t, s, b) in zip(entries, rows, strict=True) if (why := verdict([t], [s], [b], ()))
        }
        if failing:
            entry = min(failing)
            reason = self._on(failing[entry], entry)
        elif reason:
            reason = self._on(reason, *entries)
        took = sum(trial[e].data.get("seconds", 0) for e in entries)
        outcome = "kept" if not reason else f"not kept: {reason}"
        self.say(
            f"fuselint: trial {self.trials} ({len(group)} fix(es), {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, "
            f"{self.count - started} run(s), {took:.0f} s): {outcome}"
        )
        if not reason:
            self.accepted.extend(group)
            return []
        if len(group) == 1:
            self.rejected.append(Rejection(group[0], reason))
            return []
        suspects = [u for u in group if self.reach[u] & failing.keys()]
        others = [u for u in group if u not in suspects]
        if not failing or not others:
            return _halves(group)
        if len(suspects) == 1:
            # The failing entry runs no other fix of the group: its run was this fix's own trial.
            self.rejected.append(Rejection(suspects[0], reason))
            return [others]
        return [others, suspects]

    def confirm(self) -> dict[str, str]:
        """Every entry a kept fix reaches, on the text to be written, with the backends: the
        entries that fail, with why."""
        final = frozenset(u.key for u in self.accepted)
        failed = {}
        for entry in self.entries:
            view = self.view(entry, self.accepted)
            if not view and self.same_text(entry, frozenset(), final):
                continue
            kept = self.runs.get((entry, view)) if view else None
            searched = kept.result if kept else self.baseline[entry]
            reused = bool(kept and kept.full and self.same_text(entry, kept.keys, final))
            result = (
                kept.result  # it ran this very text with the backends
                if reused
                else self._run(entry, view, self.accepted, full=True, max_sites=searched.sites)
            )
            why = verdict([result], [searched], [self.baseline[entry]], ())
            if not reused:
                self.say(f"fuselint: confirmed {entry} with every kept fix: {why or 'holds'}")
            if why:
                failed[entry] = why
        return failed

    def _on(self, reason: str, *entries: str) -> str:
        if len(self.entries) == 1:
            return reason
        return f"{reason} (entr{'y' if len(entries) == 1 else 'ies'} {', '.join(entries)})"


def prove_fixes(
    entries: Sequence[str],
    files: Sequence[SourceFixes],
    *,
    device: str | None = None,
    train: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    backends: Sequence[str] = BACKENDS,
    say: Callable[[str], None] = lambda _line: None,
) -> Proof:
    """Decide, fix by fix, which fixes of `files` the entries prove (see the module docstring)."""
    started = time.perf_counter()
    units = sorted(u for source in files for u in source.units())
    with tempfile.TemporaryDirectory(prefix="fuselint-prove-") as tmp:
        prover = Prover(
            entries,
            files,
            device=device,
            train=train,
            timeout=timeout,
            backends=backends,
            work=Path(tmp),
            say=say,
        )
        say(f"fuselint: proving {len(units)} fix(es) on {', '.join(entries)}")
        baseline = prover.baseline()
        for b in baseline:
            if b.data.get("error"):
                raise ProveError(f"entry {b.entry!r}: the original source fails: {b.data['error']}")
        loaded = {p for b in baseline for p in b.data.get("loaded", [])}
        ran = {(p, f) for b in baseline for p, f in b.data.get("ran", [])}
        rejected = [Rejection(u, why) for u in units if (why := _unproven(u, loaded, ran))]
        by_entry = {b.entry: b for b in baseline}

        def same_text(entry: str, a: frozenset, b: frozenset) -> bool:
            run = by_entry[entry].data
            for source in files:
                path = str(Path(source.path).resolve())
                if path in run.get("loaded", []):
                    ran = {f for p, f in run.get("ran", []) if p == path}
                    if not same_for(source.text_for(a), source.text_for(b), ran):
                        return False
            return True

        search = Search(units, baseline, prover.run, same_text, say)
        search.prove([u for u in units if not _unproven(u, loaded, ran)])
        rejected += search.rejected
        accepted = search.accepted
        notes = tuple(f"{b.entry}: {b.data['note']}" for b in baseline if b.data.get("note"))
        kept = frozenset(u.key for u in accepted)
        written = {s.path: (s.text, s.text_for(kept)) for s in files}
        rejected = [replace(r, unit=_moved(r.unit, *written[r.unit.path])) for r in rejected]
        return Proof(
            accepted=tuple(sorted(accepted)),
            rejected=tuple(sorted(rejected, key=lambda r: r.unit)),
            trials=search.trials,
            sites_before=sum(b.sites for b in baseline),
            sites_after=sum(search.state(e).sites for e in search.entries),
            seconds=time.perf_counter() - started,
            notes=notes,
            runs=prover.count,
        )


def same_for(old: str, new: str, ran: set[str]) -> bool:
    """Whether code that runs only the functions `ran` (qualified names) sees `old` and `new`
    alike: every line they differ in lies inside the body of a function that never ran, the
    innermost function around it (an outer one may have run at import, which `ran` misses)."""
    if old == new:
        return True
    bodies = body_spans(old)
    a, b = old.splitlines(), new.splitlines()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # Lines i1+1..i2 replaced or deleted, or new lines inserted between lines i1 and i1+1.
        first, last = (i1 + 1, i2) if tag != "insert" else (i1, i1 + 1)
        around = [(start, name) for start, end, name in bodies if start <= first and last <= end]
        if not around or max(around)[1] in ran:
            return False
    return True


def _unproven(unit: FixUnit, loaded: set[str], ran: set[tuple[str, str]]) -> str:
    """Why no trial can prove the unit (the entry never reaches its code), or ''."""
    path = unit.key[0]
    if path not in loaded:
        return "the entry never imports this file: nothing proves the fix (--no-prove applies it)"
    if unit.function and (path, unit.function) not in ran:
        return f"{NEVER_RUNS} {unit.function}(): nothing proves the fix (--no-prove applies it)"
    return ""


def _moved(unit: FixUnit, before: str, after: str) -> FixUnit:
    """The unit at its line in the text that will be written (the accepted fixes move lines)."""
    if before == after:
        return unit
    old, new = before.splitlines(), after.splitlines()
    blocks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
    line_map = {a + k + 1: b + k + 1 for a, b, size in blocks for k in range(size)}
    return replace(unit, line=line_map.get(unit.line, unit.line))


def _halves(group: list[FixUnit]) -> list[list[FixUnit]]:
    middle = len(group) // 2
    return [group[:middle], group[middle:]]


def fixable_sources(
    findings: Sequence[Finding],
    lint: Callable[[str, str], list[Finding]],
    read: Callable[[str], str | None],
    *,
    unsafe: bool,
    line_length: Callable[[str], int],
) -> list[SourceFixes]:
    """The files with a fix that `--fix` would apply, as `check --fix` picks them."""
    paths = sorted({f.span.path for f in findings if allowed(f, unsafe)})
    out = []
    for path in paths:
        text = read(path)
        if text is not None:
            out.append(SourceFixes(path, text, lambda t, p=path: lint(p, t), unsafe, line_length(path)))
    return out


def only_kept(findings: list[Finding], keep: Callable[[Finding], bool] | None) -> list[Finding]:
    """The findings, the fix of each that `keep` refuses taken away (None keeps every fix)."""
    if keep is None:
        return findings
    return [f if f.fix is None or keep(f) else replace(f, fix=None) for f in findings]


def entry_sources(spec: str, catalog, config, *, unsafe: bool) -> list[SourceFixes]:
    """The fixable files of an entry's folder and of the installed packages its model's classes
    come from (the entry is built once to find them): what `verify` builds its fixed variant from."""
    from fuselint.source.fixer import line_length_for
    from fuselint.source.lint import discover, lint_text, read_source

    target = spec.rpartition(":")[0]
    if Path(target).suffix != ".py":
        return []
    folder = Path(target).resolve().parent
    files = [*discover([str(folder)], config), *_package_files_of(spec, folder)]
    texts = {str(p): read_source(p)[0] for p in files}
    findings = [f for p, t in texts.items() if t is not None for f in lint_text(p, t, catalog, config)]
    return fixable_sources(
        findings,
        lambda p, t: lint_text(p, t, catalog, config),
        texts.get,
        unsafe=unsafe,
        line_length=lambda p: line_length_for(Path(p)),
    )


def _package_files_of(spec: str, folder: Path) -> list[Path]:
    """The package files the entry's model runs (`variants.package_sources`, as verify finds
    them); none when the entry cannot be built here (verify reports that itself), only its
    classes' when its forward fails here."""
    import torch

    from fuselint.graph.entry import EntryError, build, load_entry
    from fuselint.verify.variants import package_files, package_sources

    try:
        built = build(load_entry(spec))
    except EntryError:
        return []
    try:
        with torch.no_grad():
            return list(package_sources(built, folder)[1])
    except Exception:  # e.g. inputs on another device than verify's: verify runs and reports the model
        return list(package_files(built.model, folder))


@dataclass(frozen=True)
class ProveSettings:
    """How to prove: where the entries run, in which mode, how long a trial may take, and
    the backends a fixed model must still compile with."""

    device: str = "cpu"
    train: bool = False
    timeout: float = DEFAULT_TIMEOUT
    backends: tuple[str, ...] = BACKENDS


def parse_backends(value: str) -> tuple[str, ...]:
    """`fuselint,inductor` -> the backends; ValueError names an unknown one."""
    chosen = tuple(b.strip() for b in value.split(",") if b.strip())
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}")
    return chosen


def prove_findings(
    entries: Sequence[str],
    findings: Sequence[Finding],
    catalog,
    config,
    settings: ProveSettings,
    say: Callable[[str], None],
    lint: Callable[[str, str], list[Finding]] | None = None,
) -> Proof | None:
    """Prove the fixes `check --fix` would apply to the files of `findings` (None: no fix).
    `lint(path, text)` finds a file's findings again as fixing goes; pass the tree's (with the
    roots reach gave the file), or a fix that only another file's entry reaches is lost."""
    from fuselint.source.fixer import line_length_for
    from fuselint.source.lint import lint_text, read_source

    files = fixable_sources(
        findings,
        lint or (lambda p, t: lint_text(p, t, catalog, config)),
        lambda p: read_source(Path(p))[0],
        unsafe=config.unsafe_fixes,
        line_length=lambda p: line_length_for(Path(p)),
    )
    return prove(entries, files, settings, say) if files else None


def prove(
    entries: Sequence[str], files: Sequence[SourceFixes], settings: ProveSettings, say: Callable[[str], None]
) -> Proof:
    """`prove_fixes` with `settings`."""
    return prove_fixes(
        entries,
        files,
        device=settings.device,
        train=settings.train,
        timeout=settings.timeout,
        backends=settings.backends,
        say=say,
    )
