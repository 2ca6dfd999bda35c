"""FL401: dtype round trips, their fixes, and the casts that are deliberate."""

from __future__ import annotations

from source_rules_helpers import findings, fixed, lines

SRC = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, device):
        a = x.float().half()
        b = x.to(torch.float32).to(dtype=torch.bfloat16)
        c = x.double().float()
        d = x.float().float()
        e = x.half().float()
        f = x.float().to(device)
        g = x.to(x.dtype).half()
        h = x.float().to(torch.float16, non_blocking=True)
        return a, b, c, d, e, f, g, h
"""


def test_wide_then_narrow_or_repeated_casts_are_flagged():
    assert lines(SRC, "FL401") == [7, 8, 9, 10]


def test_repeated_cast_fix_is_safe_and_narrowing_fix_is_unsafe():
    by_line = {f.span.line: f for f in findings(SRC, "FL401")}
    assert str(by_line[10].fix.applicability) == "safe"
    assert str(by_line[7].fix.applicability) == "unsafe"
    assert by_line[9].fix is None  # float64 -> float32 -> ... has no single-cast equivalent claim here


def test_fixes_cast_once():
    result = fixed(SRC, "FL401")
    assert "a = x.half()\n" in result
    assert "b = x.to(dtype=torch.bfloat16)\n" in result
    assert "d = x.float()\n" in result
    assert "c = x.double().float()\n" in result
    safe_only = fixed(SRC, "FL401", unsafe=False)
    assert "a = x.float().half()\n" in safe_only and "d = x.float()\n" in safe_only
