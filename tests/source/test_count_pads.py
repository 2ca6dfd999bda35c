"""FL102's pad fix (`fuselint/source/count_pads.py`): `if n < K: t = F.pad(t, (0, K - n))` padded by
`torch.sym_max(K - n, 0)` without the test, and the reach that finds SIFT's test: tuple items of a
helper's returns, a top-K of a counted `k`, a name bound in both arms of an `if`, comprehensions of
calls and `torch.cat` of them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from source_rules_helpers import (
    confirm_fixture_fix,
    dynamo_break_reasons,
    findings,
    fixed,
    load_namespace,
    load_snippet,
)

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "pad_to_count.py"
PAD_MESSAGE = "pad without the test, by `torch.sym_max("


def _levels(counts: list[int], size: int = 4) -> torch.Tensor:
    """Score maps with exactly `counts[i]` distinct values above 0.5 in level `i`."""
    levels = torch.zeros(len(counts), size, size)
    value = 0.99
    for i, count in enumerate(counts):
        flat = levels[i].view(-1)
        for j in range(count):
            flat[(5 * j) % flat.numel()] = value
            value -= 0.01
    return levels


def test_fixture_dynamo_confirms_the_break_before_the_fix_and_not_after():
    text = FIXTURE.read_text()
    after = fixed(text, "FL10")
    assert fixed(after, "FL10") == after
    assert "pad = torch.sym_max(top - n, 0)" in after and "if n < top" not in after
    confirm_fixture_fix(text, after, "PaddedPeaks", lambda g: (torch.rand(3, 4, 4, generator=g),))


def test_fixture_outputs_equal_at_every_count_with_one_graph():
    """Counts 0 to 12 against `top` 6, spread over three levels: compiled once, no recompile, and
    bit-equal to the original at every count (below, at and above `top`)."""
    text = FIXTURE.read_text()
    before = load_namespace(text, "before").PaddedPeaks().eval()
    after = load_namespace(fixed(text, "FL10"), "after").PaddedPeaks().eval()
    graphs = []

    def backend(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(after, backend=backend, dynamic=False)
    for total in range(13):
        counts = [total // 3 + (1 if i < total % 3 else 0) for i in range(3)]
        levels = _levels(counts)
        expected = before(levels)
        for got in (after(levels), compiled(levels)):
            assert all(
                torch.equal(e, g) and e.dtype == g.dtype for e, g in zip(expected, got, strict=True)
            ), total
    assert len(graphs) == 1


def test_without_the_pad_fix_the_break_stays_at_the_test():
    """FL106's op fix and the level's guard alone: dynamo breaks at `if n < top`."""
    text = FIXTURE.read_text()
    partial = fixed(text, "FL10").replace(
        'pad = torch.sym_max(top - n, 0)\n        scores = F.pad(scores, (0, pad), value=float("-inf"))\n'
        "        where = F.pad(where, (0, pad), value=-1)",
        'if n < top:\n            pad = top - n\n            scores = F.pad(scores, (0, pad), value=float("-inf"))\n'
        "            where = F.pad(where, (0, pad), value=-1)",
    )
    assert "if n < top:" in partial
    model = load_namespace(partial, "partial").PaddedPeaks().eval()
    reasons = dynamo_break_reasons(model, _levels([2, 2, 2]))
    assert any("data-dependent" in r.lower() or "guard" in r.lower() for r in reasons), reasons


# ---------------------------------------------------------------- the rewrite and its refusals

HEAD = """
import torch
import torch.nn.functional as F


class TopScores(torch.nn.Module):
    def forward(self, x: torch.Tensor, k: int):
        s = x[x > 0]
        n = s.size(0)
"""
TAIL = """
        return torch.topk(s, k)[0]
