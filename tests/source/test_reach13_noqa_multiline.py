"""A `# noqa` on any line of a multi-line test silences its FL102 finding. judge10 moved the
finding onto the culprit's line (`or n == 0` of `if (\\n k == 0\\n or n == 0\\n):`, where dynamo
names the break); a noqa written where the finding stood before, on the statement's first line, or
on any other line of the test, keeps working, and counts as used (no FL001)."""

from __future__ import annotations

import textwrap

import pytest
from source_rules_helpers import CATALOG, lines

from fuselint.config import Config
from fuselint.source.lint import lint_text

TEMPLATE = """
    import torch
    from torch import nn


    class M(nn.Module):
        def forward(self, x, k: int):
            n = torch.randint(low=1, high=3, size=(1,))
            if (  {0}
                k == 0  {1}
                or n == 0  {2}
                or len(x) == 0  {3}
            ):  {4}
                return x
            return x - 1
"""


def findings(source: str):
    return lint_text("snippet.py", textwrap.dedent(source), CATALOG, Config(select=("FL", "FL001")))


def _source(where: int, comment: str = "# noqa: FL102") -> str:
    return TEMPLATE.format(*(comment if i == where else "" for i in range(5)))


def test_without_noqa_the_finding_is_on_the_culprits_line():
    assert lines(_source(-1), "FL102") == [11]


@pytest.mark.parametrize("where", [0, 1, 2, 3])
def test_noqa_on_any_line_of_the_test_silences_it(where):
    found = findings(_source(where))
    assert [f.code for f in found if f.code == "FL102"] == []
    assert [f.code for f in found if f.code == "FL001"] == []


def test_noqa_after_the_test_silences_nothing():
    # the `):` line closes the statement, not the test
    found = findings(_source(4))
    assert [f.span.line for f in found if f.code == "FL102"] == [11]
    assert [f.code for f in found if f.code == "FL001"] == ["FL001"]


def test_noqa_of_another_rule_silences_nothing():
    assert lines(_source(0, "# noqa: FL103"), "FL102") == [11]
