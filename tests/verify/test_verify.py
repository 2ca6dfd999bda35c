"""verify end to end on CPU: the fixed variant is built, matches eager, and is predicted."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fuselint.catalog import load_catalog
from fuselint.cli import main
from fuselint.config import Config
from fuselint.fusion.devices import H200
from fuselint.verify.run import verify
from fuselint.verify.table import render_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_fixed_variant_matches_eager_and_is_predicted_faster():
    result = verify(
        f"{FIXTURES / 'handwritten_llama.py'}:entry",
        load_catalog(),
        Config(),
        backends=("eager",),
        device="cpu",
        unsafe=True,
        predict_on=H200,
    )
    assert result.ok
    assert result.row("fixed", "eager") is not None
    assert [f.path for f in result.fixed_files] == ["handwritten_llama.py"]
    assert {"FL201", "FL205"} <= set(result.fixed_files[0].codes)
    predicted = {p.variant: p for p in result.predictions}
    assert predicted["fixed"].eager_launches < predicted["original"].eager_launches
    text = render_text(result)
    assert "predicted" in text and "all outputs match eager" in text


def test_conv_block_runs_channels_last_under_the_backend_and_matches_eager():
    result = verify(
        f"{FIXTURES / 'verify' / 'mbconv_block.py'}:entry",
        load_catalog(),
        Config(),
        backends=("eager", "fuselint"),
        device="cpu",
        unsafe=True,
        predict_on=H200,
    )
    assert result.ok, render_text(result)
    assert sorted(result.fixed_files[0].codes) == ["FL205", "FL206"]
    assert result.row("fixed", "fuselint") is not None and result.row("original", "fuselint") is not None


def test_unknown_backend_and_bad_entry_exit_two(tmp_path):
    runner = CliRunner()
    entry = f"{FIXTURES / 'handwritten_llama.py'}:entry"
    assert runner.invoke(main, ["verify", "--entry", entry, "--backend", "tvm"]).exit_code == 2
    assert runner.invoke(main, ["verify", "--entry", str(tmp_path / "x.py:f")]).exit_code == 2


def test_a_backend_failure_row_names_the_error_the_backend_raised():
    # dynamo's BackendCompilerFailed says "backend='inductor' raised:" and names the error on the next line
    from fuselint.verify.run import _one_line

    class BackendCompilerFailed(Exception):
        pass

    wrapped = BackendCompilerFailed(
        "backend='inductor' raised:\nCppCompileError: C++ compile error\n\nCommand:\ng++ x.cpp"
    )
    assert _one_line(wrapped) == (
        "BackendCompilerFailed: backend='inductor' raised: CppCompileError: C++ compile error"
    )
    assert _one_line(RuntimeError("one line\nmore detail")) == "RuntimeError: one line"
    assert _one_line(ValueError("")) == "ValueError"
