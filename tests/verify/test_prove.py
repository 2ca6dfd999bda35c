"""Proven fixes: `check --fix --entry` keeps a fix only when re-running the fixed source holds."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from cli_runner import run as _run

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Applicability, Edit, Finding, Fix, Span
from fuselint.report.json_format import render_json
from fuselint.report.sarif import render_sarif
from fuselint.source.fixer import line_length_for
from fuselint.source.lint import lint_text
from fuselint.verify.prove import (
    FixUnit,
    Proof,
    Rejection,
    Search,
    SourceFixes,
    TrialResult,
    _unproven,
    function_spans,
    only_kept,
    same_for,
    verdict,
)
from fuselint.verify.prove_child import compare_outputs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "prove"
CATALOG = load_catalog(())
CONFIG = Config()


def _sources(path: Path) -> SourceFixes:
    return SourceFixes(
        str(path),
        path.read_text(),
        lambda t: lint_text(str(path), t, CATALOG, CONFIG),
        unsafe=True,
        line_length=line_length_for(path),
    )


def _trial(sites: int, *, graphs: int = 0, second_sites=(), backends=None, **extra) -> TrialResult:
    data = {
        "sites": [["m.py", n, "gb0059", "print"] for n in range(sites)],
        "second": {"graphs": graphs, "sites": [list(s) for s in second_sites]},
        "backends": backends if backends is not None else {"fuselint": "", "inductor": ""},
        **extra,
    }
    return TrialResult("m.py:entry", data)


BREAK_FIX = FixUnit("m.py", 3, "FL103", "print(x)")
COMPOSITE = FixUnit("m.py", 4, "FL201", "y = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)")


def test_a_break_fix_must_lower_the_break_sites():
    base = [_trial(2)]
    assert verdict([_trial(1)], base, base, [BREAK_FIX]) == ""
    assert verdict([_trial(2)], base, base, [BREAK_FIX]) == "breaks did not go down (2 -> 2 break sites)"


def test_a_composite_rewrite_may_keep_the_breaks_but_not_add_one():
    base = [_trial(2)]
    assert verdict([_trial(2)], base, base, [COMPOSITE]) == ""
    assert verdict([_trial(3)], base, base, [COMPOSITE]) == "breaks went up (2 -> 3 break sites)"


def test_a_recompile_or_a_new_break_on_new_inputs_rejects():
    base = [_trial(2)]
    recompiled = verdict([_trial(1, graphs=1)], base, base, [BREAK_FIX])
    assert recompiled == "recompiles on new inputs of the same shapes (1 more graph(s) compiled)"
    anew = verdict([_trial(1, second_sites=[("m.py", 9, "gb0170", "branch")])], base, base, [BREAK_FIX])
    assert anew.startswith("breaks anew on new inputs at m.py:9 (gb0170)")


def test_a_backend_that_compiled_the_original_must_compile_the_fix():
    base = [_trial(2)]
    broken = _trial(1, backends={"fuselint": "", "inductor": "error: CppCompileError: boom"})
    assert verdict([broken], base, base, [BREAK_FIX]) == "inductor backend: error: CppCompileError: boom"
    # What failed on the original already is not held against the fix.
    base_fails = [_trial(2, backends={"fuselint": "", "inductor": "error: CppCompileError: boom"})]
    assert verdict([broken], base_fails, base_fails, [BREAK_FIX]) == ""
    # A trial below a group's first runs no backend: nothing to judge them by.
    assert verdict([_trial(1, backends={})], base, base, [BREAK_FIX]) == ""


def test_a_failing_or_differing_trial_says_why():
    base = [_trial(2)]
    crashed = TrialResult("m.py:entry", {"error": "NameError: name 'y' is not defined", "stage": "eager"})
    assert verdict([crashed], base, base, [BREAK_FIX]).startswith(
        "the model fails with the fix (eager): NameError"
    )
    differs = _trial(1, outputs={"problem": "out: max abs diff 0.5"})
    assert (
        verdict([differs], base, base, [BREAK_FIX])
        == "outputs differ from the original's: out: max abs diff 0.5"
    )


def test_break_fixes_compare_exactly_composites_within_the_pattern_proof_tolerance():
    want = [("out", torch.ones(4))]
    close = [("out", torch.ones(4) + 2**-20)]
    assert compare_outputs(close, want, exact=True)[0].startswith("out: max abs diff 9.54e-07")
    assert compare_outputs(close, want, exact=False)[0] == ""
    far = [("out", torch.ones(4) * 1.01)]
    assert compare_outputs(far, want, exact=False)[0].startswith("out: relative error")
    nan = [("out", torch.tensor([1.0, float("nan"), 1.0, 1.0]))]
    assert "NaN" in compare_outputs(nan, want, exact=False)[0]


def test_units_are_one_rule_on_one_line_at_the_users_line():
    units = _sources(FIXTURES / "shortcut_and_print.py").units()
    text = (FIXTURES / "shortcut_and_print.py").read_text().splitlines()
    assert [(u.code, text[u.line - 1].strip()) for u in units] == [
        ("FL103", 'print("forward", x.shape)'),
        ("FL102", "if not mask.any():"),
    ]
    assert [u.break_fix for u in units] == [True, True]
    assert {u.function for u in units} == {"Shortcut.forward"}


def test_function_names_match_pythons_qualified_names():
    text = "class A:\n    def f(self):\n        def g():\n            return 1\n        return g\n\n\ndef h():\n    pass\n"
    namespace: dict = {}
    exec(compile(text, "m.py", "exec"), namespace)
    spans = function_spans(text)
    assert [name for _, _, name in spans] == ["A.f", "A.f.<locals>.g", "h"]
    code = namespace["A"].f.__code__
    assert code.co_qualname == "A.f" and namespace["A"]().f().__code__.co_qualname == "A.f.<locals>.g"


def test_a_fix_the_entry_never_reaches_is_not_proven():
    unit = FixUnit("/m.py", 3, "FL103", "print(x)", "Model.helper")
    assert _unproven(unit, {"/m.py"}, {("/m.py", "Model.helper")}) == ""
    assert _unproven(unit, {"/m.py"}, {("/m.py", "Model.forward")}).startswith(
        "the entry never runs Model.helper(): nothing proves the fix"
    )
    assert _unproven(unit, set(), set()).startswith("the entry never imports this file")


def test_a_subset_of_fixes_applies_only_those():
    source = _sources(FIXTURES / "shortcut_and_print.py")
    printing, shortcut = source.units()
    only_print = source.text_for(frozenset({printing.key}))
    assert "is_compiling" in only_print and "        if not mask.any():" in only_print
    assert source.text_for(frozenset()) == source.text


def _finding(code: str, line: str, fixable: bool = True) -> Finding:
    fix = Fix(Applicability.UNSAFE, "fix", (Edit(1, 1, 1, 2, "x"),)) if fixable else None
    return Finding(code, "message", Span("m.py", 3, 1, 3, 5), fix=fix, source_line=line)


def test_rejected_fixes_carry_their_reason_in_json_and_sarif():
    unit = FixUnit("m.py", 3, "FL102", "if not mask.any():")
    proof = Proof((), (Rejection(unit, "outputs differ from the original's: out"),), 2, 2, 2, 1.0)
    findings = proof.mark([_finding("FL102", "if not mask.any():"), _finding("FL103", "print(x)")])
    assert str(proof.rejected[0]) == "fix rejected: m.py:3 FL102: outputs differ from the original's: out"
    rows = json.loads(render_json(findings, CATALOG))
    assert rows[0]["details"] == {"fix_rejected": "outputs differ from the original's: out"}
    assert rows[1]["details"] == {}
    sarif = json.loads(render_sarif(findings, CATALOG, Path.cwd()))
    properties = sarif["runs"][0]["results"][0]["properties"]
    assert properties["details"]["fix_rejected"] == "outputs differ from the original's: out"


def test_only_the_kept_fixes_stay_fixable():
    kept, dropped = _finding("FL103", "print(x)"), _finding("FL102", "if t:")
    out = only_kept([kept, dropped], lambda f: f.code == "FL103")
    assert out[0].fix is not None and out[1].fix is None
    assert only_kept([kept, dropped], None) == [kept, dropped]


@pytest.mark.slow
def test_check_keeps_the_good_fix_and_rejects_the_one_that_changes_outputs(tmp_path):
    shutil.copy(FIXTURES / "shortcut_and_print.py", tmp_path / "model.py")
    args = ["check", "--no-cache", "--fix", "--unsafe-fixes", "--format", "json"]
    result = _run([*args, "--entry", "model.py:entry", "model.py"], tmp_path)
    fixed = (tmp_path / "model.py").read_text()
    assert "if not torch.compiler.is_compiling():" in fixed  # the print fix: proven, written
    assert "        if not mask.any():" in fixed  # the shortcut fix: rejected, not written
    rejected = [line for line in result.stderr.splitlines() if line.startswith("fix rejected")]
    line = fixed.splitlines().index("        if not mask.any():") + 1
    assert len(rejected) == 1
    assert rejected[0].startswith(
        f"fix rejected: model.py:{line} FL102: outputs differ from the original's: out:"
    )
    rows = json.loads(result.stdout)
    marked = [r for r in rows if r["code"] == "FL102"]
    assert marked and marked[0]["details"]["fix_rejected"].startswith("outputs differ")
    assert result.exit_code == 1


@pytest.mark.slow
def test_verify_rejects_a_fix_that_recompiles_and_builds_no_fixed_variant(tmp_path):
    shutil.copy(FIXTURES / "recompile.py", tmp_path / "model.py")
    args = ["verify", "--device", "cpu", "--backend", "eager", "--prove-backends", "", "--format", "json"]
    result = _run([*args, "--unsafe-fixes", "--entry", "model.py:entry"], tmp_path)
    # (verify exits 1 here: the model counts its calls, so eager's repeated calls differ.)
    notes = json.loads(result.stdout)["notes"]
    assert (
        "fix rejected: model.py:22 FL103: recompiles on new inputs of the same shapes (1 more graph(s) compiled)"
        in notes
    )
    assert "every fix found was left out (the notes say why): only the original was run" in notes


def test_the_import_hook_finds_a_module_of_a_namespace_package(tmp_path, monkeypatch):
    from fuselint.verify.prove_child import FixedSources

    package = tmp_path / "pkg" / "sub"  # no __init__.py: namespace packages (fair-esm's esm.model)
    package.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (package / "leaf.py").write_text("VALUE = 'original'\n")
    finder = FixedSources({str((package / "leaf.py").resolve()): "VALUE = 'fixed'\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    for name in ("pkg", "pkg.sub", "pkg.sub.leaf"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # and gone again after the test
    assert importlib.import_module("pkg.sub.leaf").VALUE == "fixed"
    assert finder.loaded == {str((package / "leaf.py").resolve())}


def test_check_without_an_entry_fixes_unproven_and_runs_nothing(tmp_path):
    shutil.copy(FIXTURES / "shortcut_and_print.py", tmp_path / "model.py")
    result = _run(["check", "--no-cache", "--fix", "--unsafe-fixes", "model.py"], tmp_path)
    fixed = (tmp_path / "model.py").read_text()
    assert "is_compiling" in fixed and "        if not mask.any():" not in fixed  # both written, as before
    assert "proving" not in result.stderr and "fix rejected" not in result.stderr
    assert "forward" not in result.stdout  # the model's print never ran


def test_a_trial_that_hangs_is_killed_at_its_timeout_and_rejects(tmp_path):
    from fuselint.verify.prove import Prover

    (tmp_path / "model.py").write_text("import time\n\n\ndef entry():\n    time.sleep(60)\n")
    prover = Prover(
        [f"{tmp_path / 'model.py'}:entry"],
        [],
        device="cpu",
        train=False,
        timeout=3,
        backends=(),
        work=tmp_path,
        say=print,
    )
    (result,) = prover.baseline()
    assert result.failure == "the trial ran past its 3 s limit"


@pytest.mark.slow
def test_a_fix_that_only_another_files_entry_reaches_is_proven_and_written(tmp_path, monkeypatch):
    # The comprehension sits in a decorator's wrapper in capture.py; only model.py's forward, which
    # wears the decorator, reaches it. Proving lints capture.py again with the roots reach gave it.
    fixture = (
        Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "comprehension_frame.py"
    ).read_text()
    head, _, model = fixture.partition("class Encoder(nn.Module):")
    (tmp_path / "wrapped_pkg").mkdir()
    (tmp_path / "wrapped_pkg" / "__init__.py").write_text("")
    (tmp_path / "wrapped_pkg" / "capture.py").write_text(head.split('"""', 2)[2])
    (tmp_path / "wrapped_pkg" / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nfrom wrapped_pkg.capture import capture_outputs\n\n\n"
        "class Encoder(nn.Module):" + model
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))
    )
    args = ["check", "--no-cache", "--fix", "--unsafe-fixes", "--select", "FL108"]
    result = _run([*args, "--entry", "wrapped_pkg/model.py:entry", "wrapped_pkg"], tmp_path)
    assert "proved 1" in result.stderr, result.stderr + result.stdout
    assert "for k in tuple(RECORDABLE)}" in (tmp_path / "wrapped_pkg" / "capture.py").read_text()
    assert "proved 1 fix(es), rejected 0; break sites 2 -> 1" in result.stderr


