"""FL106's fix that runs a data-sized expression as a custom op with an unbacked size.

Each form (`x[mask]`, `x[:, mask]`, `x[..., mask]`, `nonzero` with and without `as_tuple`,
one-argument `torch.where`, `unique`, `masked_select`, `repeat_interleave` with tensor repeats) is
rewritten into a call of an op the fix defines once in the file; dynamo (torch 2.13) breaks before
the fix and not after, and the outputs are bit-identical. The fixtures under fixtures/breaks/ show
one real-looking model per form.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from source_rules_helpers import (
    bit_equal,
    confirm_fixture_fix,
    dynamo_break_reasons,
    dynamo_graphs,
    findings,
    fixed,
    frames_over_inputs,
    load_namespace,
)

from fuselint.findings import Applicability

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"

SNIPPET = """
import torch
from torch import Tensor, nn

class M(nn.Module):
    def forward(self, x: Tensor, e: Tensor, r: Tensor):
        return {expr}
"""

# (the expression in forward, the call the fix writes)
FORMS = [
    ("x[x[:, 0] > 0]", "_fuselint_select_0(x, x[:, 0] > 0)"),
    ("e[:, e[0] != e[1]]", "_fuselint_select_1(e, e[0] != e[1])"),
    ("x[:, :, x[0, 0] > 0]", "_fuselint_select_2(x, x[0, 0] > 0)"),
    ("x[..., x[0, 0] > 0]", "_fuselint_select_last(x, x[0, 0] > 0)"),
    ("x[x[:, 0] > 0, :]", "_fuselint_select_0(x, x[:, 0] > 0)"),
    ("(x > 0).nonzero()", "_fuselint_nonzero(x > 0)"),
    ("torch.nonzero(x > 0)", "_fuselint_nonzero(x > 0)"),
    ("torch.argwhere(x > 0)", "_fuselint_argwhere(x > 0)"),
    ("torch.nonzero(x > 0, as_tuple=True)", "_fuselint_nonzero_tuple(x > 0)"),
    ("(x > 0).nonzero(as_tuple=True)[1]", "_fuselint_nonzero_tuple(x > 0)[1]"),
    ("torch.where(x > 0)[0]", "_fuselint_nonzero_tuple(x > 0)[0]"),
    ("torch.unique(e)", "_fuselint_unique(e)"),
    ("e.unique(sorted=True, return_counts=True)", "_fuselint_unique_counts(e)"),
    ("torch.unique(e, return_inverse=True, dim=1)", "_fuselint_unique_inverse_dim1(e)"),
    ("x.masked_select(x > 0)", "_fuselint_masked_select(x, x > 0)"),
    ("torch.masked_select(x, x[:, :1] > 0)", "_fuselint_masked_select(x, x[:, :1] > 0)"),
    ("x.repeat_interleave(r, dim=0)", "_fuselint_repeat_dim0(x, r)"),
    ("torch.repeat_interleave(x, r, dim=-2)", "_fuselint_repeat_dimm2(x, r)"),
    ("torch.repeat_interleave(x[:, 0], r)", "_fuselint_repeat_flat(x[:, 0], r)"),
    ("torch.repeat_interleave(r)", "_fuselint_repeat_counts(r)"),
]


def _snippet(expr: str) -> str:
    return SNIPPET.format(expr=expr)


def _inputs(seed: int) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 3, 4, generator=generator)[:, :, 0].contiguous()
    if seed % 2:
        x = torch.randn(6, 3, 4, generator=generator)
    e = torch.randint(0, 4, (2, 12), generator=generator)
    r = torch.randint(0, 3, (6,), generator=generator)
    return x, e, r


def _args_for(expr: str, seed: int) -> tuple:
    x, e, r = _inputs(seed)
    if "x[:, :, " in expr or "x[0, 0]" in expr:
        x = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(seed))
    else:
        x = x if x.dim() == 2 else x[:, :, 0]
    return x, e, r


@pytest.mark.parametrize(("expr", "call"), FORMS)
def test_form_becomes_a_call_of_its_op(expr, call):
    text = fixed(_snippet(expr), "FL106")
    assert f"return {call}" in text
    (found,) = [f for f in findings(_snippet(expr), "FL106") if f.fix]
    assert found.fix.applicability is Applicability.UNSAFE
    assert "assumes" in found.fix.message


@pytest.mark.parametrize(("expr", "call"), FORMS)
def test_form_breaks_before_the_fix_and_not_after_with_the_same_outputs(expr, call):
    text = _snippet(expr)
    before, after = load_namespace(text, "before").M(), load_namespace(fixed(text, "FL106"), "after").M()
    args = _args_for(expr, 0)
    assert dynamo_break_reasons(before, *args)  # the data-sized op ends a graph
    assert dynamo_break_reasons(after, *args) == []
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="eager", dynamic=False)
    for seed in range(3):  # other data of the same shapes: other sizes, the same values
        args = _args_for(expr, seed)
        assert bit_equal(before(*args), after(*args))
        assert bit_equal(before(*args), compiled(*args))


def test_inductor_compiles_the_ops_and_keeps_the_values():
    """Inductor checks a custom op's strides against its fake: `nonzero` is column-major on CPU,
    so the ops return contiguous results, as their fakes say."""
    expr = "(x > 0).nonzero(), e[:, e[0] != e[1]], torch.unique(e, return_counts=True), x.repeat_interleave(r, dim=0)"
    text = _snippet(expr)
    before, after = load_namespace(text, "before").M(), load_namespace(fixed(text, "FL106"), "after").M()
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="inductor", dynamic=False)
    for seed in (0, 2):
        args = _args_for(expr, seed)
        assert bit_equal(before(*args), compiled(*args))


@pytest.mark.parametrize(
    "expr",
    [
        "x[x[:, 0] > 0] * w",
        "x[..., x[0] > 0] * w[0]",
        "x.masked_select(x > 0) * w[0]",
        "x[:, x[0] > 0] * w[0]",
    ],
)
def test_mask_selections_carry_their_exact_gradient(expr):
    snippet = "import torch\n\ndef f(x: torch.Tensor, w: torch.Tensor):\n    return ({expr}).sum()\n\nclass M(torch.nn.Module):\n    def forward(self, x: torch.Tensor, w: torch.Tensor):\n        return f(x, w)\n"
    text = snippet.format(expr=expr)
    after_text = fixed(text, "FL106")
    assert "_fuselint_" in after_text and "register_autograd" in after_text
    before, after = load_namespace(text, "before").f, load_namespace(after_text, "after").f
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = torch.randn(5, 4, generator=generator)
        w = torch.randn(4, generator=generator)
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        (ga,) = torch.autograd.grad(before(a, w), a)
        (gb,) = torch.autograd.grad(after(b, w), b)
        assert torch.equal(ga, gb)


def test_ops_without_a_gradient_say_so_and_raise_in_backward():
    text = _snippet("x.repeat_interleave(r, dim=0)")
    (found,) = [f for f in findings(text, "FL106") if f.fix]
    assert "no gradient" in found.fix.message
    after = load_namespace(fixed(text, "FL106"), "after").M()
    x, e, r = _args_for("x", 0)
    out = after(x.clone().requires_grad_(), e, r)
    with pytest.raises(RuntimeError, match="autograd"):
        out.sum().backward()


def test_fix_is_idempotent_and_defines_each_op_once():
    text = _snippet(
        "(x[x[:, 0] > 0], torch.nonzero(x > 0), torch.where(x > 0), (x > 1).nonzero(), x[x[:, 1] > 0])"
    )
    once = fixed(text, "FL106")
    assert fixed(once, "FL106") == once
    defined = [n.name for n in ast.parse(once).body if isinstance(n, ast.FunctionDef)]
    assert len(defined) == len(set(defined))
    assert {
        "_fuselint_nonzero",
        "_fuselint_nonzero_tuple",
        "_fuselint_select_0",
        "_fuselint_unbacked_size",
    } <= set(defined)
    # the definitions sit after the imports, before the class
    body = ast.parse(once).body
    first_def = next(i for i, n in enumerate(body) if isinstance(n, ast.FunctionDef))
    assert all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body[:first_def])
    assert isinstance(body[-1], ast.ClassDef)


def test_a_file_without_import_torch_gets_it():
    text = textwrap.dedent(
        """
        from torch import Tensor, nn


        class M(nn.Module):
            def forward(self, x: Tensor):
                return x.masked_select(x > 0)
        """
    )
    after = fixed(text, "FL106")
    assert "import torch\n" in after
    module = load_namespace(after, "after")
    x = torch.randn(7)
    assert torch.equal(module.M()(x), x[x > 0])


def test_a_module_run_twice_registers_its_ops_under_new_names():
    """A reload (or two snippets of one name) must not fail on an op name already taken."""
    after = fixed(_snippet("x[x[:, 0] > 0]"), "FL106")
    first, second = load_namespace(after, "again").M(), load_namespace(after, "again").M()
    x, e, r = _args_for("x", 0)
    assert torch.equal(first(x, e, r), second(x, e, r))


@pytest.mark.parametrize(
    "expr",
    [
        "x[mask]",  # a parameter's guessed kind: may be numpy
        "x[x[:, 0] > 0] if False else x",
    ],
)
def test_not_where_the_code_does_not_show_tensors(expr):
    text = "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x, mask):\n        return {expr}\n"
    assert "_fuselint_" not in fixed(text.format(expr=expr), "FL106")


def test_a_masked_store_of_a_number_is_left_to_its_own_fix():
    text = _snippet("x")
    text = text.replace("        return x", "        x[x > 0] = 1\n        return x")
    assert "_fuselint_" not in fixed(text, "FL106")


def test_the_ops_bodies_are_not_linted_again():
    once = fixed(_snippet("e[:, e[0] != e[1]]"), "FL106")
    assert [f for f in findings(once, "FL106")] == []


# ---------------------------------------------------------------- the fixtures, one per form

FIXTURE_INPUTS = {
    "self_loops.py": (
        "SelfLoopFreeConv",
        lambda g: (torch.randn(6, 8, generator=g), torch.randint(0, 6, (2, 20), generator=g)),
    ),
    "keypoint_nonzero.py": ("HeatmapKeypoints", lambda g: (torch.rand(16, 16, generator=g),)),
    "expert_tokens.py": ("TopOneExperts", lambda g: (torch.randn(10, 16, generator=g),)),
    "token_type_mlps.py": ("TokenTypeMLPs", lambda g: (torch.randint(5, 9, (2, 6), generator=g),)),
    "union_edges.py": (
        "DiagonalBoostConv",
        lambda g: (torch.randn(6, 8, generator=g), _edges_with_loops(6, g)),
    ),
    "unique_labels.py": (
        "LabelMeans",
        lambda g: (torch.randn(12, 3, generator=g), torch.randint(0, 9, (12,), generator=g)),
    ),
    "masked_select_scores.py": (
        "ValidLogSigmoid",
        lambda g: (torch.randn(4, 6, generator=g), torch.randint(-1, 2, (4, 6), generator=g)),
    ),
    "repeat_segments.py": (
        "SegmentBroadcast",
        lambda g: (
            torch.randn(4, 3, generator=g),
            torch.cat([torch.zeros(1, dtype=torch.long), torch.randint(0, 4, (4,), generator=g).cumsum(0)]),
        ),
    ),
}


def _edges_with_loops(nodes: int, g) -> torch.Tensor:
    """Random edges between distinct nodes, then one self loop per node in node order (what
    torch_geometric's `add_self_loops` appends): the rows `row == col` selects, one per node."""
    row = torch.randint(0, nodes, (12,), generator=g)
    col = (row + torch.randint(1, nodes, (12,), generator=g)) % nodes
    loops = torch.arange(nodes)
    return torch.cat([torch.stack([row, col]), torch.stack([loops, loops])], dim=1)


DATA_SIZED_OUTPUTS = {"keypoint_nonzero.py", "unique_labels.py", "repeat_segments.py"}


@pytest.mark.parametrize("name", sorted(FIXTURE_INPUTS))
def test_fixture_dynamo_confirms_the_break_before_the_fix_and_not_after(name):
    text = (FIXTURES / name).read_text()
    after_text = fixed(text, "FL106")
    assert "_fuselint_" in after_text
    assert fixed(after_text, "FL106") == after_text
    sizes = confirm_fixture_fix(text, after_text, *FIXTURE_INPUTS[name])
    if name in DATA_SIZED_OUTPUTS:  # the data sized the output: other data, other shapes, no recompile
        assert len(sizes) > 1


def test_not_where_torch_is_imported_only_for_type_checking():
    """A definition runs when the module is imported: `torch` bound only under `if TYPE_CHECKING:`
    (transformers' import_utils.py) would raise NameError there."""
    text = textwrap.dedent(
        """
        from typing import TYPE_CHECKING

        from torch import Tensor, nn

        if TYPE_CHECKING:
            import torch


        class M(nn.Module):
            def forward(self, x: Tensor):
                return x.masked_select(x > 0)
        """
    )
    assert "_fuselint_" not in fixed(text, "FL106")
    guarded = text.replace("if TYPE_CHECKING:", "if True:")
    assert "_fuselint_masked_select(x, x > 0)" in fixed(guarded, "FL106")
    # the `else` of `if TYPE_CHECKING:` runs, and so does `if not TYPE_CHECKING:`
    otherwise = text.replace("    import torch\n", "    pass\nelse:\n    import torch\n", 1)
    assert "_fuselint_masked_select(x, x > 0)" in fixed(otherwise, "FL106")
    negated = text.replace("if TYPE_CHECKING:", "if not TYPE_CHECKING:")
    assert "_fuselint_masked_select(x, x > 0)" in fixed(negated, "FL106")


def test_sarif_leaves_out_a_fix_that_needs_definitions_and_json_lists_them():
    from fuselint.catalog import load_catalog
    from fuselint.report.json_format import finding_to_json
    from fuselint.report.sarif import _fix

    (found,) = [f for f in findings(_snippet("x.masked_select(x > 0)"), "FL106") if f.fix]
    assert _fix(found, {}) is None  # the edit alone would call an undefined op
    entry = finding_to_json(found, load_catalog())
    assert any("_fuselint_masked_select" in d for d in entry["fix"]["definitions"])


_HIT_EXPERTS = """
import torch
from torch import nn

class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x, chosen):
        out = torch.zeros_like(x)
        mask = nn.functional.one_hot(chosen, 3).permute(1, 0)
        {walk}
            rows = torch.where(mask[e[0]])[0]
            out[rows] = self.experts[e[0]](x[rows])
        return out
"""


@pytest.mark.parametrize(
    "walk",
    [
        "hit = (mask.sum(-1) > 0).nonzero()\n        for e in hit:",
        "for e in (mask.sum(-1) > 0).nonzero():",
        "hit = (mask.sum(-1) > 0).nonzero()\n        for _, e in enumerate(hit):",
    ],
)
def test_no_unbacked_op_where_a_python_loop_walks_a_data_sized_result(walk):
    # switch_transformers' hit-expert loop: dynamo cannot iterate a size only the data knows, so the loop
    # breaks the graph wherever the ops stand; kept in the graph, they only move the break and split the
    # frame dynamo skipped whole (Switch under Inductor: 13 -> 14 graphs, 1.39x slower)
    text = _HIT_EXPERTS.format(walk=walk)
    found = findings(text, "FL106")
    assert {f.source_line.split("=")[0].strip() for f in found} >= {"rows"}
    assert all(f.fix is None for f in found)


@pytest.mark.parametrize("walk", ["for e in range(3):", "for e in chosen.unsqueeze(-1)[:3]:"])
def test_an_unbacked_op_in_a_loop_over_a_static_iterable_is_still_kept(walk):
    # a loop over a range, or over rows of an input, has a static trip count: dynamo unrolls it
    text = _HIT_EXPERTS.format(walk=walk).replace("self.experts[e[0]]", "self.experts[0]")
    if "range" in walk:
        text = text.replace("mask[e[0]]", "mask[e]")
    (found,) = [f for f in findings(text, "FL106") if "torch.where" in f.source_line]
    assert found.fix is not None
    before_m, after_m = (
        load_namespace(text, "a").Experts(),
        load_namespace(fixed(text, "FL106"), "b").Experts(),
    )
    after_m.load_state_dict(before_m.state_dict())
    x, chosen = torch.randn(6, 4), torch.tensor([0, 2, 2, 0, 0, 2])
    _, y0, _ = dynamo_graphs(before_m, x, chosen)
    _, y1, c1 = dynamo_graphs(after_m, x, chosen)
    assert torch.equal(y0, y1) and torch.equal(y0, c1)


# ---------------------------------------------------------------- the hit-experts loop (hit_loops.py)

HIT_EXPERTS = FIXTURES / "hit_experts.py"


def _tokens(count: int):
    return lambda g: (torch.randn(count, 8, generator=g),)


@pytest.mark.parametrize("cls", ["HitExperts", "SwitchExperts", "ScaledExperts"])
@pytest.mark.parametrize("tokens", [2, 12])
def test_the_hit_experts_loop_runs_over_every_expert_in_one_graph(cls, tokens):
    # 2 tokens leave some of the 4 experts unhit: their rows are empty and add nothing. ScaledExperts'
    # `if token_idx.numel() == 0: continue` needs FL102's count-test fix too (`guard_or_false`)
    text = HIT_EXPERTS.read_text()
    after_text = fixed(text, "FL1")
    assert after_text.count("for expert_idx in range(expert_hit.shape[0]):") == 3
    assert ".nonzero()" not in after_text.split("class HitExperts")[1]
    assert "expert_idx.item()" not in after_text
    assert fixed(after_text, "FL1") == after_text
    confirm_fixture_fix(text, after_text, cls, _tokens(tokens))


def test_the_hit_experts_loop_compiles_once_for_every_routing():
    after = load_namespace(fixed(HIT_EXPERTS.read_text(), "FL1"), "routings")
    for cls in (after.HitExperts, after.ScaledExperts):
        assert frames_over_inputs(cls().eval(), [(torch.randn(n, 8),) for n in (2, 2, 2)]) == 1


def _mutated(old: str, new: str) -> str:
    text = HIT_EXPERTS.read_text()
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the hit test reads another tensor than the body's mask
        (
            "torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()\n        for",
            "torch.greater(chosen, 0).nonzero()\n        for",
        ),
        # a test that is not `> 0` of the sum: an expert it leaves out may still have rows
        (
            "torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()\n        for",
            "torch.greater(expert_mask.sum(dim=(-1, -2)), 1).nonzero()\n        for",
        ),
        # the sum keeps two dims: the test is not 1-d
        (
            "expert_mask.sum(dim=(-1, -2)), 0).nonzero()\n        for",
            "expert_mask.sum(dim=(-1,)), 0).nonzero()\n        for",
        ),
        # the index in arithmetic: an int and a 0-d tensor differ there
        (
            "rows * weights[token_idx, top_k_pos, None])",
            "rows * weights[token_idx, top_k_pos, None] * expert_idx)",
        ),
        # the body writes rows another way than `index_add_`
        ("out.index_add_(0, token_idx, rows", "out[token_idx] = (rows"),
        # the body leaves the loop
        ("                continue\n            top_k_pos", "                break\n            top_k_pos"),
        # the index is read after the loop
        ("        return out\n\n\nclass Switch", "        return out + expert_idx\n\n\nclass Switch"),
        # the walked list is read again
        ("        return out\n\n\nclass Switch", "        return out, expert_hit\n\n\nclass Switch"),
        # an in-place update of a tensor the body did not make (here the layer's input)
        (
            "            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])\n            gate",
            "            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])\n            hidden_states *= 1.0\n            gate",
        ),
        # a name the body binds, read after the loop: the last expert's rows, not the last hit one's
        ("        return out\n\n\nclass Switch", "        return out, rows\n\n\nclass Switch"),
        # a name bound only where an `if` runs: an unhit expert would add an earlier expert's rows
        (
            "            rows = nn.functional.linear(",
            "            if token_idx.numel() > 0:\n                rows = nn.functional.linear(",
        ),
        # a name read before the body binds it: it carries one expert's value into the next
        (
            "            out.index_add_(0, token_idx, rows",
            "            rows = rows + carry[:1]\n            carry = rows\n            out.index_add_(0, token_idx, rows",
        ),
        # the deleted first statement shares its line with another: that one would go too
        ("            expert_idx = expert_idx[0]\n", "            expert_idx = expert_idx[0]; top = 0\n"),
        # the mask written between the test and the loop: an expert the test left out may have rows
        (
            "0).nonzero()\n        for expert_idx in expert_hit:\n            expert_idx = expert_idx[0]",
            "0).nonzero()\n        expert_mask[1] += 1\n        for expert_idx in expert_hit:\n"
            "            expert_idx = expert_idx[0]",
        ),
        # a `with` that does more than turn autograd off
        (
            "            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])\n            gate",
            "            with torch.autocast('cpu'):\n                top_k_pos, token_idx = torch.where(expert_mask[expert_idx])\n            gate",
        ),
    ],
)
def test_no_every_expert_loop_where_the_body_or_the_test_is_not_the_shape_it_relies_on(old, new):
    text = _mutated(old, new)
    after = fixed(text, "FL106")
    head = after.split("class HitExperts")[1].split("class SwitchExperts")[0]
    assert "range(expert_hit.shape[0])" not in head


