"""Same model, same command, same numbers: the planner and the gains it prices do not depend
on the order in which Python iterates sets and dicts of strings (PYTHONHASHSEED)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuselint.findings import Gain
from fuselint.fusion.breaks import break_gains, merged, resuming_graph
from fuselint.fusion.cost import graph_cost
from fuselint.fusion.devices import H200
from fuselint.fusion.plan import plan
from fuselint.graph.capture import GraphLink, capture
from fuselint.graph.entry import load_entry
from fuselint.report.gain import describe_gain

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "fixtures" / "trace"
SEEDS = ("0", "1", "2")
FIXTURE = "fixtures/trace/print_twice.py"

# One process per seed (each imports torch): it captures fixtures with a fixed torch seed (the
# inputs are random) and prints everything the planner and the cost model decide, floats at
# full precision, then runs a traced `fuselint check --format json` and prints its report.
SCRIPT = """
import json, sys
import torch
from click.testing import CliRunner
from fuselint.cli import main
from fuselint.fusion.model import analyse, plan_json
from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry

planned = []
for spec in sys.argv[2:]:
    torch.manual_seed(0)
    a = analyse(capture(load_entry(spec)))
    planned.append({
        "plan": plan_json([a]),
        "break_gains": [g.to_json() if g else None for g in a.break_gains],
        "findings": [(f.code, f.span.line, f.message, f.gain and f.gain.to_json(), f.details) for f in a.findings],
    })
torch.manual_seed(0)
checked = CliRunner().invoke(
    main, ["check", "--no-cache", "--format", "json", "--entry", sys.argv[1] + ":entry", sys.argv[1]]
)
torch.manual_seed(0)
as_text = CliRunner().invoke(main, ["check", "--no-cache", "--entry", sys.argv[1] + ":entry", sys.argv[1]])
print(json.dumps({"planned": planned, "check": json.loads(checked.stdout), "text": as_text.stdout}, sort_keys=True))
"""


@pytest.fixture(scope="module")
def outputs_by_seed() -> dict[str, dict]:
    specs = [f"{TRACE / name}:entry" for name in ("print_twice.py", "transformer_block.py")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    procs = {
        seed: subprocess.Popen(
            [sys.executable, "-c", SCRIPT, FIXTURE, *specs],
            cwd=ROOT,
            env={**env, "PYTHONHASHSEED": seed},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in SEEDS
    }
    outs = {}
    for seed, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        outs[seed] = json.loads(stdout)
    return outs


@pytest.mark.slow
def test_planner_output_is_the_same_under_every_hash_seed(outputs_by_seed):
    planned = {seed: out["planned"] for seed, out in outputs_by_seed.items()}
    assert all(p["plan"]["groups"] for p in planned[SEEDS[0]])  # something was planned
    assert all(p == planned[SEEDS[0]] for p in planned.values())


@pytest.mark.slow
def test_traced_check_reports_the_same_gains_under_every_hash_seed(outputs_by_seed):
    gains = {seed: [f["gain"] for f in out["check"]] for seed, out in outputs_by_seed.items()}
    assert any(gains[SEEDS[0]])  # the breaks are priced
    assert all(g == gains[SEEDS[0]] for g in gains.values()), gains
    reports = [out["check"] for out in outputs_by_seed.values()]
    assert all(r == reports[0] for r in reports)


def test_a_break_is_priced_against_the_graph_that_resumes_right_after_it():
    # print_twice: graph0's two values cross the first print, one to graph1 and one to graph2
    cap = capture(load_entry(f"{TRACE / 'print_twice.py'}:entry"))
    plans = [plan(g) for g in cap.graphs]
    names = [p.graph.name for p in plans]
    first = cap.breaks[0]
    targets = sorted({link.target for link in cap.links if link.source == first.after_graph})
    assert targets == ["graph1", "graph2"]
    assert resuming_graph(first.after_graph, cap.links, names) == "graph1"
    crossing = [link for link in cap.links if (link.source, link.target) == ("graph0", "graph1")]
    both = plan(merged(plans[0].graph, plans[1].graph, crossing))
    apart = graph_cost(plans[0], H200).fused + graph_cost(plans[1], H200).fused
    expected = apart - graph_cost(both, H200).fused
    gain = break_gains(cap, plans, H200)[0]
    assert (gain.launches, gain.bytes) == (expected.launches, expected.bytes)


def test_the_resuming_graph_is_chosen_by_count_then_by_capture_order():
    links = (
        GraphLink("g0", 0, "g2", 0),
        GraphLink("g0", 1, "g1", 0),
        GraphLink("g0", 2, "g2", 1),
        GraphLink("g0", 3, "g0", 0),  # a loop back into the graph itself crosses nothing
    )
    assert resuming_graph("g0", links, ["g0", "g1", "g2"]) == "g2"
    assert resuming_graph("g0", links[1:2] + links[:1], ["g0", "g1", "g2"]) == "g1"
    assert resuming_graph("g0", links[1:2] + links[:1], ["g0", "g2", "g1"]) == "g2"
    assert resuming_graph("g0", links[3:], ["g0"]) is None


_TEXT_LINE = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):\d+: (?P<code>FL\d+)\b.*?(?: \(expected saving: (?P<gain>[^)]*)\))?$"
)


@pytest.mark.slow
def test_text_and_json_report_the_same_gain_for_every_finding(outputs_by_seed):
    # each run is a process of its own, as when a user runs the text and then the JSON report
    seeds = list(outputs_by_seed)
    for text_seed, json_seed in zip(seeds, seeds[1:] + seeds[:1]):
        from_text = {
            (m["path"], int(m["line"]), m["code"]): m["gain"] or ""
            for m in map(_TEXT_LINE.match, outputs_by_seed[text_seed]["text"].splitlines())
            if m
        }
        from_json = {
            (f["filename"], f["location"]["row"], f["code"]): describe_gain(
                Gain(**f["gain"]) if f["gain"] else None
            )
            for f in outputs_by_seed[json_seed]["check"]
        }
        assert any(from_json.values())
        assert from_text == from_json
