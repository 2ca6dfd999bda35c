"""`fuselint verify` as a user runs it: devices it cannot use, models that print, backends
that cannot take the model."""

from __future__ import annotations

import json
import re

import pytest
import torch
from cli_runner import run as _run

PRINTING_MODEL = """\
import torch
from torch import nn

print("importing the model file")


class Chatty(nn.Module):
    def forward(self, x):
        print("forward ran")
        return torch.relu(x) + 1


def entry():
    return Chatty(), (torch.randn(2, 4),)
"""


@pytest.fixture
def printing_model(tmp_path):
    (tmp_path / "chatty.py").write_text(PRINTING_MODEL)
    return "chatty.py:entry"


def test_cuda_without_cuda_is_a_one_line_usage_error(tmp_path, printing_model, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = _run(["verify", "--device", "cuda", "--entry", printing_model], tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("fuselint: error: --device 'cuda': ")
    assert result.stderr.count("\n") == 1 and "use --device cpu" in result.stderr
    assert "importing the model file" not in result.output, "nothing is built for a device we lack"


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "meta"])
def test_a_device_verify_cannot_use_is_a_usage_error(tmp_path, printing_model, device):
    result = _run(["verify", "--device", device, "--entry", printing_model], tmp_path)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"fuselint: error: --device {device!r}")


def test_what_the_model_prints_is_counted_not_shown(tmp_path, printing_model):
    args = ["verify", "--device", "cpu", "--backend", "eager", "--no-fixed", "--entry", printing_model]
    quiet = _run(args, tmp_path)
    assert quiet.exit_code == 0, quiet.output
    assert "forward ran" not in quiet.output
    summary = [line for line in quiet.stderr.splitlines() if "printed" in line]
    assert len(summary) == 1
    printed = int(re.search(r"the model printed (\d+) line\(s\); --verbose shows them", summary[0])[1])
    assert printed > 3, "the import, the reference run, the check run and the timed runs"

    verbose = _run([*args, "--verbose"], tmp_path)
    assert verbose.exit_code == 0
    assert "importing the model file" in verbose.stderr and verbose.stderr.count("forward ran") > 2
    assert "forward ran" not in verbose.stdout, "stdout carries only the report"


def test_the_report_names_what_measured_it(tmp_path, printing_model):
    import json

    import torch

    args = ["verify", "--device", "cpu", "--backend", "eager", "--no-fixed", "--entry", printing_model]
    text = _run(args, tmp_path)
    assert text.exit_code == 0, text.output
    assert f" on cpu (torch {torch.__version__}, triton " in text.stdout.splitlines()[0]
    report = json.loads(_run([*args, "--format", "json"], tmp_path).stdout)
    assert report["platform"].startswith(f"torch {torch.__version__}, triton ")


def test_on_a_gpu_the_platform_leads_with_its_name(monkeypatch):
    import torch

    from fuselint.verify.run import _platform

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"NVIDIA H200 ({device})")
    assert _platform("cuda:1").startswith(f"NVIDIA H200 (cuda:1), torch {torch.__version__}, triton ")


TORCHSCRIPT_MODELS = """\
import torch
from torch import nn


class Scriptable(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


class OnlyTraceable(nn.Module):
    def forward(self, *xs):  # TorchScript takes no *args
        return torch.relu(xs[0]) * 2


class Holder:
    def __init__(self, t):
        self.t = t


class Neither(nn.Module):
    def forward(self, *xs):  # not scriptable, and its output is no tensor container: not traceable
        return Holder(torch.relu(xs[0]))


def scriptable():
    return Scriptable(), (torch.randn(3, 4),)


def only_traceable():
    return OnlyTraceable(), (torch.randn(3, 4),)


def neither():
    return Neither(), (torch.randn(3, 4),)
"""


def _torchscript_row(tmp_path, factory: str):
    (tmp_path / "ts.py").write_text(TORCHSCRIPT_MODELS)
    args = ["verify", "--device", "cpu", "--backend", "torchscript", "--no-fixed", "--format", "json"]
    result = _run([*args, "--entry", f"ts.py:{factory}"], tmp_path)
    rows = {r["backend"]: r for r in json.loads(result.stdout)["rows"]}
    return result, rows["torchscript"]


@pytest.mark.parametrize(("factory", "how"), [("scriptable", "scripted"), ("only_traceable", "traced")])
def test_torchscript_rows_script_or_trace_and_match_eager(tmp_path, factory, how):
    result, row = _torchscript_row(tmp_path, factory)
    assert result.exit_code == 0, result.output
    assert row["ok"] is True and row["how"] == how and row["ms"] > 0


def test_a_model_torchscript_cannot_take_is_a_reason_in_its_row(tmp_path):
    result, row = _torchscript_row(tmp_path, "neither")
    assert result.exit_code == 0, "the other rows still stand"
    assert row["ms"] is None
    assert row["problem"].startswith("cannot be scripted (") and ") nor traced (" in row["problem"]


def test_a_model_that_fails_on_its_own_is_a_usage_error(tmp_path):
    (tmp_path / "broken.py").write_text(
        "import torch\n\n\nclass Broken(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.last_hidden_state\n\n\ndef entry():\n    return Broken(), (torch.ones(2),)\n"
    )
    result = _run(["verify", "--device", "cpu", "--backend", "eager", "--entry", "broken.py:entry"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr == (
        "fuselint: error: entry 'broken.py:entry': running the model failed: "
        "AttributeError: 'Tensor' object has no attribute 'last_hidden_state'\n"
    )