# The search over single-entry runs, with a scripted runner: each unit removes one break site of
# the entries it reaches, unless the script says it changes their outputs or fails a backend.
def _unit(n: int) -> FixUnit:
    return FixUnit("/m.py", n, "FL103", f"print({n})", f"f{n}")


def _base(entry: str, runs: tuple[int, ...], sites: int) -> TrialResult:
    data = {
        "sites": [["/m.py", 100 + n, "gb0059", "print"] for n in range(sites)],
        "second": {"graphs": 0, "sites": []},
        "backends": {"fuselint": "", "inductor": ""},
        "loaded": ["/m.py"],
        "ran": [["/m.py", f"f{n}"] for n in runs],
    }
    return TrialResult(entry, data)


def _reached(base: TrialResult, keys) -> list:
    """The keys of `keys` whose unit sits in a function the entry ran (unit n's text is
    `print(n)`, in function f<n>)."""
    ran = {f for _, f in base.data["ran"]}
    return [k for k in keys if f"f{k[2][6:-1]}" in ran]


class _Script:
    def __init__(self, baseline, *, differs=(), backend_fails=(), useless=()):
        self.baseline = {b.entry: b for b in baseline}
        self.differs, self.backend_fails, self.useless = set(differs), set(backend_fails), set(useless)
        self.calls: list[tuple[str, tuple[int, ...], bool]] = []

    def run(self, entry, keys, *, full, exact, max_sites, max_second_graphs):
        base = self.baseline[entry]
        mine = sorted(int(k[2][6:-1]) for k in _reached(base, keys))
        self.calls.append((entry, tuple(mine), full))
        data = {
            "sites": base.data["sites"][: base.sites - len([n for n in mine if n not in self.useless])],
            "second": {"graphs": 0, "sites": []},
        }
        if any(n in self.differs or (entry, n) in self.differs for n in mine):
            data["outputs"] = {"problem": "out: max abs diff 1"}
        if full:
            bad = any(n in self.backend_fails for n in mine)
            data["backends"] = {"fuselint": "", "inductor": "error: boom" if bad else ""}
        return TrialResult(entry, data)


