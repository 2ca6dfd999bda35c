"""FL102's fix for a test of a data-sized result's count: `guard_or_false` / `guard_or_true`.

Once FL106's fix keeps `nonzero` or a mask read in the graph, its count is an unbacked size and
dynamo (torch 2.13) breaks at a Python test of it. The fix wraps each comparison of the count in
the guard whose fallback is the general path: eager reads the plain bool (unchanged), and under
compile no break. The fixtures under fixtures/breaks/ show each kind on a real-looking model:
dynamo breaks before the fix and not after, with the same outputs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from source_rules_helpers import confirm_fixture_fix, dynamo_break_reasons, findings, fixed, load_namespace

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"

SNIPPET = """
import torch
from torch import Tensor, nn

class M(nn.Module):
    def forward(self, x: Tensor):
        idx = torch.nonzero(x > 0)[:, 0]
        {test}
            idx = idx[:2]
        return idx
"""


def _snippet(test: str) -> str:
    return SNIPPET.format(test=test)


# (the test, what the fix writes)
FORMS = [
    ("if len(idx) > 3:", "if guard_or_false(len(idx) > 3):"),
    ("if idx.shape[0] >= 3:", "if guard_or_false(idx.shape[0] >= 3):"),
    ("if 3 < idx.numel():", "if guard_or_false(3 < idx.numel()):"),
    ("if idx.size(0) <= 3:", "if guard_or_true(idx.size(0) <= 3):"),
    ("if len(idx) == 0:", "if guard_or_false(len(idx) == 0):"),
    ("if len(idx) > 0:", "if guard_or_true(len(idx) > 0):"),
    ("if len(idx) != 0:", "if guard_or_true(len(idx) != 0):"),
    ("if len(idx) < 1:", "if guard_or_false(len(idx) < 1):"),
    ("if x.shape[1] > 2 and len(idx) > 3:", "if x.shape[1] > 2 and guard_or_false(len(idx) > 3):"),
]


@pytest.mark.parametrize(("test", "written"), FORMS)
def test_each_comparison_of_the_count_takes_the_general_paths_guard(test, written):
    text = _snippet(test)
    (found,) = [f for f in findings(text, "FL102")]
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    after = fixed(text, "FL102")
    assert written in after
    assert "from torch.fx.experimental.symbolic_shapes import guard_or" in after
    assert fixed(after, "FL102") == after  # idempotent
    assert findings(after, "FL102") == []


@pytest.mark.parametrize(("test", "written"), FORMS)
def test_eager_runs_are_unchanged(test, written):
    text = _snippet(test)
    before = load_namespace(text, "before").M()
    after = load_namespace(fixed(text, "FL102"), "after").M()
    for seed in range(4):
        x = torch.randn(4 + seed, 3, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(before(x), after(x))


def test_a_count_through_min_and_a_name():
    text = _snippet("k = min(5, idx.shape[0])\n        if k > 0:")
    assert "if guard_or_true(k > 0):" in fixed(text, "FL102")


def test_counts_of_two_results_assume_they_agree():
    text = textwrap.dedent(
        """
        import torch
        from torch import Tensor, nn

        class M(nn.Module):
            def forward(self, x: Tensor):
                a = torch.nonzero(x > 0)
                b = x[x > 0]
                if a.shape[0] == b.shape[0]:
                    return b
                return a
        """
    )
    assert "if guard_or_true(a.shape[0] == b.shape[0]):" in fixed(text, "FL102")


def test_a_raise_guard_falls_back_to_not_raising():
    text = _snippet("if len(idx) < 2:\n            raise ValueError('too few')\n        if False:")
    assert "if guard_or_false(len(idx) < 2):" in fixed(text, "FL102")


def test_no_finding_on_a_count_the_shapes_decide():
    text = textwrap.dedent(
        """
        import torch
        from torch import Tensor, nn

        class M(nn.Module):
            def forward(self, x: Tensor):
                y = x[:, :2].clone()
                if len(y) > 3:
                    y = y[:3]
                if x.shape[0] == 0:
                    return x
                return y
        """
    )
    assert findings(text, "FL102") == []


def test_a_later_binding_of_the_name_does_not_reach_up():
    """`k` is a count where the test reads it; its rebinding below (another branch) is not."""
    text = _snippet("k = min(5, idx.shape[0])\n        if k > 0:\n            k = 3\n        if k > 1:")
    after = fixed(text, "FL102")
    assert "if guard_or_true(k > 0):" in after
    assert "if k > 1:" in after


def test_no_finding_on_an_index_compared_with_the_count():
    """`i < len(idx) - 1` bounds an index, not the count: no general path to name."""
    text = _snippet("i = 2\n        if i < len(idx) - 1:")
    assert findings(text, "FL102") == []


def test_a_binding_in_the_other_branch_does_not_reach_the_test():
    """seamless_m4t: `hidden_states` is data-sized only in the `if` branch; the `else` tests its own."""
    text = textwrap.dedent(
        """
        import torch
        from torch import Tensor, nn

        class M(nn.Module):
            def forward(self, x: Tensor, r: Tensor):
                if x.size(0) == 1:
                    x = torch.repeat_interleave(x, r, dim=0)
                else:
                    if x.shape[0] > 1 and self.training:
                        x = x * 2
                return x
        """
    )
    assert findings(text, "FL102") == []


def test_no_fix_where_the_guards_name_is_taken():
    text = _snippet("if len(idx) > 3:").replace(
        "class M", "def guard_or_false(x):\n    return x\n\n\nclass M"
    )
    (found,) = findings(text, "FL102")
    assert found.fix is None


def test_no_fix_where_torch_is_imported_only_for_type_checking():
    text = textwrap.dedent(
        """
        from typing import TYPE_CHECKING

        from torch import Tensor, nn

        if TYPE_CHECKING:
            import torch

        class M(nn.Module):
            def forward(self, x: Tensor):
                idx = x.nonzero()
                if len(idx) > 3:
                    idx = idx[:3]
                return idx
        """
    )
    assert "guard_or" not in fixed(text, "FL102")
    assert "guard_or_false(len(idx) > 3)" in fixed(text.replace("if TYPE_CHECKING:", "if True:"), "FL102")


def test_the_guard_decides_a_count_dynamo_cannot():
    """The mechanism (torch 2.13): a test of an unbacked count breaks; the guarded one does not,
    and takes the given side where only the data knows the count."""
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    def plain(x):
        s = torch.ops.fix12_test.sel(x, x > 0)
        if len(s) > 100:
            s = s[:100]
        return s * 2

    def guarded(x):
        s = torch.ops.fix12_test.sel(x, x > 0)
        if guard_or_false(len(s) > 100):
            s = s[:100]
        return s * 2

    if not hasattr(torch.ops.fix12_test, "sel"):

        @torch.library.custom_op("fix12_test::sel", mutates_args=())
        def sel(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            return x[m].contiguous()

        @sel.register_fake
        def _(x, m):
            size = torch.library.get_ctx()._shape_env.create_unbacked_symint()
            torch._check(size >= 0)
            return x.new_empty((size,))

    x = torch.randn(30)
    assert dynamo_break_reasons(plain, x)
    assert dynamo_break_reasons(guarded, x) == []
    assert torch.equal(torch.compile(guarded, backend="eager")(x), plain(x))


# ---------------------------------------------------------------- the fixtures, one per kind


FIXTURE_INPUTS = {
    "keypoint_limit.py": ("CappedKeypoints", lambda g: (torch.rand(12, 12, generator=g),)),
    "matches_or_empty.py": (
        "RatioMatcher",
        lambda g: (torch.randn(10, 8, generator=g), torch.randn(12, 8, generator=g)),
    ),
    "mask_rows.py": ("BatchKeypointScores", lambda g: (torch.rand(2, 10, 10, generator=g),)),
}


@pytest.mark.parametrize("name", sorted(FIXTURE_INPUTS))
def test_fixture_dynamo_confirms_the_break_before_the_fix_and_not_after(name):
    text = (FIXTURES / name).read_text()
    after_text = fixed(text, "FL10")
    assert fixed(after_text, "FL10") == after_text
    confirm_fixture_fix(text, after_text, *FIXTURE_INPUTS[name])


def test_fixture_after_only_the_op_fix_breaks_at_the_count():
    """FL106's fix alone moves the break to the test of the count: FL102's fix is what removes it."""
    text = (FIXTURES / "keypoint_limit.py").read_text()
    ops_only = fixed(text, "FL106")
    model = load_namespace(ops_only, "ops_only").CappedKeypoints().eval()
    reasons = dynamo_break_reasons(model, torch.rand(12, 12, generator=torch.Generator().manual_seed(0)))
    assert any("data-dependent" in r.lower() or "guard" in r.lower() for r in reasons), reasons


def test_a_row_of_a_boolean_mask_is_a_mask():
    """`keep[b]` of `keep = maxima & (heatmap > t)`, `maxima` from a helper whose dtype the lint
    does not see: `&` with a comparison is a mask, and so is its row (kornia DISK)."""
    text = (FIXTURES / "mask_rows.py").read_text()
    messages = [f.message for f in findings(text, "FL106")]
    assert any("boolean mask `keep[b]`" in m for m in messages)


def test_a_count_of_an_unfixed_op_is_an_after_fix_road_and_normal_once_the_op_is_fixed():
    # dynamo breaks at `nonzero` first: the test breaks only once FL106's fix keeps the op in the graph,
    # so `--paths normal` leaves it out until then, and the next `--fix` round finds it on the normal path
    from fuselint.source.paths import AFTER_FIX, normal_path_only, off_path

    text = _snippet("if len(idx) > 3:")
    (count,) = findings(text, "FL102")
    assert off_path(count) == AFTER_FIX and "only once FL106's fix" in count.message
    assert normal_path_only([count]) == []
    assert dynamo_break_reasons(load_namespace(text, "a").M(), torch.tensor([1.0, -1.0, 2.0]))  # at the op
    after_op = fixed(text, "FL106")
    assert "_fuselint_" in after_op
    (count,) = findings(after_op, "FL102")
    assert off_path(count) is None and count.fix is not None
    both = fixed(text, "FL1")  # one `--fix` run writes both, round after round
    assert "guard_or_false(len(idx) > 3)" in both and "_fuselint_" in both


def test_a_loop_target_rebinds_the_name():
    """`for rows in chunks:` binds `rows` to each chunk: the test in the loop reads a chunk, not the
    rows bound above the loop."""
    text = """
    import torch
    from torch import Tensor, nn

    class M(nn.Module):
        def forward(self, x: Tensor, chunks: list):
            rows = x[x > 0]
            for rows in chunks:
                if len(rows) > 2:
                    return rows
            if len(x[x > 0]) > 2:
                return x
            return x
    """
    assert [f.span.line for f in findings(text, "FL102")] == [11]