_LIST_EXPERTS = """
import torch
from torch import nn


class ListExperts(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x: torch.Tensor, chosen: torch.Tensor):
        out = torch.zeros_like(x)
        expert_mask = nn.functional.one_hot(chosen, 3).unsqueeze(1).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            out.index_add_(0, top_x, expert_layer(x[top_x]))
        return out
"""


def test_no_every_expert_loop_where_a_one_element_index_picks_from_a_module_list():
    # `self.experts[tensor([e])]` is the module (older transformers Mixtral); `self.experts[e : e + 1]` would
    # be a ModuleList, so the fixed layer would raise
    found = findings(_LIST_EXPERTS, "FL106")
    assert found and not any(f.fix and "range(" in f.fix.message for f in found)
    module = load_namespace(fixed(_LIST_EXPERTS, "FL106"), "list_experts").ListExperts()
    module(torch.randn(5, 4), torch.tensor([0, 2, 2, 0, 1]))  # still runs


def test_the_every_expert_fix_is_unsafe_and_says_what_it_assumes():
    found = next(f for f in findings(HIT_EXPERTS.read_text(), "FL106") if f.fix and "range(" in f.fix.message)
    assert found.fix.applicability is Applicability.UNSAFE
    assert "no negative counts" in found.fix.message and "zero rows" in found.fix.message