def _search(script: _Script, units) -> Search:
    def same_text(entry, a, b):  # only the fixes in functions it runs count
        base = script.baseline[entry]
        return set(_reached(base, a)) == set(_reached(base, b))

    search = Search(units, list(script.baseline.values()), script.run, same_text)
    search.prove(units)
    return search


def test_a_trial_runs_only_the_entries_its_fixes_reach_and_each_view_once():
    units = [_unit(1), _unit(2)]
    script = _Script([_base("a", (1,), 2), _base("b", (2,), 1), _base("c", (), 3)])
    search = _search(script, units)
    assert search.accepted == units and not search.rejected
    # Two independent groups, one whole trial each, with the backends; c is never run again.
    assert script.calls == [("a", (1,), True), ("b", (2,), True)]
    assert search.trials == 2


def test_a_useless_fix_is_rejected_on_its_own_entries_breaks_not_riding_on_another_group():
    units = [_unit(1), _unit(2)]
    script = _Script([_base("a", (1,), 2), _base("b", (2,), 1)], useless={2})
    search = _search(script, units)
    assert search.accepted == [units[0]]
    assert [(r.unit, r.reason) for r in search.rejected] == [
        (units[1], "breaks did not go down (1 -> 1 break sites) (entry b)")
    ]


def test_the_fix_alone_on_a_failing_entry_is_rejected_without_bisecting_the_group():
    # u1 reaches a and b, u2 reaches a and c: one group; c's outputs differ, and of the group only
    # u2 reaches c, so u2 is rejected at once and u1 tried alone: b's run with u1 is reused.
    units = [_unit(1), _unit(2)]
    script = _Script([_base("a", (1, 2), 3), _base("b", (1,), 1), _base("c", (2,), 1)], differs={("c", 2)})
    search = _search(script, units)
    assert search.accepted == [units[0]]
    assert search.rejected[0].unit == units[1]
    assert search.rejected[0].reason.startswith("outputs differ from the original's: out: max abs diff 1")
    assert search.rejected[0].reason.endswith("(entry c)")
    assert script.calls == [
        ("a", (1, 2), True),
        ("b", (1,), True),
        ("c", (2,), True),
        ("a", (1,), False),
        ("a", (1,), True),  # kept without the backends: confirmed with them
    ]
    assert search.trials == 2


