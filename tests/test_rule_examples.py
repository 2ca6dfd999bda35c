"""The generic rule test: every example of every rule file, through `fuselint.verify.rule_check`.

`bad` examples must be flagged with the rule's code, `good` ones must not, and `fixed[i]`
must be exactly what fixing `bad[i]` produces, stable under a second fix. Traced (graph)
rules' examples are traced and planned instead of linted. These are the very checks that
`fuselint rule --test` runs on a user's rule. Adding a rule never means touching this file.
"""

from __future__ import annotations

import pytest

from fuselint.catalog import load_catalog
from fuselint.verify.rule_check import check_bad, check_fixed, check_good

CATALOG = load_catalog()


def _cases(field: str, kinds: tuple[str, ...]):
    return [
        pytest.param(rule, i, id=f"{rule.code}-{field}{i}")
        for rule in CATALOG
        if rule.kind in kinds
        for i in range(len(getattr(rule, field)))
    ]


STATIC = ("tool", "source", "pattern")


@pytest.mark.parametrize("rule,i", _cases("bad", STATIC) + _cases("bad", ("graph",)))
def test_bad_example_is_flagged(rule, i):
    outcome = check_bad(rule, CATALOG, i)
    assert outcome.ok, outcome.detail


@pytest.mark.parametrize("rule,i", _cases("good", STATIC) + _cases("good", ("graph",)))
def test_good_example_is_not_flagged(rule, i):
    outcome = check_good(rule, CATALOG, i)
    assert outcome.ok, outcome.detail


@pytest.mark.parametrize("rule,i", _cases("fixed", STATIC))
def test_fixed_example_is_what_fix_produces(rule, i):
    for outcome in check_fixed(rule, CATALOG, i):
        assert outcome.ok, f"{outcome.case}\n{outcome.detail}"


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
