"""Where FL102 sits when the test spans several lines (judge10, speechbrain 1.1.2's
augment/augmenter.py:345): dynamo (torch 2.13) names the line where the culprit starts, the
`or n == 0` line of `if (\\n k == 0\\n or n == 0\\n):`, not the test's first line; a multi-line
comparison breaks on its own first line. FL102 now sits on the culprit's line when it is not the
test's first, so a finding and the break it predicts share a line."""

from __future__ import annotations

import logging
import textwrap
import warnings

import pytest
from source_rules_helpers import lines

SOURCE = """
    import torch
    from torch import nn


    class M(nn.Module):
        def forward(self, x, k: int):
            n = torch.randint(low=1, high=3, size=(1,))  # never 0: both tests run
            if (
                k == 0
                or n == 0
                or len(x) == 0
            ):
                return x
            if (
                x.sum()
                > 0
            ):
                return x * 2
            return x - 1
"""


def test_finding_on_the_culprits_line():
    assert lines(SOURCE, "FL102") == [11, 16]


def test_dynamo_breaks_on_the_same_lines():
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(textwrap.dedent(SOURCE), "snippet.py", "exec"), namespace)  # noqa: S102 - our own snippet
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            explained = torch._dynamo.explain(namespace["M"]())(torch.randn(3), 1)
        finally:
            logging.disable(logging.NOTSET)
    found = {
        frame.lineno
        for reason in explained.break_reasons
        for frame in reason.user_stack[-1:]
        if frame.filename == "snippet.py"
    }
    assert found == {11, 16}
