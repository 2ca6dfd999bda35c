"""`fuselint graph -o g.html` opened in a real headless Chromium: what a reader's browser shows.

The page lays itself out with its inline script, so only a browser can say what it draws.
Without Chromium the tests skip on a developer's machine and fail in CI (`CI=true`), where
`.ci/run` installs Debian's `chromium`.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fuselint.cli import main

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    why = f"no headless browser ({', '.join(_BROWSERS)}) on PATH; Debian: apt-get install chromium"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> str:
    """The browser's path; asked for first, so that a skip costs no trace."""
    return _browser()


def _chromium(page: Path, profile: Path, *args: str, fragment: str = "") -> str:
    # A profile per run: parallel test workers must not share Chromium's profile lock.
    done = subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={profile}", *args, page.as_uri() + fragment],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def stack_page(browser, trace_fixtures, tmp_path_factory) -> Path:
    """The page `fuselint graph` writes for the 2-layer decoder stack fixture."""
    out = tmp_path_factory.mktemp("page") / "g.html"
    entry = f"{trace_fixtures / 'transformer_stack.py'}:entry"
    result = CliRunner().invoke(main, ["graph", "--entry", entry, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def dom_of(stack_page, tmp_path_factory):
    """dom_of("#open=all") -> the page's DOM after its script ran, one browser run per address."""
    cache: dict[str, str] = {}

    def get(fragment: str = "") -> str:
        if fragment not in cache:
            profile = tmp_path_factory.mktemp("profile")
            cache[fragment] = _chromium(stack_page, profile, "--dump-dom", fragment=fragment)
        return cache[fragment]

    return get


def _tags(dom: str, cls: str) -> list[str]:
    return re.findall(rf'<g class="{cls}"[^>]*>', dom)


def _attr(tag: str, name: str) -> str | None:
    found = re.search(rf'{name}="([^"]*)"', tag)
    return found.group(1) if found else None


def test_page_opens_with_legend_title_and_layers_folded(dom_of):
    dom = dom_of()
    assert 'data-drawn="yes"' in dom  # the script ran to its end
    assert re.search(r"<h1>fuselint graph: entry \(transformer_stack\.py\)</h1>", dom)
    assert '<aside id="legend">' in dom
    kernels = re.findall(r'<tr class="kernel" data-kernel="(\d+)" data-colour="(#[0-9a-f]{6})"', dom)
    assert len(kernels) > 16
    assert len({colour for _, colour in kernels}) == len(kernels)  # one colour per kernel
    folded = {_attr(t, "data-path"): _attr(t, "data-state") for t in _tags(dom, "module")}
    assert folded == {"layers.0": "folded", "layers.1": "folded", "norm": "folded"}
    # Folded, the 2 layers and the norm are 3 boxes below the input: no op of theirs is drawn.
    assert len(_tags(dom, "node")) == 1
    size = re.search(r'<svg width="(\d+)" height="(\d+)"[^>]*class="graph-drawing"', dom)
    assert size and int(size.group(1)) <= 800 and int(size.group(2)) <= 800


def test_opened_page_draws_every_op_in_its_kernel_colour(dom_of, captured):
    dag = captured("transformer_stack.py").graphs[0].dag
    weights = {
        n: next(iter(dag.successors(n))) for n in dag if dag.in_degree(n) == 0 and dag.out_degree(n) == 1
    }
    dom = dom_of("#open=all")
    legend = dict(re.findall(r'<tr class="kernel" data-kernel="(\d+)" data-colour="(#[0-9a-f]{6})"', dom))
    nodes = re.findall(r'<g class="node" data-id="([^"]+)" data-kind="(\w+)" data-modules="[^"]*"(?: data-kernel="(\d+)")?>\s*'
                       r'<title>[^<]*</title><rect [^>]*fill="([^"]+)"', dom)  # fmt: skip
    assert not _tags(dom, "module")  # every module open
    frames = {_attr(t, "data-path") for t in re.findall(r'<g class="frame"[^>]*>', dom)}
    assert frames >= {"layers.0", "layers.0.attn_norm", "layers.1.down", "norm"}
    # Every node but the weights, which are drawn as chips on the one op that reads them.
    assert sorted(n for n, _, _, _ in nodes) == sorted(set(dag) - set(weights))
    assert len(re.findall(r'<g class="weights">', dom)) == len(set(weights.values())) > 0
    in_kernel = [(kernel, fill) for _, _, kernel, fill in nodes if kernel]
    assert dict(in_kernel) == legend  # every kernel drawn, each in its legend colour
    assert len({f for _, f in in_kernel}) == len(legend)


def _box(tag: str) -> tuple[float, float, float, float]:
    x, y, w, h = (float(_attr(tag, k)) for k in (r"\bx", r"\by", "width", "height"))
    return x, y, x + w, y + h


@pytest.mark.parametrize("fragment", ["#open=layers.0", "#open=all"])
def test_an_open_module_frames_its_own_ops_and_no_other(dom_of, fragment):
    dom = dom_of(fragment)
    frames = {
        path: _box(rect)
        for path, rect in re.findall(r'<g class="frame" data-path="([^"]+)"><rect ([^>]*)>', dom)
    }
    nodes = re.findall(r'<g class="node" data-id="([^"]+)"[^>]*data-modules="([^"]*)"[^>]*>\s*<title>[^<]*</title>'
                       r"<rect ([^>]*)>", dom)  # fmt: skip
    assert frames and nodes
    for node, modules, rect in nodes:
        x0, y0, x1, y1 = _box(rect)
        for path, (fx0, fy0, fx1, fy1) in frames.items():
            inside = fx0 <= x0 and x1 <= fx1 and fy0 <= y0 and y1 <= fy1
            overlaps = x0 < fx1 and fx0 < x1 and y0 < fy1 and fy0 < y1
            member = path in modules.split()
            assert inside if member else not overlaps, (node, path)


def test_open_layers_stack_one_below_the_other(dom_of):
    dom = dom_of("#open=all")
    frames = {p: _box(r) for p, r in re.findall(r'<g class="frame" data-path="([^"]+)"><rect ([^>]*)>', dom)}
    first, second = frames["layers.0"], frames["layers.1"]
    assert first[3] < second[1]  # layer 1 starts below the end of layer 0
    assert first[0] == second[0]  # in the same columns
    width = re.search(r'<svg width="(\d+)"[^>]*class="graph-drawing"', dom)
    assert int(width.group(1)) <= 4 * 176 + 100  # every op drawn, still at most 4 columns wide


def test_opening_a_module_by_address_opens_the_modules_around_it(dom_of):
    dom = dom_of("#open=layers.0.attn_norm")
    frames = set(re.findall(r'<g class="frame" data-path="([^"]+)">', dom))
    folded = set(re.findall(r'<g class="module" data-path="([^"]+)"', dom))
    assert frames == {"layers.0", "layers.0.attn_norm"}
    assert {"layers.0.qkv", "layers.1", "norm"} <= folded


# Clicks as a reader makes them, after the page's own script; each step notes what is drawn.
_CLICKS = """<pre id="probe"></pre><script>
var steps = [];
function note(what) {
  var paths = function (sel) {
    return Array.prototype.map.call(document.querySelectorAll(sel), function (e) { return e.getAttribute("data-path"); });
  };
  steps.push({ what: what, frames: paths("g.frame"), folded: paths("g.module") });
}
function click(el) { el.dispatchEvent(new MouseEvent("click", { bubbles: true })); }
try {
  click(document.querySelector('g.module[data-path="layers.1"]')); note("open layers.1");
  click(document.querySelector('g.frame-head[data-path="layers.1"]')); note("fold layers.1");
  click(document.getElementById("open-all")); note("open all");
  click(document.getElementById("fold-default")); note("fold to blocks");
} catch (e) {
  steps.push({ what: "error", error: String(e) });
}
document.getElementById("probe").textContent = JSON.stringify(steps);
</script>"""


def test_clicks_open_and_fold_modules(stack_page, tmp_path):
    clicked = tmp_path / "clicked.html"
    clicked.write_text(stack_page.read_text().replace("</body>", _CLICKS + "</body>"))
    dom = _chromium(clicked, tmp_path / "profile", "--dump-dom")
    steps = {
        s["what"]: s
        for s in json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1)))
    }
    assert "error" not in steps, steps["error"]
    assert steps["open layers.1"]["frames"] == ["layers.1"]
    assert {"layers.0", "layers.1.attn_norm", "norm"} <= set(steps["open layers.1"]["folded"])
    assert "layers.1" not in steps["open layers.1"]["folded"]
    assert steps["fold layers.1"]["frames"] == []
    assert set(steps["fold layers.1"]["folded"]) == {"layers.0", "layers.1", "norm"}
    assert steps["open all"]["folded"] == [] and "layers.1.down" in steps["open all"]["frames"]
    assert set(steps["fold to blocks"]["folded"]) == {"layers.0", "layers.1", "norm"}


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_screenshot_has_the_window_size(stack_page, tmp_path):
    shot = tmp_path / "g.png"
    _chromium(stack_page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,900")
    assert _png_size(shot) == (1200, 900)
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