"""


def _run(source: str):
    return load_snippet(source)["TopScores"]()


def _pad_findings(body: str, head: str = HEAD, tail: str = TAIL):
    source = head + textwrap.indent(textwrap.dedent(body), "        ") + tail
    found = [f for f in findings(source, "FL102") if "the test compares" in f.message]
    return source, found


@pytest.mark.parametrize(
    "body",
    [
        "if n < k:\n    pad = k - n\n    s = F.pad(s, (0, pad), value=-1.0)\n",
        "if k > n:\n    s = F.pad(s, (0, k - n), value=-1.0)\n",
        "if n <= k:\n    s = torch.nn.functional.pad(s, (0, k - n), mode='constant', value=-1.0)\n",
        "if k >= n:\n    pad = k - n\n    s = F.pad(s, (0, pad))\n    s = F.pad(s, (0, pad), value=-1.0)\n",
        "if s.size(0) < k:\n    s = F.pad(s, (0, k - s.size(0)), value=-1.0)\n",
    ],
)
def test_the_pad_is_rewritten_and_equal_at_every_count(body):
    source, found = _pad_findings(body)
    assert len(found) == 1 and found[0].fix is not None
    assert found[0].fix.applicability is Applicability.UNSAFE
    assert found[0].fix.message.startswith(PAD_MESSAGE)
    after = fixed(source, "FL102")
    assert "torch.sym_max(k - " in after and "if " not in after.split("n = s.size(0)")[1]
    original, rewritten = _run(source), _run(after)
    for count in range(9):
        x = torch.cat([torch.linspace(1.0, 2.0, count), -torch.ones(3)])
        assert torch.equal(original(x, 5), rewritten(x, 5)), count


@pytest.mark.parametrize(
    ("why", "body"),
    [
        ("an else", "if n < k:\n    s = F.pad(s, (0, k - n))\nelse:\n    s = s[:k]\n"),
        ("a bound that does not match the pad", "if n < k:\n    s = F.pad(s, (0, k - n + 1))\n"),
        ("a pad at the start", "if n < k:\n    s = F.pad(s, (k - n, 0))\n"),
        ("a pad at both ends", "if n < k:\n    s = F.pad(s, (k - n, k - n))\n"),
        ("a reflect pad", "if n < k:\n    s = F.pad(s, (0, k - n), mode='reflect')\n"),
        ("another statement", "if n < k:\n    s = F.pad(s, (0, k - n))\n    s = s * 2\n"),
        ("a new name", "if n < k:\n    padded = F.pad(s, (0, k - n))\n    s = padded\n"),
        ("the count rebound", "if n < k:\n    pad = k - n\n    n = k\n    s = F.pad(s, (0, pad))\n"),
        ("a comment on the test", "if n < k:  # short\n    s = F.pad(s, (0, k - n))\n"),
        (
            "a count read from a tensor padded before",
            "if s.size(0) < k:\n    s = F.pad(s, (0, k - s.size(0)))\n    s = F.pad(s, (0, k - s.size(0)))\n",
        ),
        ("a float limit", "if n < 2.5:\n    s = F.pad(s, (0, 2.5 - n))\n"),
        ("a value read from the body", "if n < k:\n    pad = k - n\n    s = F.pad(s, (0, pad), value=pad)\n"),
    ],
)
def test_no_fix_where_the_rewrite_is_not_the_original(why, body):
    _, found = _pad_findings(body)
    assert len(found) == 1, why
    assert found[0].fix is None, why  # no guard either: one would crop or never pad


def test_no_fix_where_the_pad_value_does_work_the_test_skipped():
    """The rewrite evaluates `value=` on every call: where the test failed the original never did.
    At a count equal to `k` the original returns the top-k; the rewrite would divide by zero."""
    body = "if n < k:\n    s = F.pad(s, (0, k - n), value=1.0 / (k - n))\n"
    source, found = _pad_findings(body)
    assert len(found) == 1 and found[0].fix is None
    x = torch.linspace(1.0, 2.0, 5)
    assert torch.equal(_run(source)(x, 5), x.flip(0))
    written = "s = F.pad(s, (0, torch.sym_max(k - n, 0)), value=1.0 / (k - n))"  # the fix before this test
    unguarded = source.replace(
        "if n < k:\n            s = F.pad(s, (0, k - n), value=1.0 / (k - n))", written
    )
    assert written in unguarded
    with pytest.raises(ZeroDivisionError):
        _run(unguarded)(x, 5)
    # a random draw moves the generator on every call; a name, an attribute and `-inf` stay fixable
    _, drawn = _pad_findings("if n < k:\n    s = F.pad(s, (0, k - n), value=float(torch.rand(())))\n")
    assert drawn[0].fix is None
    for value in ("-self.fill", "fill", "float('-inf')", "-1"):
        _, plain = _pad_findings(f"if n < k:\n    s = F.pad(s, (0, k - n), value={value})\n")
        assert plain[0].fix is not None, value


def test_the_body_s_comments_are_kept_once():
    """A comment after the last pad stays once (it was written twice), a comment line above the
    body stays; a comment inside a test spread over lines gets no fix (the rewrite drops the test)."""
    body = "if n < k:\n\n    # up to k\n    pad = k - n  # short\n    s = F.pad(s, (0, pad))  # to k\n"
    source, found = _pad_findings(body)
    assert found[0].fix is not None
    after = fixed(source, "FL102")
    assert after.count("# to k") == 1 and after.count("# short") == 1 and after.count("# up to k") == 1
    assert "n = s.size(0)\n        # up to k\n        pad = torch.sym_max(k - n, 0)  # short\n" in after
    x = torch.linspace(1.0, 2.0, 3)
    assert torch.equal(_run(source)(x, 5), _run(after)(x, 5))
    _, split = _pad_findings("if (\n    n < k  # short\n):\n    s = F.pad(s, (0, k - n))\n")
    assert len(split) == 1 and split[0].fix is None
    source, split = _pad_findings("if (\n    n < k\n):\n    # up\n    s = F.pad(s, (0, k - n))\n")
    after = fixed(source, "FL102")
    assert "if (" not in after and "n = s.size(0)\n        # up\n        s = F.pad(" in after
    assert torch.equal(_run(source)(x, 5), _run(after)(x, 5))


@pytest.mark.parametrize(
    "body",
    [
        "if n - 1 <= 0:\n    s = F.pad(s, (0, 0 - (n - 1)))\n",
        "if n + 1 < 1:\n    pad = 1 - (n + 1)\n    s = F.pad(s, (0, pad))\n",
    ],
)
def test_a_count_that_is_a_sum_keeps_its_parentheses(body):
    """`K - (n - 1)` was written `K - n - 1`: at a count of 0 the rewrite padded nothing where the
    original padded one; `1 - (n + 1)` padded two where the original padded nothing."""
    source, found = _pad_findings(body, tail="\n        return s\n")
    assert found[0].fix is not None
    after = fixed(source, "FL102")
    original, rewritten = _run(source), _run(after)
    for count in range(4):
        x = torch.cat([torch.linspace(1.0, 2.0, count), -torch.ones(3)])
        assert torch.equal(original(x, 1), rewritten(x, 1)), count


def test_no_fix_where_the_shortfall_is_read_after_the_test():
    _, found = _pad_findings(
        "if n < k:\n    pad = k - n\n    s = F.pad(s, (0, pad))\n",
        tail="\n        return torch.topk(s, k)[0], pad\n",
    )
    assert len(found) == 1 and found[0].fix is None


def test_no_fix_where_the_test_is_an_elif():
    _, found = _pad_findings("if n == 0:\n    return s\nelif n < k:\n    s = F.pad(s, (0, k - n))\n")
    assert [f.fix for f in found if f.span.line == 12] == [None]


def test_no_fix_where_the_padded_tensor_is_not_bound_before_the_test():
    source = """
    import torch
    import torch.nn.functional as F


    class TopScores(torch.nn.Module):
        def forward(self, x: torch.Tensor, k: int, cond: bool):
            if cond:
                s = x[x > 0]
            n = x[x > 0].size(0)
            if n < k:
                s = F.pad(s, (0, k - n))
            return s
    """
    found = [f for f in findings(source, "FL102") if "the test compares" in f.message]
    assert len(found) == 1 and found[0].fix is None


def test_a_guard_is_still_offered_where_the_body_does_not_pad():
    _, found = _pad_findings("if n < k:\n    s = s * 2\n")
    assert len(found) == 1 and "guard_or_true" in found[0].fix.message


# ---------------------------------------------------------------- the reach that finds SIFT's test


def _count_lines(source: str) -> list[int]:
    return [f.span.line for f in findings(source, "FL102") if "the test compares" in f.message]


def test_an_item_of_a_returned_tuple_is_data_sized_and_the_others_are_not():
    source = """
    import torch


    class Peaks(torch.nn.Module):
        def _pick(self, x):
            return x[x > 0], x

        def forward(self, x):
            r = self._pick(x)
            if len(r[0]) > 3:
                return r[0][:3]
            if len(r[1]) > 3:
                return r[1][:3]
            a, b = self._pick(x)
            if len(a) > 3:
                return a
            if len(b) > 3:
                return b
            return x
    """
    assert _count_lines(source) == [11, 16]


def test_a_top_k_of_a_counted_k_is_data_sized():
    source = """
    import torch


    class Best(torch.nn.Module):
        def forward(self, x: torch.Tensor):
            idx = torch.nonzero(x > 0)[:, 0]
            k = min(4, idx.shape[0])
            top = torch.topk(x[idx], k)[0]
            fixed_k = x.topk(3)[0]
            if top.shape[0] < 4:
                return top
            if fixed_k.shape[0] < 4:
                return fixed_k
            return x
    """
    assert _count_lines(source) == [11]


def test_a_name_bound_in_both_arms_of_an_if_holds_either_arm():
    source = """
    import torch


    class Rows(torch.nn.Module):
        def forward(self, x: torch.Tensor, flag: bool):
            if flag:
                r = x[x > 0]
            else:
                r = x[:3]
            if len(r) > 2:
                return r
            s = x[x > 0]
            s = x[:3]
            if len(s) > 2:
                return s
            return x
    """
    # `r` is data-sized where `flag` holds; `s` is rebound on every path before its test
    assert _count_lines(source) == [11]


def test_a_comprehension_of_calls_and_a_cat_of_its_items():
    source = """
    import torch


    class Levels(torch.nn.Module):
        def _one(self, x):
            return x[x > 0].unsqueeze(0), x.sum()

        def forward(self, xs):
            found = [self._one(x) for x in xs]
            joined = torch.cat([f[0] for f in found], 1)
            totals = torch.stack([f[1] for f in found])
            if joined.size(1) < 8:
                return joined
            if len(found) < 8:
                return totals
            return totals
    """
    assert _count_lines(source) == [13]


def test_a_clamp_of_data_sized_rows_keeps_their_count():
    """`torch.clamp(x, ...)` is a function here, not a method of `torch` (SOLD2's `num_cand =
    len(cand_h)` after `cand_h = torch.clamp(...)`); `masked_fill` keeps the rows (SIFT's `-inf`)."""
    source = """
    import torch


    class Clamped(torch.nn.Module):
        def forward(self, x: torch.Tensor):
            rows = x[x > 0]
            kept = torch.clamp(rows, min=0, max=1)
            filled = rows.masked_fill(rows > 1, 1.0)
            if len(kept) > 5:
                return kept
            if len(filled) > 5:
                return filled
            return x
    """
    assert _count_lines(source) == [10, 12]


def test_items_after_a_starred_target_are_not_read_by_position():
    """`a, *b, c = helper(x)`: `c` is the last item (here the input), not the third (the rows)."""
    source = """
    import torch


    class Peaks(torch.nn.Module):
        def _pick(self, x):
            return x[x > 0], x, x[x > 0], x

        def forward(self, x):
            a, *b, c = self._pick(x)
            if len(c) > 3:
                return c[:3]
            if len(a) > 3:
                return a[:3]
            return x
    """
    assert _count_lines(source) == [13]


def test_a_name_rebound_later_in_the_other_arm_holds_what_that_arm_left():
    """The `if` arm binds the rows and then three of them: either arm leaves three."""
    source = """
    import torch


    class Rows(torch.nn.Module):
        def forward(self, x: torch.Tensor, flag: bool):
            if flag:
                r = x[x > 0]
                r = x[:3]
            else:
                r = x[:3]
            if len(r) > 2:
                return r
            if flag:
                s = x[x > 0]
                if len(x) > 9:
                    s = x[:3]
            else:
                s = x[:3]
            if len(s) > 2:
                return s
            return x
    """
    # `s` keeps the rows where `flag` holds and `x` is short
    assert _count_lines(source) == [20]
