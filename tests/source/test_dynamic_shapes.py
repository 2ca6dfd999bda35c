"""FL106: data-dependent output shapes, and their static look-alikes."""

from __future__ import annotations

from source_rules_helpers import lines

SRC = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, scores, ids, counts, valid: torch.BoolTensor, attention_mask=None):
        a = torch.nonzero(scores > 0.5)
        b = x[scores > 0.5]
        keep = scores.sigmoid() > 0.3
        c = x[:, keep]
        d = torch.unique(ids)
        e = ids.bincount()
        f = torch.masked_select(x, keep)
        g = torch.where(keep)
        h = torch.repeat_interleave(x, counts, dim=0)
        i = x.repeat_interleave(counts.long())
        j = x[valid]
        return a, b, c, d, e, f, g, h, i, j


class Static(nn.Module):
    def forward(self, x, scores, attention_mask, index, counts):
        keep = scores > 0.5
        a = torch.where(keep, x, torch.zeros_like(x))
        b = x.masked_fill(~keep, 0.0)
        x[keep] = 0.0
        c = x[index]
        d = x[attention_mask]
        e = x.repeat_interleave(2, dim=0)
        f = torch.repeat_interleave(x, 3)
        g = x[:, : x.shape[1] // 2]
        h = scores.topk(5).indices
        i = torch.repeat_interleave(x, counts, dim=0, output_size=8)  # the caller states the length
        j = x.repeat_interleave(counts, output_size=x.shape[0] * 2)
        return a, b, c, d, e, f, g, h, i, j
"""


def test_dynamic_shape_ops_are_flagged():
    assert lines(SRC, "FL106") == [7, 8, 10, 11, 12, 13, 14, 15, 16, 17]


def test_static_shape_look_alikes_are_not_flagged():
    assert [line for line in lines(SRC, "FL106") if line > 20] == []


RESUMED = """
import torch
from torch import nn


def resumed(x, scores):
    keep = scores > 0.5
    return x.masked_scatter(
        keep.unsqueeze(-1),
        torch.relu(x[keep]),
    )


def resumed_index(x, scores):
    y = x.index_select(0,
        (scores > 0.5).nonzero().flatten())
    return y


def same_line(x, scores):
    keep = scores > 0.5
    return x.masked_fill(keep.unsqueeze(-1), x[keep].sum())


def python_method(x, scores):
    keep = scores > 0.5
    return x.split(
        x[keep].shape[0] + 1,
    )


def torch_function(x, scores):
    keep = scores > 0.5
    return torch.cat(
        [x[:1], x[keep]],
    )


def in_a_loop(x, scores):
    keep = scores > 0.5
    for _ in range(2):
        x = x.masked_fill(
            keep.unsqueeze(-1), x[keep].sum(),
        )
    return x


class Layer(nn.Module):
    def forward(self, x, scores):
        return resumed(x, scores), resumed_index(x, scores), same_line(x, scores), python_method(
            x, scores
        ), torch_function(x, scores), in_a_loop(x, scores)
"""
SKIPPED = "Attempted to call function marked as skipped"


def _resumed_lines() -> list[int]:
    from source_rules_helpers import findings

    return [f.span.line for f in findings(RESUMED, "FL106") if "resumed graph" in f.message]


def test_tensor_method_after_a_break_in_its_arguments_is_flagged_at_its_line():
    # `x.masked_scatter(` (line 8) and `x.index_select(0,` (line 15), not the same-line call, the
    # Python-written `split`, `torch.cat` or the call in a loop
    assert _resumed_lines() == [8, 15]


def test_flagged_resumed_calls_break_under_dynamo_and_the_others_do_not():
    from source_rules_helpers import dynamo_break_reasons, load_snippet

    torch = __import__("pytest").importorskip("torch")
    ns = load_snippet(RESUMED)
    x, scores = torch.randn(6, 4), torch.tensor([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    # `same_line` breaks twice too, both on its one line: one site, flagged once (next test)
    for name in ("resumed", "resumed_index", "same_line"):
        assert SKIPPED in dynamo_break_reasons(ns[name], x, scores), name
    for name in ("python_method", "torch_function", "in_a_loop"):
        assert SKIPPED not in dynamo_break_reasons(ns[name], x, scores), name


def test_a_call_on_the_line_of_its_break_keeps_one_finding():
    from source_rules_helpers import lines as flagged

    assert flagged(RESUMED, "FL106").count(22) == 1


IN_COMPREHENSIONS = """
import torch
from torch import nn


def listed(x, scores):
    keep = scores > 0.5
    out = [x.add(
        x[keep].sum()) for _ in range(2)]
    return out[0]


def keyed(x, scores):
    keep = scores > 0.5
    out = {i: x.add(
        x[keep].sum()) for i in range(2)}
    return out[0]


class Layer(nn.Module):
    def forward(self, x, scores):
        return listed(x, scores), keyed(x, scores)
"""


def test_a_method_called_in_a_comprehension_is_not_resumed():
    # torch 2.13 on Python 3.11: the break at `x[keep]` (lines 9 and 16) is the comprehension's
    # only one; dynamo logs no second break at the method's line (8, 15): the comprehension is
    # a loop, like the `for` of `in_a_loop` above
    from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

    assert [f.span.line for f in findings(IN_COMPREHENSIONS, "FL106") if "resumed graph" in f.message] == []
    torch = __import__("pytest").importorskip("torch")
    ns = load_snippet(IN_COMPREHENSIONS)
    x, scores = torch.randn(6, 4), torch.tensor([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    for name in ("listed", "keyed"):
        reasons = dynamo_break_reasons(ns[name], x, scores)
        assert "Dynamic shape operator" in reasons and SKIPPED not in reasons, (name, reasons)


IN_CONTEXTS = """
import torch
from torch import nn


class Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def under_own_context(x, scores):
    keep = scores > 0.5
    with Quiet():
        out = x.add(
            x[keep].sum())
    return out


def under_no_grad(x, scores):
    keep = scores > 0.5
    with torch.no_grad():
        out = x.add(
            x[keep].sum())
    return out


class Layer(nn.Module):
    def forward(self, x, scores):
        return under_own_context(x, scores), under_no_grad(x, scores)
"""


def test_a_method_called_under_a_users_context_manager_is_not_resumed():
    # torch 2.13: after the break at `x[keep]` dynamo resumes inside `torch.no_grad()` (the second
    # break at `x.add(`, line 25, flagged) but not inside a user's context manager (line 17): there
    # the frame runs on in eager, so the method's line never breaks
    from source_rules_helpers import dynamo_break_reasons, findings, load_snippet

    assert [f.span.line for f in findings(IN_CONTEXTS, "FL106") if "resumed graph" in f.message] == [25]
    torch = __import__("pytest").importorskip("torch")
    ns = load_snippet(IN_CONTEXTS)
    x, scores = torch.randn(6, 4), torch.tensor([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    assert SKIPPED in dynamo_break_reasons(ns["under_no_grad"], x, scores)
    reasons = dynamo_break_reasons(ns["under_own_context"], x, scores)
    assert "Dynamic shape operator" in reasons and SKIPPED not in reasons, reasons