def test_fixes_kept_without_the_backends_are_confirmed_with_them_and_sent_back_on_failure():
    # u1..u4 reach a; u2 changes the outputs, so the group is bisected without the backends;
    # u3 makes inductor fail, which only the confirmation sees; proven again with the backends,
    # u3 is rejected for it and the rest kept.
    units = [_unit(n) for n in (1, 2, 3, 4)]
    script = _Script([_base("a", (1, 2, 3, 4), 5)], differs={2}, backend_fails={3})
    search = _search(script, units)
    assert search.accepted == [units[0], units[3]]
    assert {r.unit: r.reason for r in search.rejected} == {
        units[1]: "outputs differ from the original's: out: max abs diff 1",
        units[2]: "inductor backend: error: boom",
    }
    final = [c for c in script.calls if c[1] == (1, 4)]
    assert final and final[-1][2] is True  # the text written ran with the backends


def test_a_change_only_in_functions_an_entry_never_runs_leaves_its_text_the_same():
    text = "import torch\n\n\nclass M:\n    def f(self, x):\n        return x\n\n    def g(self, x):\n        return x + 1\n"
    in_g = text.replace("        return x + 1\n", "        y = x + 1\n        return y\n")
    assert same_for(text, in_g, {"M.f"})
    assert not same_for(text, in_g, {"M.f", "M.g"})
    at_top = "import math\n" + in_g  # an import the fix adds runs for every entry that loads the file
    assert not same_for(text, at_top, {"M.f"})


