"""Same entry, same capture: a factory's random draws come from one seed, and the caller's RNG
state is left as it was."""

from __future__ import annotations

import torch

from fuselint.graph.capture import capture
from fuselint.graph.entry import load_entry


def _path_taken(fixtures_dir) -> tuple:
    cap = capture(load_entry(f"{fixtures_dir / 'trace' / 'random_branch.py'}:entry"))
    return tuple(sorted(op for g in cap.graphs for op in g.ops("pointwise")))


def test_the_branch_taken_does_not_depend_on_the_callers_seed(fixtures_dir):
    paths = set()
    for seed in range(6):
        torch.manual_seed(seed)
        paths.add(_path_taken(fixtures_dir))
    assert len(paths) == 1


def test_the_callers_rng_state_is_restored(fixtures_dir):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    _path_taken(fixtures_dir)
    assert torch.equal(torch.get_rng_state(), before)


def test_dynamos_hints_reach_the_findings_details():
    from fuselint.graph.breaks import break_details
    from fuselint.graph.capture import GraphBreak

    brk = GraphBreak("m.py", 3, "Data-dependent branching", hints=("Use torch.cond.", "Move it out."))
    assert dict(break_details(brk))["hints"] == "Use torch.cond.\nMove it out."
