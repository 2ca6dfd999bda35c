"""reach20: the caller's line of a break that dynamo cannot resume after (gb0092), and the methods a
framework base class outside the tree runs (torchmetrics' `Metric.forward` runs `update` and
`compute`), each checked against dynamo (torch 2.13):

1. `kernel = Smoother(0.5)` then `kernel.smooth(y)` in forward, `smooth` in another file reading
   `.item()`: dynamo logs the call's line as a break of its own (gb0092), also where an `if` builds
   either that class or another; a stored smoother, one handed in as an argument, and a method that
   does not break give none (fixtures/reach20/fresh_pkg);
2. a `Metric` subclass's `update`/`compute` are entries without configuration, also through a local
   base or a base of another file (and a mixin's `update` that such a metric runs); a
   `MetricCollection` subclass's are not (fixtures/reach20/metric_pkg).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, logged_breaks

from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reach20"


def _findings(root: Path, package: str) -> dict[tuple[str, int], str]:
    config = Config(root=root, select=("FL1",))
    found = lint_tree(discover([str(root / package)], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line): f for f in found}


def _logged(fn, *args) -> set[tuple[str, int, str]]:
    """(file name, line, gb id) of every break dynamo logs compiling `fn` on `args`."""
    return {(Path(b.file).name, b.line, b.gb_id) for b in logged_breaks(fn, *args)}


def test_a_call_on_an_object_forward_builds_is_a_site_when_its_method_breaks():
    found = _findings(FIXTURES, "fresh_pkg")
    # 15 `kernel.smooth(y)` on `Smoother(0.5)` built there; 38 the same where an `if` builds either a
    # Smoother or a Plain. Not 14 (`scale` does not break), 24 (stored on self), 29 (handed in).
    assert {key: f.code for key, f in found.items()} == {
        ("kernels.py", 11): "FL101",
        ("model.py", 15): "FL108",
        ("model.py", 38): "FL108",
    }
    message = found[("model.py", 15)].message
    assert "`kernel.smooth(...)`" in message and "Smoother.smooth" in message and "kernels.py:11" in message
    assert "gb0092" in message


def test_dynamo_logs_the_flagged_caller_lines_and_no_other(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from fresh_pkg.kernels import Smoother
    from fresh_pkg.model import Branches, Fresh, Handed, Stored

    x = torch.rand(4) + 0.5
    handed = Handed()
    calls = [Fresh(), Branches(), Stored(), lambda t: handed(t, Smoother(0.5))]
    logged = set().union(*(_logged(call, x) for call in calls))
    flagged = {key for key, f in _findings(FIXTURES, "fresh_pkg").items() if f.code == "FL108"}
    assert {(name, line) for name, line, gb in logged if gb == "gb0092"} == flagged


def test_a_noqa_on_the_call_silences_it(tmp_path):
    shutil.copytree(FIXTURES / "fresh_pkg", tmp_path / "fresh_pkg")
    model = tmp_path / "fresh_pkg" / "model.py"
    lines = model.read_text().splitlines()
    lines[14] += "  # noqa: FL108"
    model.write_text("\n".join(lines) + "\n")
    found = _findings(tmp_path, "fresh_pkg")
    assert ("model.py", 15) not in found and ("model.py", 38) in found


def test_metric_update_and_compute_are_entries_without_configuration():
    found = _findings(FIXTURES, "metric_pkg")
    # 15 `if preds.max() > 1.0`, 20 `.item()` in compute, 25 `int(...)` in a local subclass's update,
    # 30 `.tolist()` under a torchmetrics metric base; 35 (a MetricCollection's update) is no entry.
    # In derived.py, through `Coverage` of metrics.py: 9 the mixin's `update` that `Shifted` runs,
    # 14 `Scaled.compute`; 23 (a plain class's `update`) is no entry.
    assert {key: f.code for key, f in found.items()} == {
        ("metrics.py", 15): "FL102",
        ("metrics.py", 20): "FL101",
        ("metrics.py", 25): "FL101",
        ("metrics.py", 30): "FL101",
        ("derived.py", 9): "FL101",
        ("derived.py", 14): "FL101",
    }


def test_dynamo_breaks_in_update_and_compute_through_the_metrics_forward(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchmetrics")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from metric_pkg.derived import Scaled, Shifted
    from metric_pkg.metrics import Coverage, LocalCoverage

    preds, target = torch.rand(8), torch.ones(8)
    lines = set()
    for metric in (Coverage(), LocalCoverage(), Scaled(), Shifted()):
        lines |= {(name, line) for name, line, _ in _logged(metric, preds, target)}
    found = {
        key for key, f in _findings(FIXTURES, "metric_pkg").items() if key[0] != "metrics.py" or key[1] != 30
    }
    assert lines == found


def test_a_caller_line_in_an_except_block_says_it_sits_on_an_error_path(tmp_path):
    """pytorch-forecasting retries `metric.update(...)` under `except TypeError`: the call breaks only
    where the first try failed, so `--paths normal` leaves it out, as it leaves out any finding of an
    `except` block; the same call on the normal path stays untagged."""
    package = tmp_path / "pkg"
    package.mkdir()
    shutil.copy(FIXTURES / "fresh_pkg" / "kernels.py", package / "kernels.py")
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import torch\n"
        "\n"
        "from .kernels import Smoother\n"
        "\n"
        "\n"
        "class Retry(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        try:\n"
        "            y = x * 2\n"
        "        except TypeError:\n"
        "            kernel = Smoother(0.5)\n"
        "            y = kernel.smooth(x)\n"
        "        return y\n"
        "\n"
        "\n"
        "class Normal(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        kernel = Smoother(0.5)\n"
        "        return kernel.smooth(x)\n"
    )
    found = _findings(tmp_path, "pkg")
    assert dict(found[("model.py", 12)].details).get("path") == "error"
    assert "error path" in found[("model.py", 12)].message
    assert found[("model.py", 19)].code == "FL108" and found[("model.py", 19)].details == ()