def test_a_change_inside_a_run_function_nested_in_one_that_ran_at_import_counts():
    # The decorator ran at import (not recorded); its wrapper ran: the wrapper's line counts.
    text = "def deco(f):\n    def wrapper(x):\n        y = x\n        return f(y)\n\n    return wrapper\n"
    fixed = text.replace("        y = x\n", "        y = tuple(x)\n")
    assert not same_for(text, fixed, {"deco.<locals>.wrapper"})
    assert same_for(text, fixed, {"deco"})


def test_a_stateful_entry_is_reset_before_every_call_the_prover_makes():
    # a scheduler step that alternates halves (flow-match Heun): without its `reset_state`, the
    # backend check would compare the second half of a step against eager's first
    from fuselint.verify.prove_child import _call

    class Alternating(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = True

        def forward(self, x):
            out = x * 2 if self.first else x * 3
            self.first = not self.first
            return out

    class Resettable(Alternating):
        def reset_state(self):
            self.first = True

    x = torch.ones(2)
    plain, resettable = Alternating(), Resettable()
    assert not torch.equal(_call(plain, (x,), {}, False, 0), _call(plain, (x,), {}, False, 0))
    assert torch.equal(_call(resettable, (x,), {}, False, 0), _call(resettable, (x,), {}, False, 0))
    compiled = torch.compile(resettable, backend="eager")  # the prover calls compiled modules too
    assert torch.equal(_call(compiled, (x,), {}, False, 0), _call(compiled, (x,), {}, False, 0))


def test_a_trial_on_a_gpu_runs_the_deterministic_algorithms(monkeypatch, tmp_path):
    # Trials compare outputs bit for bit: on CUDA the child asks for the deterministic algorithms
    # and its cuBLAS for a fixed workspace; on the CPU (deterministic already) nothing changes.
    import subprocess

    from fuselint.verify import prove_child
    from fuselint.verify.prove import Prover

    envs = []

    def fake_run(cmd, env, **_kw):
        envs.append(env)
        return subprocess.CompletedProcess(cmd, 1, "", "no GPU here")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    for device in ("cuda", "cpu"):
        prover = Prover(
            ["e.py:f"], [], device=device, train=False, timeout=5, backends=(), work=tmp_path, say=print
        )
        prover._child({"device": device}, tmp_path / device)
    assert envs[0].get("CUBLAS_WORKSPACE_CONFIG") == ":4096:8" and "CUBLAS_WORKSPACE_CONFIG" not in envs[1]

    was = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    try:
        prove_child._deterministic("cpu")
        assert not torch.are_deterministic_algorithms_enabled()
        prove_child._deterministic("cuda:0")
        assert (
            torch.are_deterministic_algorithms_enabled()
            and torch.is_deterministic_algorithms_warn_only_enabled()
        )
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(was[0])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = was[1], was[2]
