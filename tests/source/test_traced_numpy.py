"""numpy math on a tensor is traced by dynamo as torch ops (`torch._numpy`): FL101 flags where its
result is read on the host, not the call; numpy functions dynamo cannot trace stay findings.

From diffusers 0.42.1's DEIS scheduler (prec26j's sample, #22): `np.log` of 0-d CPU sigmas in the
third-order update compiles with no break.
"""

from __future__ import annotations

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

SRC = """
import numpy as np
import torch


def traced(x, t):
    return x * (np.log(t) - np.log(t * 2)) + np.maximum(t, 0.1)


def read_on_host(x, t):
    return x * float(np.exp(t))


def branch_on_sum(x, v):
    if np.sum(v) > 1:
        x = x + 1
    return x


def untraceable(x, v):
    return x + torch.as_tensor(np.interp(v, v, v))


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, t: torch.Tensor, v: torch.Tensor):
        return traced(x, t) + read_on_host(x, t) + branch_on_sum(x, v) + untraceable(x, v)
"""


def test_findings_sit_where_the_host_reads():
    got = [
        (f.code, f.span.line)
        for f in findings(SRC, "FL101") + findings(SRC, "FL102")
        if f.code in ("FL101", "FL102")
    ]
    assert sorted(set(got)) == [("FL101", 11), ("FL101", 21), ("FL102", 15)]


def test_dynamo_agrees():
    torch = pytest.importorskip("torch")
    ns = load_snippet(SRC)
    x, t, v = torch.rand(5), torch.tensor(0.5), torch.rand(5)
    assert dynamo_break_reasons(ns["traced"], x, t) == []
    assert dynamo_break_reasons(ns["read_on_host"], x, t) == ["Data dependent operator"]
    assert dynamo_break_reasons(ns["branch_on_sum"], x, v) == ["Data-dependent branching"]
    assert dynamo_break_reasons(ns["untraceable"], x, v) == [
        "attempted to trace numpy function unsupported by PyTorch"
    ]
