"""A method every in-scope caller runs only under `if self.x:` never takes its own leading
`if not self.x:` branch, so findings there are dropped (`fuselint.source.guards`).

From peft 0.21.2 (ho28's census): each tuner's `forward` unmerges only `if self.merged:`, and
`unmerge` starts with `if not self.merged: warnings.warn("Already unmerged. Nothing to do.")`;
51 of the 173 FL1xx findings of peft/tuners + ultralytics were that warning.
"""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

from fuselint.source import guards

SRC = """
import warnings

import torch


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.merged = False
        self.off = False

    def unmerge(self):
        if not self.merged:
            warnings.warn("Already unmerged. Nothing to do.")
            return
        self.merged = False

    def forward(self, x):
        if self.off:
            if self.merged:
                self.unmerge()
        return x * 2


class Unguarded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.merged = False

    def unmerge(self):
        if not self.merged:
            warnings.warn("Already unmerged. Nothing to do.")
            return
        self.merged = False

    def forward(self, x):
        if self.merged:
            self.unmerge()
        self.unmerge()
        return x * 2


class Changed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.merged = True

    def reset(self):
        self.merged = False

    def unmerge(self):
        if not self.merged:
            warnings.warn("Already unmerged. Nothing to do.")
            return
        self.merged = False

    def forward(self, x):
        if self.merged:
            self.reset()
            self.unmerge()
        return x * 2
"""


def _lines():
    return sorted(f.span.line for f in findings(SRC, "FL103") if f.code == "FL103")


def test_the_guarded_branch_has_no_finding_and_the_others_keep_theirs():
    # Layer.unmerge's warning (line 17) is dropped; Unguarded's (33) has an unguarded caller, and
    # Changed's (54) has a call between the guard and the unmerge that may change `merged`
    assert _lines() == [33, 54]


def test_dynamo_agrees():
    torch = pytest.importorskip("torch")
    ns = load_snippet(SRC)
    x = torch.ones(3)
    for merged in (False, True):
        layer = ns["Layer"]()
        layer.off, layer.merged = True, merged
        assert dynamo_break_reasons(layer, x) == []
    unguarded = ns["Unguarded"]()
    assert dynamo_break_reasons(unguarded, x) != []  # the unguarded call warns
    changed = ns["Changed"]()
    assert dynamo_break_reasons(changed, x) != []  # reset() made the guard false before unmerge


def _function(src: str):
    import ast

    return ast.parse(src).body[0]


def test_site_facts_read_nested_guards_and_forget_them_after_a_call():
    fn = _function(
        "def f(self):\n"
        "    if self.a and not self.b:\n"
        "        if self.c:\n"
        "            self.m()\n"
        "    else:\n"
        "        self.m()\n"
        "    if self.a:\n"
        "        x = 1\n"
        "        self.log()\n"
        "        self.m()\n"
        "    for _ in range(2):\n"
        "        if self.a:\n"
        "            self.m()\n"
    )
    import ast

    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "m"]
    calls.sort(key=lambda c: c.lineno)
    got = [guards.site_facts(fn, c) for c in calls]
    assert got[0] == {("a", True), ("b", False), ("c", True)}
    assert got[1] == frozenset()  # the else of an `and`: which part failed is unknown
    assert got[2] == frozenset()  # self.log() ran after the test
    assert got[3] == frozenset()  # in a loop: an earlier round may have changed `a`


def test_dead_lines_stop_at_the_first_statement_that_is_not_a_false_plain_if():
    fn = _function(
        "def unmerge(self):\n"
        '    """doc"""\n'
        "    if not self.merged:\n"
        "        return\n"
        "    if self.busy:\n"
        "        return\n"
        "    if not self.merged:\n"
        "        return\n"
    )
    assert guards.dead_lines(fn, frozenset({("merged", True)})) == [(3, 4)]
    assert guards.dead_lines(fn, frozenset({("merged", True), ("busy", False)})) == [(3, 4), (5, 6), (7, 8)]
    assert guards.dead_lines(fn, frozenset()) == []
