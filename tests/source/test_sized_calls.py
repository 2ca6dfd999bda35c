"""xfn22: a data-sized kind carried across a call, for FL102's count tests (`fuselint.source.sized_calls`).

A parameter is data-sized only in the calls that fill it with rows the data sized (kornia's `nms`
called from SOLD2's `prob_to_junctions`), and a helper whose every return is data-sized gives its
callers a data-sized value. Checked on the fixtures `sized_parameters.py` and `sized_returns.py`
under dynamo (torch 2.13): a break before the fix, none after, the same outputs on inputs whose
count is 0 and more; and across two files of a tree, where the finding names the call's path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import (
    bit_equal,
    confirm_fixture_fix,
    findings,
    fixed,
    load_namespace,
    tree_findings,
)

from fuselint.source.paths import AFTER_FIX, off_path

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"

INPUTS = {
    "sized_parameters.py": ("JunctionBoxes", lambda g: (torch.rand(6, 6, generator=g),)),
    "sized_returns.py": ("CandidateMean", lambda g: (torch.rand(4, 5, generator=g),)),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fixture_dynamo_confirms_the_break_before_the_fix_and_not_after(name):
    text = (FIXTURES / name).read_text()
    after_text = fixed(text, "FL10")
    assert fixed(after_text, "FL10") == after_text
    confirm_fixture_fix(text, after_text, *INPUTS[name])


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fixture_outputs_equal_at_count_zero(name):
    # every score below the threshold: the data-sized results are empty
    text = (FIXTURES / name).read_text()
    cls, make = INPUTS[name]
    before = getattr(load_namespace(text, "before"), cls)().eval()
    after = getattr(load_namespace(fixed(text, "FL10"), "after"), cls)().eval()
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="eager", dynamic=False)
    for x in (make(torch.Generator().manual_seed(1))[0] * 0.4, make(torch.Generator().manual_seed(2))[0]):
        assert bit_equal(before(x), compiled(x))
        assert bit_equal(before(x), after(x))


def test_only_the_count_of_a_parameter_a_caller_sizes_is_flagged():
    text = (FIXTURES / "sized_parameters.py").read_text()
    (count,) = [f for f in findings(text, "FL102")]
    assert text.splitlines()[count.span.line - 1].strip() == "if boxes.shape[0] != scores.shape[0]:"
    assert "as the call JunctionBoxes.forward → weighted_boxes passes them" in count.message
    # the op that sizes them is not fixed yet: dynamo breaks there first
    assert off_path(count) == AFTER_FIX
    after_ops = fixed(text, "FL106")
    (count,) = findings(after_ops, "FL102")
    assert off_path(count) is None and count.fix is not None


def test_a_parameter_no_caller_sizes_is_not_flagged():
    text = """
    import torch
    from torch import Tensor, nn

    def pair(boxes: Tensor, scores: Tensor) -> Tensor:
        if boxes.shape[0] != scores.shape[0]:
            raise ValueError("counts differ")
        return boxes.sum() + scores.sum()

    class M(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return pair(x.view(-1, 4), x.view(-1, 4)[:, 0])
    """
    assert findings(text, "FL102") == []


def test_a_caller_that_sizes_a_parameter_makes_it_data_sized_in_that_call_only():
    # `pair` is called twice: with static rows and with a mask read; the finding names the second call
    text = """
    import torch
    from torch import Tensor, nn

    def pair(boxes: Tensor, scores: Tensor) -> Tensor:
        if boxes.shape[0] != scores.shape[0]:
            raise ValueError("counts differ")
        return boxes.sum() + scores.sum()

    def plain(x: Tensor) -> Tensor:
        return pair(x, x)

    def masked(x: Tensor) -> Tensor:
        boxes = x[x > 0]
        scores = x[x > 0.5]
        return pair(boxes, scores)

    class M(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return plain(x) + masked(x)
    """
    (count,) = findings(text, "FL102")
    assert "as the call M.forward → masked → pair passes them" in count.message


def test_two_parameters_filled_from_one_op_have_one_count():
    # torch_geometric's `SelectOutput(node_index=perm, cluster_index=torch.arange(perm.size(0)),
    # weight=score[perm])`: one unbacked size, which dynamo compares without a guard
    text = """
    import torch
    from torch import Tensor, nn

    def check(index: Tensor, cluster: Tensor, weight: Tensor) -> Tensor:
        if index.numel() != cluster.numel():
            raise ValueError("index and cluster differ")
        if weight.numel() != index.numel():
            raise ValueError("weight and index differ")
        return index + cluster + weight.long()

    class M(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            perm = torch.nonzero(x > 0).view(-1)
            return check(perm, torch.arange(perm.size(0)), x[perm])
    """
    assert findings(text, "FL102") == []
    ops_fixed = fixed(text, "FL106")
    assert "_fuselint_" in ops_fixed and findings(ops_fixed, "FL102") == []
    model = load_namespace(ops_fixed, "one").M()
    torch._dynamo.reset()
    assert torch._dynamo.explain(model)(torch.randn(8)).graph_break_count == 0


def test_a_helper_returning_a_data_sized_value_sizes_its_callers_count():
    text = (FIXTURES / "sized_returns.py").read_text()
    (count,) = findings(text, "FL102")
    assert "returned by `candidates`" in count.message
    # a helper that returns a data-sized value on one path only sizes nothing
    either = text.replace(
        "    return scores[scores > threshold]",
        "    if threshold > 1:\n        return scores\n    return scores[scores > threshold]",
    )
    assert findings(either, "FL102") == []


def test_a_parameter_sized_in_another_file_names_the_path(tmp_path):
    found = tree_findings(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/boxes.py": """
            from torch import Tensor

            def pair_sum(boxes: Tensor, scores: Tensor) -> Tensor:
                if boxes.shape[-1] != 4:
                    raise ValueError("boxes are Nx4")
                if boxes.shape[0] != scores.shape[0]:
                    raise ValueError("counts differ")
                return (boxes * scores[:, None]).sum()

            def unsized_sum(boxes: Tensor, scores: Tensor) -> Tensor:
                if boxes.shape[0] != scores.shape[0]:
                    raise ValueError("counts differ")
                return boxes.sum()
            """,
            "pkg/model.py": """
            import torch
            from torch import Tensor, nn
            from pkg.boxes import pair_sum, unsized_sum

            class Junctions(nn.Module):
                def forward(self, prob: Tensor) -> Tensor:
                    points = torch.stack(torch.where(prob > 0.5), -1).float()
                    boxes = torch.cat([points - 1, points + 1], 1)
                    return pair_sum(boxes, prob[prob > 0.5]) + unsized_sum(prob, prob)
            """,
        },
    )
    counts = [f for f in found if f.code == "FL102"]
    assert [(Path(f.span.path).name, f.span.line) for f in counts] == [("boxes.py", 7)]
    assert "Junctions.forward → pair_sum passes them" in counts[0].message


def test_the_count_check_breaks_once_the_callers_ops_are_kept_in_the_graph():
    """The mechanism on dynamo: the parameters' count check breaks once the caller's ops are kept
    in the graph, and the guard removes that break."""
    text = (FIXTURES / "sized_parameters.py").read_text()
    ops_only = fixed(text, "FL106")
    model = load_namespace(ops_only, "ops_only").JunctionBoxes().eval()
    x = torch.rand(6, 6, generator=torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    reasons = [str(r.reason) for r in torch._dynamo.explain(model)(x).break_reasons]
    assert any("Could not guard on data-dependent expression Ne(u0, u1)" in r for r in reasons), reasons
    both = load_namespace(fixed(text, "FL10"), "both").JunctionBoxes().eval()
    torch._dynamo.reset()
    assert torch._dynamo.explain(both)(x).graph_break_count == 0


def test_a_call_of_a_local_name_is_no_call_of_the_file_s_function():
    """`check` is the caller's own parameter (a callable handed in) that shadows the file's `check`:
    the file's function is not what runs, and its test is not sized by the caller's rows."""
    text = """
    import torch
    from torch import Tensor, nn

    def check(boxes: Tensor, k: int) -> Tensor:
        if boxes.shape[0] > k:
            return boxes
        return boxes.sum()

    class M(nn.Module):
        def forward(self, x, check):
            rows = x[x > 0]
            return check(rows, 2)

    class N(nn.Module):
        def forward(self, x):
            return check(x[x > 0], 2)
    """
    assert [f.span.line for f in findings(text, "FL102")] == [6]
    assert findings(text.split("class N")[0], "FL102") == []