# ---------------------------------------------------------------- `x[mask] += v`


@pytest.mark.parametrize(("op", "method"), [("+=", "add_"), ("-=", "sub_"), ("*=", "mul_"), ("/=", "div_")])
def test_an_augmented_masked_write_reads_its_rows_through_the_op(op, method):
    text = _snippet("x").replace(
        "        return x", f"        x = x + 1\n        x[x[:, 0] > 0] {op} r[:1]\n        return x"
    )
    after = fixed(text, "FL106")
    assert f"x[x[:, 0] > 0] = _fuselint_select_0(x, x[:, 0] > 0).{method}(r[:1])" in after
    before_m, after_m = load_namespace(text, "aug_a").M(), load_namespace(after, "aug_b").M()
    for seed in range(3):
        x, e, r = _args_for("x", seed)
        assert dynamo_break_reasons(before_m, x, e, r)
        assert dynamo_break_reasons(after_m, x, e, r) == []
        _, y0, _ = dynamo_graphs(before_m, x, e, r, compiled=False)
        _, y1, c1 = dynamo_graphs(after_m, x, e, r)
        assert torch.equal(y0, y1) and torch.equal(y0, c1)


def test_an_augmented_masked_write_keeps_the_gradient():
    text = _snippet("x").replace(
        "        return x", "        x = x * 2\n        x[x[:, 0] > 0] *= 3\n        return x"
    )
    before_m, after_m = load_namespace(text, "grad_a").M(), load_namespace(fixed(text, "FL106"), "grad_b").M()
    x, e, r = _args_for("x", 1)
    grads = []
    for m in (before_m, after_m):
        xs = x.clone().requires_grad_()
        (m(xs, e, r) * torch.arange(xs.numel()).reshape(xs.shape)).sum().backward()
        grads.append(xs.grad)
    assert torch.equal(*grads) and grads[0].abs().sum() > 0


