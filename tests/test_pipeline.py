"""The check pipeline called directly: `run_check(CheckRequest) -> CheckResult`, no CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Applicability, Finding, Span
from fuselint.pipeline import CheckError, CheckRequest, carry_traced, check_text, run_check
from fuselint.report.gate import Thresholds
from fuselint.source.lint import discover

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MODELS = ("handwritten_gpt.py", "handwritten_mobilenet.py", "debug_prints.py")


def _tree(tmp_path: Path) -> Path:
    for name in MODELS:
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def _request(root: Path, **options) -> CheckRequest:
    config = Config(root=root, **options.pop("config", {}))
    files = tuple(discover([str(root)], config))
    return CheckRequest(files=files, catalog=load_catalog(), config=config, **options)


def _texts(root: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(root.glob("*.py"))}


def test_report_lists_findings_and_fails_the_gate(tmp_path):
    result = run_check(_request(_tree(tmp_path)))
    assert result.status == 1 and result.findings
    assert {Path(f.span.path).name for f in result.findings} == set(MODELS)
    assert list(result.findings) == sorted(result.findings, key=lambda f: f.sort_key)
    assert result.fixed == 0 and result.applied == () and result.diff == ""


def test_same_request_same_result(tmp_path):
    request = _request(_tree(tmp_path))
    assert run_check(request) == run_check(request)


def test_diff_writes_nothing(tmp_path):
    root = _tree(tmp_path)
    before = _texts(root)
    result = run_check(_request(root, action="diff", config={"unsafe_fixes": True}))
    assert result.status == 1 and result.diff.startswith("--- a/")
    assert "+++ b/" in result.diff and result.fixed > 0
    assert _texts(root) == before


def test_fix_writes_and_relints_the_fixed_files(tmp_path):
    root = _tree(tmp_path)
    before = _texts(root)
    # The fixtures' composites (FL2xx) have unsafe fixes: they change results by rounding.
    result = run_check(_request(root, config={"fix": True, "unsafe_fixes": True}))
    assert result.fixed > 0 and result.fixed == sum(len(done) for _path, done in result.applied)
    assert _texts(root) != before
    # What is reported after the fix is what a fresh check of the fixed files finds.
    fresh = run_check(_request(root, config={"unsafe_fixes": True}))
    assert result.findings == fresh.findings
    fixed_codes = {f.code for _path, done in result.applied for f in done}
    assert fixed_codes and not any(
        f.fix and f.fix.applicability == Applicability.SAFE for f in fresh.findings
    )


def test_baseline_hides_known_findings(tmp_path):
    root = _tree(tmp_path)
    baseline = str(tmp_path / "base.json")
    recorded = run_check(_request(root, baseline=baseline, update_baseline=True))
    assert recorded.baseline_written and recorded.status == 0 and Path(baseline).is_file()
    again = run_check(_request(root, baseline=baseline))
    assert again.status == 0 and again.findings == () and again.hidden == len(recorded.findings)
    assert again.gate_reason == "no new findings"


def test_unreadable_baseline_is_a_check_error(tmp_path):
    with pytest.raises(CheckError, match="cannot read baseline"):
        run_check(_request(_tree(tmp_path), baseline=str(tmp_path / "missing.json")))
    with pytest.raises(CheckError, match="needs --baseline"):
        run_check(_request(_tree(tmp_path), update_baseline=True))


def test_threshold_above_the_saving_passes(tmp_path):
    result = run_check(_request(_tree(tmp_path), thresholds=Thresholds(launches=1e9)))
    assert result.status == 0 and result.findings
    assert "below every --fail-on-gain threshold" in result.gate_reason


def test_add_noqa_silences_every_finding(tmp_path):
    root = _tree(tmp_path)
    first = run_check(_request(root, action="add-noqa"))
    assert first.status == 0 and first.noqa_added > 0
    assert run_check(_request(root)).findings == ()


def test_entries_without_a_tracer_are_refused(tmp_path):
    with pytest.raises(CheckError):
        run_check(_request(_tree(tmp_path), entries=("m.py:entry",)))


def test_say_gets_the_verbose_line(tmp_path):
    heard = []
    run_check(_request(_tree(tmp_path)), say=lambda line, level: heard.append((level, line)))
    assert [level for level, _ in heard] == ["verbose"]
    assert heard[0][1].startswith(f"fuselint: checked {len(MODELS)} file(s) in ")


def _finding(path: str, line: int) -> Finding:
    return Finding("FL101", "break", Span(path, line, 0, line, 4))


def test_carry_moves_traced_findings_with_their_line_and_drops_rewritten_ones(tmp_path):
    path = str(tmp_path / "m.py")
    before = "a = 1\nb = x * sigmoid(x)\nprint(a)\n"
    after = "import f\na = 1\nb = silu(x)\nprint(a)\n"
    moved = carry_traced(
        [_finding(path, 1), _finding(path, 2), _finding(path, 3)], {path: before}, {path: after}
    )
    assert [f.span.line for f in moved] == [2, 4]
    assert carry_traced([_finding(str(tmp_path / "other.py"), 1)], {path: before}, {path: after}) == []


def test_pipeline_imports_no_torch_libcst_or_networkx():
    code = (
        "import sys, fuselint.pipeline, fuselint.report.rules\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'torch', 'libcst', 'networkx', 'triton'}\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_check_text_fixes_and_relints_a_text_not_on_disk():
    raw = (FIXTURES / "handwritten_mobilenet.py").read_bytes()
    linted = check_text("m.py", raw, load_catalog(), Config())
    assert linted.findings and linted.applied == () and linted.text == raw.decode()
    fixed = check_text("m.py", raw, load_catalog(), Config(fix=True, unsafe_fixes=True))
    assert fixed.applied and fixed.text != raw.decode() and not Path("m.py").exists()
    again = check_text("m.py", fixed.text.encode(), load_catalog(), Config(unsafe_fixes=True))
    assert fixed.findings == again.findings
    diff = check_text("m.py", raw, load_catalog(), Config(unsafe_fixes=True), diff=True)
    assert diff.changed and diff.diff.startswith("--- a/m.py")


def test_check_text_reports_undecodable_bytes_as_fl000():
    result = check_text("m.py", b"x = '\xff\xfe'\n", load_catalog(), Config(fix=True))
    assert [f.code for f in result.findings] == ["FL000"] and result.text is None


def test_fixes_in_worker_processes_write_what_one_process_writes(tmp_path, monkeypatch):
    """From FIX_POOL_FROM files to fix, `--fix` spreads the files over worker processes (fix12:
    a whole package's fixes, each file's rounds its own): the same texts and counts as one process."""
    import fuselint.source.lint as lint_module
    from fuselint.pipeline import FIX_POOL_FROM

    spread = []
    pooled = lint_module.fix_texts
    monkeypatch.setattr(lint_module, "fix_texts", lambda *a: spread.append(len(a[0])) or pooled(*a))
    names = ["debug_prints.py", "handwritten_gpt.py", "detection_head.py", "early_exit.py"]
    texts = {}
    for jobs in (1, 2):
        root = tmp_path / f"jobs{jobs}"
        root.mkdir()
        for i in range(FIX_POOL_FROM):
            shutil.copy(FIXTURES / names[i % len(names)], root / f"m{i}_{names[i % len(names)]}")
        result = run_check(_request(root, jobs=jobs, config={"fix": True, "unsafe_fixes": True}))
        texts[jobs] = (_texts(root), result.fixed, [f.span.line for f in result.findings])
    assert spread == [FIX_POOL_FROM]  # only the run with two jobs, every file
    assert texts[1] == texts[2]
    assert texts[1][1] > 0


def test_a_fix_does_not_call_torch_where_the_module_imports_it_only_for_type_checking(tmp_path):
    """FL103's guard writes `torch.compiler.is_compiling()` into a function: in a module that binds
    `torch` only under `if TYPE_CHECKING:` (transformers' `utils/generic.py`, `import_utils.py`) it
    would raise NameError when run, so the fixer keeps the file as it is."""
    text = (
        "from typing import TYPE_CHECKING\n\nimport torch.nn as nn\n\nif TYPE_CHECKING:\n    import torch\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n        print(x.shape)\n        return x * 2\n"
    )
    (tmp_path / "typed.py").write_text(text)
    (tmp_path / "bound.py").write_text(text.replace("if TYPE_CHECKING:", "if True:"))
    run_check(_request(tmp_path, jobs=1, config={"fix": True, "unsafe_fixes": True}))
    assert (tmp_path / "typed.py").read_text() == text
    assert "if not torch.compiler.is_compiling():" in (tmp_path / "bound.py").read_text()
