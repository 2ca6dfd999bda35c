"""The generic rule test: every example of every rule file, run through the real engine.

`bad` examples must be flagged with the rule's code, `good` ones must not, and `fixed[i]`
must be exactly what fixing `bad[i]` produces (safe fixes, plus unsafe ones when the rule's
fix is unsafe). Traced (graph) rules' examples are traced and planned instead of linted.
Adding a rule never means touching this file.
"""

from __future__ import annotations

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text

CATALOG = load_catalog()
STATIC = [r for r in CATALOG if r.kind in ("tool", "source", "pattern")]


def _codes(text: str, rule) -> set[str]:
    # The rule selected by name as well as the defaults: an opt-in rule (FL001) is off otherwise.
    config = Config(select=("FL", rule.code))
    return {f.code for f in lint_text("example.py", text, CATALOG, config)}


def _cases(field: str, rules=STATIC):
    return [
        pytest.param(rule, i, id=f"{rule.code}-{field}{i}")
        for rule in rules
        for i in range(len(getattr(rule, field)))
    ]


@pytest.mark.parametrize("rule,i", _cases("bad"))
def test_bad_example_is_flagged(rule, i):
    assert rule.code in _codes(rule.bad[i], rule)


@pytest.mark.parametrize("rule,i", _cases("good"))
def test_good_example_is_not_flagged(rule, i):
    assert rule.code not in _codes(rule.good[i], rule)


@pytest.mark.parametrize("rule,i", _cases("fixed"))
def test_fixed_example_is_what_fix_produces(rule, i):
    config = Config(select=(rule.code,))
    result = fix_text(
        rule.bad[i], lambda t: lint_text("example.py", t, CATALOG, config), unsafe=rule.fix == "unsafe"
    )
    assert result.text == rule.fixed[i]
    # Idempotent: fixing the fixed text changes nothing.
    again = fix_text(result.text, lambda t: lint_text("example.py", t, CATALOG, config), unsafe=True)
    assert again.text == result.text


def test_every_rule_has_examples_and_says_what_it_is():
    for rule in CATALOG:
        for key in ("name", "summary", "message", "why", "use_instead"):
            assert getattr(rule, key).strip(), f"{rule.code} has an empty {key}"
        assert rule.bad, f"{rule.code} has no bad example"
        if rule.kind != "tool":
            assert rule.good, f"{rule.code} has no good example"
        if rule.fix != "none":
            assert rule.fixed, f"{rule.code} has a fix but no fixed example"
        assert len(rule.fixed) <= len(rule.bad)


# ---------------------------------------------------------------- traced (graph) rules
# A graph rule's examples are modules with `def entry():`; they are traced and planned the way
# `fuselint check --entry` does, and the rule's code must appear (bad) or not (good).

TRACED = [r for r in CATALOG if r.kind == "graph"]


def _traced_codes(source: str, tmp_path, name: str) -> set[str]:
    from fuselint.fusion.model import analyse
    from fuselint.graph.breaks import break_findings
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    analysis = analyse(capture(load_entry(f"{path}:entry")))
    return {f.code for f in (*break_findings(analysis.capture), *analysis.findings)}


@pytest.mark.parametrize("rule,i", _cases("bad", TRACED))
def test_traced_bad_example_is_flagged(rule, i, tmp_path):
    assert rule.code in _traced_codes(rule.bad[i], tmp_path, f"bad{i}")


@pytest.mark.parametrize("rule,i", _cases("good", TRACED))
def test_traced_good_example_is_not_flagged(rule, i, tmp_path):
    assert rule.code not in _traced_codes(rule.good[i], tmp_path, f"good{i}")
