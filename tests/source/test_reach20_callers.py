"""reach20: the caller's line of a break that dynamo cannot resume after (gb0092), and the methods a
framework base class outside the tree runs (torchmetrics' `Metric.forward` runs `update` and
`compute`), each checked against dynamo (torch 2.13):

1. `kernel = Smoother(0.5)` then `kernel.smooth(y)` in forward, `smooth` in another file reading
   `.item()`: dynamo logs the call's line as a break of its own (gb0092); a stored smoother, one
   handed in as an argument, and a method that does not break give none (fixtures/reach20/fresh_pkg);
2. a `Metric` subclass's `update`/`compute` are entries without configuration, also through a local
   base; a `MetricCollection` subclass's are not (fixtures/reach20/metric_pkg).
"""

from __future__ import annotations

import logging
import shutil
import warnings
from pathlib import Path

import pytest
from source_rules_helpers import CATALOG

from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reach20"


def _findings(root: Path, package: str) -> dict[tuple[str, int], str]:
    config = Config(root=root, select=("FL1",))
    found = lint_tree(discover([str(root / package)], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line): f for f in found}


def _logged(fn, *args) -> set[tuple[str, int, str]]:
    """(file name, line, gb id) of every break dynamo logs compiling `fn` on `args`."""
    torch = pytest.importorskip("torch")
    from fuselint.graph.breaks_log import parse_break

    texts: list[str] = []

    class Records(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            texts.append(record.getMessage())

    handler = Records(level=logging.DEBUG)
    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    torch._dynamo.reset()
    torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager")(*args)
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        torch._logging.set_logs()
    return {(Path(b.file).name, b.line, b.gb_id) for t in texts if (b := parse_break(t)) is not None}


def test_a_call_on_an_object_forward_builds_is_a_site_when_its_method_breaks():
    found = _findings(FIXTURES, "fresh_pkg")
    assert {key: f.code for key, f in found.items()} == {
        ("kernels.py", 11): "FL101",
        ("model.py", 14): "FL108",
    }
    message = found[("model.py", 14)].message
    assert "`kernel.smooth(...)`" in message and "Smoother.smooth" in message and "kernels.py:11" in message
    assert "gb0092" in message


def test_dynamo_logs_the_flagged_caller_line_and_no_other(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from fresh_pkg.kernels import Smoother
    from fresh_pkg.model import Fresh, Handed, Stored

    x = torch.rand(4) + 0.5
    fresh = {(name, line) for name, line, gb in _logged(Fresh(), x) if gb == "gb0092"}
    assert fresh == {key for key, f in _findings(FIXTURES, "fresh_pkg").items() if f.code == "FL108"}
    assert not {gb for *_, gb in _logged(Stored(), x)} & {"gb0092"}
    handed = Handed()
    assert not {gb for *_, gb in _logged(lambda t: handed(t, Smoother(0.5)), x)} & {"gb0092"}


def test_a_noqa_on_the_call_silences_it(tmp_path):
    shutil.copytree(FIXTURES / "fresh_pkg", tmp_path / "fresh_pkg")
    model = tmp_path / "fresh_pkg" / "model.py"
    lines = model.read_text().splitlines()
    lines[13] += "  # noqa: FL108"
    model.write_text("\n".join(lines) + "\n")
    assert ("model.py", 14) not in _findings(tmp_path, "fresh_pkg")


def test_either_class_a_branch_builds_is_followed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kernels.py").write_text(
        "class Plain:\n"
        "    def smooth(self, x):\n"
        "        return x\n\n\n"
        "class Reading:\n"
        "    def smooth(self, x):\n"
        "        return x / x.max().item()\n"
    )
    (tmp_path / "pkg" / "model.py").write_text(
        "import torch\n\n"
        "from .kernels import Plain, Reading\n\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, flag: bool = True):\n"
        "        if flag:\n"
        "            k = Reading()\n"
        "        else:\n"
        "            k = Plain()\n"
        "        return k.smooth(x)\n"
    )
    found = _findings(tmp_path, "pkg")
    assert found[("model.py", 12)].code == "FL108"
    assert "Reading.smooth" in found[("model.py", 12)].message


def test_metric_update_and_compute_are_entries_without_configuration():
    found = _findings(FIXTURES, "metric_pkg")
    # 15 `if preds.max() > 1.0`, 20 `.item()` in compute, 25 `int(...)` in a local subclass's update,
    # 30 `.tolist()` under a torchmetrics metric base; 35 (a MetricCollection's update) is no entry.
    assert {key: f.code for key, f in found.items()} == {
        ("metrics.py", 15): "FL102",
        ("metrics.py", 20): "FL101",
        ("metrics.py", 25): "FL101",
        ("metrics.py", 30): "FL101",
    }


def test_dynamo_breaks_in_update_and_compute_through_the_metrics_forward(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchmetrics")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from metric_pkg.metrics import Coverage, LocalCoverage

    preds, target = torch.rand(8), torch.ones(8)
    lines = {line for name, line, _ in _logged(Coverage(), preds, target) if name == "metrics.py"}
    lines |= {line for name, line, _ in _logged(LocalCoverage(), preds, target) if name == "metrics.py"}
    assert lines == {15, 20, 25}