@pytest.mark.parametrize(
    "write",
    [
        "x[x[:, 0] > 0] //= 2",  # no in-place method with `//=`'s rounding on every dtype
        "x.clone()[x[:, 0] > 0] += 1",  # a call: evaluated twice, it would read two tensors
        # `+=` computes the mask once, before `relu_` writes `x`; the rewrite again after it
        "x[x[:, 0] < 0] += torch.relu_(x)[:1]",
    ],
)
def test_no_augmented_masked_write_fix_where_the_rewrite_would_change_what_runs(write):
    text = _snippet("x").replace("        return x", f"        x = x + 1\n        {write}\n        return x")
    after = fixed(text, "FL106")
    assert write in after


def test_an_augmented_masked_write_with_a_conversion_in_its_value_is_still_fixed():
    # Higgs Audio's `hidden_states[~audio_token_mask] += text_hidden_states.to(hidden_states.device)`
    text = _snippet("x").replace(
        "        return x",
        "        x = x + 1\n        x[~(x[:, 0] > 0)] += r[:1].to(x.device)\n        return x",
    )
    after = " ".join(fixed(text, "FL106").split())
    assert "x[~(x[:, 0] > 0)] = _fuselint_select_0(x, ~(x[:, 0] > 0)).add_( r[:1].to(x.device) )" in after
