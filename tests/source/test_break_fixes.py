"""Fixes that remove graph breaks (`fuselint.source.break_fixes`), each one checked against dynamo.

Every fixture under `fixtures/breaks/` breaks the graph as written; `--fix --unsafe-fixes`
must leave one graph with no break and the same outputs.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from source_rules_helpers import confirm_fixture_fix, dynamo_graphs

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Applicability
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text
from fuselint.source.unbacked_ops import PREFIX

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"
CATALOG = load_catalog()


def _no_static_fix(finding) -> bool:
    """No fix, or only FL106's general one (the expression as a custom op with an unbacked size,
    `tests/source/test_unbacked_ops.py`): not the static-shape rewrite under test."""
    return finding.fix is None or all(e.content.startswith(PREFIX) for e in finding.fix.edits)


def _lint(text: str, select: tuple[str, ...] = ("FL101", "FL102", "FL103")):
    return lint_text("example.py", text, CATALOG, Config(select=select))


def _fixed(text: str) -> str:
    return fix_text(text, _lint, unsafe=True).text


def _load(text: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own fixture
    return module


def _trace(model, *args, compiled: bool = True) -> tuple[int, object]:
    """(graphs dynamo made, eager outputs) of one call; every graph after the first is a break."""
    graphs, eager, _ = dynamo_graphs(model, *args, compiled=compiled)
    return graphs, eager


def _before_after(name: str, cls: str, *args, compiled: bool = True):
    text = (ROOT / name).read_text()
    fixed = _fixed(text)
    assert fixed != text
    torch.manual_seed(0)
    before = getattr(_load(text, "before"), cls)().eval()
    torch.manual_seed(0)
    after = getattr(_load(fixed, "after"), cls)().eval()
    return _trace(before, *args, compiled=compiled), _trace(after, *args, compiled=compiled)


def test_guarding_host_side_effects_removes_every_break_and_keeps_outputs():
    sample, out = torch.randn(2, 8), torch.randn(2, 8)
    (g0, y0), (g1, y1) = _before_after("log_in_forward.py", "Scheduler", sample, out, 0)
    assert g0 == 4  # the logger, print and warnings.warn each end a graph
    assert g1 == 1
    assert torch.equal(y0, y1)


def test_dropping_the_mask_shortcut_removes_the_break_and_keeps_outputs():
    x = torch.randn(2, 5, 16)
    tokens = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 1, 1]])  # one row padded
    unpadded = torch.tensor([[5, 6, 7, 8, 9], [4, 6, 7, 3, 2]])
    (g0, y0), (g1, y1) = _before_after("mask_shortcut.py", "Encoder", x, unpadded)
    assert g0 == 2
    assert g1 == 1
    assert torch.allclose(y0, y1, atol=1e-6)  # the all-False mask path vs the None path
    (_, p0), (_, p1) = _before_after("mask_shortcut.py", "Encoder", x, tokens, compiled=False)
    assert torch.equal(p0, p1)  # with padding both take the masked path


def test_numpy_on_config_numbers_becomes_math_and_random_and_the_breaks_go():
    x = torch.randn(2, 10, 12)
    (g0, y0), (g1, y1) = _before_after("numpy_config.py", "Encoder", x)
    assert g0 >= 2  # the branch on np.lcm's result and the numpy draw each end a graph
    assert g1 == 1
    assert torch.equal(y0, y1)  # eval: the draw is never used


def test_numpy_fixes_are_unsafe_and_state_their_assumption():
    found = [f for f in _lint((ROOT / "numpy_config.py").read_text(), ("FL101",)) if f.fix]
    assert [f.source_line for f in found] == [
        "return np.lcm(config.lsh_chunk_length, config.local_chunk_length)",
        "dropout_probability = np.random.uniform(0, 1)",
    ]
    assert all(f.fix.applicability is Applicability.UNSAFE for f in found)
    assert "Python ints" in found[0].fix.message and "random` stream" in found[1].fix.message


def test_numpy_sum_as_an_array_dimension_becomes_the_builtin_and_the_break_goes():
    x = torch.randn(2, 8)
    (g0, y0), (g1, y1) = _before_after("numpy_sum_shape.py", "BlockSparseAttention", x)
    assert g0 == 2  # np.zeros sized by a traced np.sum is a data-dependent operator
    assert g1 == 1
    assert torch.equal(y0, y1)
    fixed = _fixed((ROOT / "numpy_sum_shape.py").read_text())
    assert "np.zeros((self.blocks, sum(plan_num_rand_blocks[: max_plan_idx + 1]))" in fixed


@pytest.mark.parametrize(
    "shape",
    [
        "np.sum(t)",  # a tensor: FL101's numpy-on-tensor finding, no fix
        "np.sum(self.sizes, axis=0)",  # not a plain sum of numbers
    ],
)
def test_numpy_sum_fix_is_not_offered_where_it_could_differ(shape):
    text = (
        "import numpy as np\nimport torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        f"    def forward(self, x, t, sizes):\n        a = np.zeros((2, {shape}))\n        return x * 2\n"
    )
    assert all(f.fix is None for f in _lint(text, ("FL101",)))


def test_numpy_sum_fix_is_not_offered_where_sum_is_shadowed():
    text = (
        "import numpy as np\nimport torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x, sizes):\n        sum = 3\n        a = np.zeros((2, np.sum(self.sizes)))\n"
        "        return x * sum\n"
    )
    found = [f for f in _lint(text, ("FL101",)) if "as an array dimension" in f.message]
    assert len(found) == 1 and found[0].fix is None


@pytest.mark.parametrize(
    "call",
    [
        "np.lcm(x.shape[0], 4)",  # not shown to be a host number: left alone
        "np.lcm(t, 4)",  # a tensor: FL101's numpy-on-tensor finding, no fix
        "np.random.uniform(0, 1, size=3)",  # an array, not one number
        "np.sum(self.config.sizes)",  # no exact standard-library twin offered
    ],
)
def test_numpy_fix_is_not_offered_where_the_values_could_differ(call):
    text = (
        "import numpy as np\nimport torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        f"    def forward(self, x, t):\n        n = {call}\n        return x * 2\n"
    )
    assert all(f.fix is None for f in _lint(text, ("FL101",)))


def test_a_wrapped_python_number_is_passed_itself_and_the_break_goes():
    x = torch.randn(2, 4, 6)
    (g0, y0), (g1, y1) = _before_after("wrapped_number.py", "WaveNet", x)
    assert g0 == 0  # the break sits in a loop: dynamo gives up on the frame and runs forward eagerly
    assert g1 == 1
    assert torch.equal(y0, y1)
    fixed = _fixed((ROOT / "wrapped_number.py").read_text())
    assert "torch.zeros_like(hidden_states), self.hidden_size)" in fixed


SLICES = "x[:, :k]"


@pytest.mark.parametrize(
    "wrapped, use, helper",
    [
        ("torch.IntTensor([self.width])", "n[0]", "x * 2"),  # the helper does not slice with it
        ("torch.IntTensor([self.width])", "n[0] + 1", SLICES),  # not the element itself
        ("torch.IntTensor([width])", "n[0]", SLICES),  # a parameter: not shown to be a number
        ("torch.IntTensor([self.width])", "n[1]", SLICES),  # no such element
        ("torch.tensor([self.width], dtype=torch.int32)", "n[0]", SLICES),  # not the plain wrapper
    ],
)
def test_wrapped_number_fix_needs_a_stable_number_and_a_slicing_helper(wrapped, use, helper):
    text = (
        f"import torch\nfrom torch import nn\n\ndef helper(x, k):\n    return {helper}\n\n"
        "class M(nn.Module):\n"
        f"    def forward(self, x, width):\n        n = {wrapped}\n        return helper(x, {use})\n"
    )
    assert all(f.fix is None for f in _lint(text, ("FL101",)))


def test_wrapped_number_fix_is_offered_for_the_plain_case():
    text = (
        f"import torch\nfrom torch import nn\n\ndef helper(x, k):\n    return {SLICES}\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n        n = torch.IntTensor([self.width])\n        return helper(x, n[0])\n"
    )
    assert "return helper(x, self.width)" in _fixed(text)


@pytest.mark.parametrize("decorator", ["@torch.jit.script", "@functools.lru_cache"])
def test_wrapped_number_fix_is_not_offered_for_a_decorated_helper(decorator):
    text = (
        f"import functools\nimport torch\nfrom torch import nn\n\n{decorator}\ndef helper(x, k):\n"
        f"    return {SLICES}\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        n = torch.IntTensor([self.width])\n        return helper(x, n[0])\n"
    )
    found = _lint(text, ("FL101",))
    assert found and all(f.fix is None for f in found)  # the break is still reported


def test_a_scripted_helper_rejects_the_python_number_in_eager():
    """Why a decorated helper gets no fix: transformers 5.17 scripts vits' helper, whose unannotated
    parameter is then a Tensor, and the number the fix would pass makes the eager call raise."""

    @torch.jit.script
    def helper(x, k):
        return x[:, :k]

    x = torch.randn(2, 4)
    assert torch.equal(helper(x, torch.IntTensor([3])[0]), x[:, :3])
    with pytest.raises(RuntimeError, match="Unable to cast"):
        helper(x, 3)


def _lint108(text: str):
    return lint_text("example.py", text, CATALOG, Config(select=("FL108",)))


def test_a_default_skipped_while_compiling_is_made_in_compiled_runs_too():
    ids = torch.randint(0, 20, (2, 5))
    text = (ROOT / "compile_only_default.py").read_text()
    fixed = fix_text(text, _lint108, unsafe=False).text  # a safe fix
    assert "is_compiling" not in fixed.split("def forward")[1]
    assert "if attention_mask is None:\n" in fixed
    torch.manual_seed(0)
    before = _load(text, "before").Encoder().eval()
    torch.manual_seed(0)
    after = _load(fixed, "after").Encoder().eval()
    (g0, y0), (g1, y1) = _trace(before, ids), _trace(after, ids)
    assert g0 == 0  # TypeError on None inside the graph: dynamo gives the frame up to eager
    assert g1 == 1
    assert torch.equal(y0, y1)


@pytest.mark.parametrize(
    "after",
    [
        "extended = inputs_embeds if attention_mask is None else attention_mask[:, :, None]",  # None expected
        "extended = attention_mask",  # passed on, not used as a tensor here
    ],
)
def test_compile_only_default_is_not_flagged_where_none_may_be_meant(after):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x, attention_mask=None):\n"
        "        if attention_mask is None and not torch.compiler.is_compiling():\n"
        "            attention_mask = torch.ones_like(x)\n"
        f"        {after}\n        return x\n"
    )
    assert _lint108(text) == []


HANDED_ON = (
    "import torch\nfrom torch import nn\n\n"
    "def split_blocks(x, block_len):\n    if x.shape[1] % block_len != 0:\n        x = x[:, :block_len]\n    return x\n\n"
    "def local_mask(mask, block_len):\n    blocks = split_blocks(mask, block_len)\n    return blocks\n\n"
    "class M(nn.Module):\n    def forward(self, x, attention_mask=None):\n"
    "        if attention_mask is None and not torch.compiler.is_compiling():\n"
    "            attention_mask = torch.ones_like(x)\n"
    "        return x * local_mask(attention_mask, 4)\n"
)


def test_compile_only_default_handed_to_helpers_that_use_it_is_flagged():
    # longt5's encoder hands the mask through two helpers to `x.shape[dim]`
    found = _lint108(HANDED_ON)
    assert len(found) == 1 and found[0].span.line == 17 and "(line 15: " in found[0].message
    assert "if attention_mask is None:\n" in fix_text(HANDED_ON, _lint108, unsafe=False).text


def test_compile_only_default_is_not_flagged_when_a_helper_expects_none():
    text = HANDED_ON.replace(
        "    if x.shape[1] % block_len", "    if x is None:\n        return x\n    if x.shape[1] % block_len"
    )
    assert _lint108(text) == []


def test_raise_on_tensor_values_becomes_an_in_graph_assert():
    x = torch.randn(2, 8)
    (g0, y0), (g1, y1) = _before_after("raise_on_values.py", "Sampler", x)
    assert g0 == 3  # each `if ...: raise` on a tensor value ends a graph
    assert g1 == 1
    assert torch.equal(y0, y1)


def test_the_in_graph_assert_still_fails_on_bad_values():
    fixed = _fixed((ROOT / "raise_on_values.py").read_text())
    model = _load(fixed, "after").Sampler()
    with torch.no_grad():
        model.proj.bias.fill_(float("nan"))
        with pytest.raises(RuntimeError, match="must be finite"):
            model(torch.randn(2, 8))


@pytest.mark.parametrize(
    "check",
    [
        '        if (x < 0).any():\n            raise ValueError(f"bad {x}")\n',  # the message reads the tensor
        "        if (x < 0).any():\n            raise ValueError(msg)\n",  # a message computed elsewhere
        "        if (x < 0).any():\n            x = x.abs()\n            raise ValueError()\n",  # more work
        "        if (x < 0).any():\n            raise ValueError()\n        else:\n            x = x + 1\n",
        "        if flag:\n            raise ValueError()\n",  # not a tensor test (not flagged either)
    ],
)
def test_raise_fix_only_for_a_bare_raise_on_a_tensor_test(check):
    text = (
        "import torch\nfrom torch import nn\nmsg = 'x'\n\nclass M(nn.Module):\n"
        f"    def forward(self, x, flag: bool = False):\n{check}        return x\n"
    )
    assert all(f.fix is None for f in _lint(text, ("FL102",)))


def test_guard_fix_is_unsafe_and_says_why():
    found = _lint((ROOT / "log_in_forward.py").read_text(), ("FL103",))
    assert len(found) == 3
    for f in found:
        assert f.fix is not None and f.fix.applicability is Applicability.UNSAFE
        assert "is_compiling" in f.fix.message and "eager runs only" in f.fix.message


def test_guard_keeps_indentation_comments_and_multiline_strings():
    text = (
        "import torch\nfrom torch import nn\nimport logging\nlogger = logging.getLogger(__name__)\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        logger.warning(  # why\n"
        '            """two\n'
        'lines"""\n'
        "        )\n"
        "        return x\n"
    )
    fixed = _fixed(text)
    assert "        if not torch.compiler.is_compiling():\n            logger.warning(  # why\n" in fixed
    assert '"""two\nlines"""' in fixed  # the string's text is unchanged
    assert _fixed(fixed) == fixed


def test_guard_moves_implicitly_concatenated_strings_with_the_call():
    # diffusers' scheduling_euler_discrete.py:742: one string literal made of two lines
    text = (
        "import torch\nfrom torch import nn\nimport logging\nlogger = logging.getLogger(__name__)\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        logger.warning(\n"
        '            "call scale_model_input "\n'
        '            "before step"\n'
        "        )\n"
        "        return x\n"
    )
    fixed = _fixed(text)
    assert (
        "        if not torch.compiler.is_compiling():\n"
        "            logger.warning(\n"
        '                "call scale_model_input "\n'
        '                "before step"\n'
        "            )\n"
    ) in fixed


@pytest.mark.parametrize(
    "body",
    [
        "        y = print(x)\n        return x\n",  # the call's value is used
        "        x = x + 1; print(x)\n        return x\n",  # shares its line
    ],
)
def test_guard_is_not_offered_where_wrapping_would_change_the_code(body):
    text = f"import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n{body}"
    found = _lint(text, ("FL103",))
    assert found and all(f.fix is None for f in found)


@pytest.mark.parametrize(
    "shortcut",
    [
        "        if not mask.any():\n            mask = None\n            x = x + 1\n",  # more than the shortcut
        "        if not mask.any():\n            other = None\n",  # another name
        "        if not mask.any():\n            mask = None\n        else:\n            x = x + 1\n",
        "        if not mask.any():  # keep\n            mask = None\n",  # a comment would go
        "        if not mask.all():\n            mask = None\n",  # not the all-False test
    ],
)
def test_mask_shortcut_fix_only_for_the_exact_shortcut(shortcut):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x, tokens):\n"
        "        mask = tokens.eq(1)\n"
        f"{shortcut}"
        "        return x if mask is None else x.masked_fill(mask, 0)\n"
    )
    shortcut_findings = [f for f in _lint(text, ("FL102",)) if f.span.line == 7]
    assert shortcut_findings and all(f.fix is None for f in shortcut_findings)


def test_guard_keeps_crlf_line_endings():
    text = "import torch\r\nfrom torch import nn\r\n\r\nclass M(nn.Module):\r\n    def forward(self, x):\r\n"
    text += "        print(x)\r\n        return x\r\n"
    (found,) = _lint(text, ("FL103",))
    assert found.fix.edits[0].content == "if not torch.compiler.is_compiling():\r\n            print(x)"


def test_first_nonzero_and_next_index_become_static_and_every_break_goes():
    x = torch.randn(2, 8)
    text = (ROOT / "next_timestep.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL102", "FL106")), unsafe=True).text
    assert "torch.nonzero_static(self.timesteps == timestep, size=1)[0, 0]" in fixed
    assert "self.timesteps[index + 1]" not in fixed
    assert "self.alphas[prev_t] if" not in fixed  # prev_t is compared with 0: an integer index
    before, after = _load(text, "before").Sampler().eval(), _load(fixed, "after").Sampler().eval()
    for t in (90, 40, 0):  # 0: the last step, where the skipped branch would index past the end
        timestep = torch.tensor(t)
        g0, y0 = _trace(before, x, timestep)
        g1, y1 = _trace(after, x, timestep)
        assert g0 >= 3  # nonzero and the `if` each end a graph (the index too, on some paths)
        assert g1 == 1
        assert torch.equal(y0, y1)


@pytest.mark.parametrize(
    "expr,want",
    [
        ("(x > 0).nonzero()[0]", "torch.nonzero_static(x > 0, size=1)[0]"),
        ("torch.nonzero(x > 0)[0][1]", "torch.nonzero_static(x > 0, size=1)[0][1]"),
        ("torch.argwhere(x)[0]", "torch.nonzero_static(x, size=1)[0]"),
        ("(x > 0).nonzero(as_tuple=True)[1][0]", "torch.nonzero_static(x > 0, size=1)[0, 1]"),
        ("torch.where(x > 0)[-1][0]", "torch.nonzero_static(x > 0, size=1)[0, -1]"),
    ],
)
def test_first_nonzero_fix_reads_the_same_element(expr, want):
    text = f"import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        return {expr}\n"
    fixed = fix_text(text, lambda t: _lint(t, ("FL106",)), unsafe=True).text
    assert f"return {want}" in fixed
    x = torch.tensor([[0.0, -1.0, 2.0], [3.0, 0.0, 4.0]])
    assert torch.equal(_load(text, "a").M()(x), _load(fixed, "b").M()(x))


@pytest.mark.parametrize(
    "expr",
    [
        "(x > 0).nonzero()[1]",  # a later row: one static row would not hold it
        "(x > 0).nonzero()",  # every row
        "(x > 0).nonzero(as_tuple=True)[0]",  # every match
        "(x > 0).nonzero(as_tuple=True)[0][1]",
        "(x > 0).nonzero()[i]",
    ],
)
def test_first_nonzero_fix_only_where_one_match_is_read(expr):
    text = f"import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x: torch.Tensor, i: int):\n        return {expr}\n"
    found = _lint(text, ("FL106",))
    assert found and all(_no_static_fix(f) for f in found)


def test_first_nonzero_fix_is_unsafe_and_says_what_changes():
    text = "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        return x.nonzero()[0]\n"
    (found,) = _lint(text, ("FL106",))
    assert found.fix.applicability is Applicability.UNSAFE
    assert "IndexError" in found.fix.message and "-1" in found.fix.message


@pytest.mark.parametrize(
    "branch",
    [
        "self.table[i]",  # a tensor index that may be out of range when the branch is skipped
        "self.table[int(i)]",
        "self.table[i + k]",  # k is not a literal
    ],
)
def test_where_fix_is_not_offered_where_the_skipped_branch_may_index_out_of_range(branch):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.table = torch.arange(4.0)\n\n"
        f"    def forward(self, x, i, k: int):\n        y = {branch} if (x > 0).all() else x\n        return y\n"
    )
    found = [f for f in _lint(text, ("FL102",)) if "conditional" in f.message]
    assert found and all(f.fix is None for f in found)


def test_where_fix_reads_a_shifted_index_in_range_with_pythons_negative_indexing():
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.table = torch.arange(0.0, 40.0, 10.0)\n\n"
        "    def forward(self, x, i: torch.Tensor):\n"
        "        y = (\n            self.table[i - 1]\n            if (x > 0).all()\n            else x.sum()\n        )\n"
        "        return y\n"
    )
    fixed = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "self.table.index_select(" in fixed and "(i - 1) % self.table.shape[0]" in fixed
    before, after = _load(text, "a").M(), _load(fixed, "b").M()
    for x in (torch.ones(3), -torch.ones(3)):
        for i in range(4):  # i = 0 reads table[-1], as Python does
            index = torch.tensor(i)
            assert torch.equal(before(x, index), after(x, index))
            g, _ = _trace(after, x, index)
            assert g == 1


def test_first_nonzero_fix_is_not_offered_on_what_may_be_a_numpy_array():
    # numpy's a.nonzero() is a tuple: a.nonzero()[0] is every index along axis 0
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x, table):\n        rows = table.nonzero()[0]\n        return x[:, rows]\n"
    )
    assert all(f.fix is None for f in _lint(text, ("FL106",)))


@pytest.mark.parametrize(
    "expr,fixed",
    [
        ("self.t[j] if j >= 0 else self.one", True),  # j compared with a number: an integer index
        ("self.t[j] if 0 <= j else self.one", True),
        ("self.t[j] if k >= 0 else self.one", False),  # j may be a mask: X[mask] has another shape
        ("self.t[j] if j == 0 else self.one", False),  # equality says nothing of j's dtype
    ],
)
def test_where_fix_reads_a_bare_index_only_when_the_test_compares_it_with_a_number(expr, fixed):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.t = torch.linspace(0.9, 0.1, 8)\n        self.one = torch.tensor(1.0)\n\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        j = (x > 0).sum() - 1\n        k = x.sum()\n"
        f"        return x * ({expr})\n"
    )
    out = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert ("torch.where(" in out) is fixed, out
    if fixed:
        for x in (torch.tensor([-1.0, -2.0]), torch.tensor([1.0, -2.0, 3.0])):  # j = -1, then 1
            assert torch.equal(_load(text, "a").M()(x), _load(out, "b").M()(x))


def _break_ids(path: Path) -> list[tuple[int, str]]:
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    return sorted((b.line, b.gb_id) for b in capture(load_entry(f"{path}:entry")).breaks)


def test_iterating_a_tuple_removes_the_comprehension_frame_break_and_keeps_outputs(tmp_path):
    text = (ROOT / "comprehension_frame.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL108",)), unsafe=True).text
    assert "for k in tuple(RECORDABLE)}" in fixed
    line = next(n for n, s in enumerate(text.splitlines(), 1) if "for k in RECORDABLE" in s)
    (tmp_path / "before.py").write_text(text)
    (tmp_path / "after.py").write_text(fixed)
    before, after = _break_ids(tmp_path / "before.py"), _break_ids(tmp_path / "after.py")
    assert (line, "gb4347") in before  # Missing tp_iternext, at the comprehension
    assert [b for b in after if b[1] == "gb4347"] == []
    assert len(after) == len(before) - 1  # the host read's break stays: no rule here removes it
    torch.manual_seed(0)
    model0, (x,) = _load(text, "before").entry()
    torch.manual_seed(0)
    model1, _ = _load(fixed, "after").entry()
    with torch.no_grad():
        assert torch.equal(model0(x), model1(x))


def test_tuple_fix_is_unsafe_and_says_why():
    found = [f for f in _lint((ROOT / "comprehension_frame.py").read_text(), ("FL108",)) if f.fix]
    assert [f.fix.applicability for f in found] == [Applicability.UNSAFE]
    assert "assumes the iterable is a container" in found[0].fix.message


def test_branches_assigning_the_same_names_become_one_where_each_and_the_break_goes():
    text = (ROOT / "paired_branch.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "        if prev_t == t - 1:" not in fixed and fixed.count("torch.where(") == 3
    assert fixed.index("beta = torch.where(") < fixed.index("alpha = torch.where(")
    before, after = _load(text, "before").Variance().eval(), _load(fixed, "after").Variance().eval()
    x = torch.randn(2, 4)
    for t, prev in ((99, 98), (99, 89), (5, -5), (0, -1)):  # one step, a stride, the last steps
        args = (x, torch.tensor(t), torch.tensor(prev))
        g0, y0 = _trace(before, *args)
        g1, y1 = _trace(after, *args)
        assert g0 >= 2  # each data-dependent test ends a graph
        assert g1 == 1
        assert torch.equal(y0, y1)


@pytest.mark.parametrize(
    "then,other",
    [
        ("a = self.t[i]\n            b = x", "b = x\n            a = self.one"),  # another order
        ("a = self.t[i]\n            b = a", "a = self.one"),  # another set of names
        ("i = self.t[i]", "i = self.one"),  # assigns what the test reads
        ("a = self.t[i]", "a = self.one\n            x.add_(1)"),  # not only assignments
    ],
)
def test_where_fix_is_not_offered_for_branches_that_assign_differently(then, other):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.t = torch.linspace(0.9, 0.1, 8)\n        self.one = torch.tensor(1.0)\n\n"
        "    def forward(self, x: torch.Tensor, i: torch.Tensor):\n"
        "        a = b = x\n"
        f"        if i == i - 1:\n            {then}\n        else:\n            {other}\n"
        "        return x * a + b\n"
    )
    found = [f for f in _lint(text, ("FL102",)) if "`if`" in f.message]
    assert found and all(f.fix is None for f in found)


def test_where_fix_reads_an_index_the_test_subtracts_an_int_from_but_not_one_it_adds_to():
    # `True + 1` is 2 but `True - 1` raises: only subtraction shows the index is not a mask
    def text(test: str) -> str:
        return (
            "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.t = torch.linspace(0.9, 0.1, 8)\n        self.one = torch.tensor(1.0)\n\n"
            "    def forward(self, x: torch.Tensor, j: torch.Tensor, k: torch.Tensor):\n"
            f"        return x * (self.t[j] if {test} else self.one)\n"
        )

    subtracted = fix_text(text("k == j - 1"), lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "self.t.index_select(0, ((j) % self.t.shape[0])" in subtracted
    added = text("k == j + 1")
    assert fix_text(added, lambda t: _lint(t, ("FL102",)), unsafe=True).text == added
    before, after = _load(text("k == j - 1"), "a").M(), _load(subtracted, "b").M()
    x = torch.randn(3)
    for j in range(-8, 8):
        for k in (j - 1, j):
            args = (x, torch.tensor(j), torch.tensor(k))
            assert torch.equal(before(*args), after(*args))


def test_an_if_without_else_selects_the_value_from_before_it_and_the_break_goes():
    text = (ROOT / "kept_before_if.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "variance = torch.where((t > 0) & (self.eta > 0), std * noise, variance)" in fixed
    x, noise = torch.randn(2, 4), torch.randn(2, 4)
    for eta in (1.0, 0.0):
        before = _load(text, "before").NoiseTerm(eta).eval()
        after = _load(fixed, "after").NoiseTerm(eta).eval()
        for t in (99, 5, 0):  # the last step takes the value from before the `if`
            args = (x, torch.tensor(t), noise)
            g0, y0 = _trace(before, *args)
            g1, y1 = _trace(after, *args)
            assert g0 >= 2 and g1 == 1
            assert y0.dtype == y1.dtype and torch.equal(y0, y1)


@pytest.mark.parametrize(
    "before,test",
    [
        ("", "t > 0"),  # not bound before the `if`: no value to keep
        ("        variance = 0\n        del variance\n", "t > 0"),  # unbound again
        ("        variance = 0\n", "t > 0 and self.scale"),  # `and` with a number: not a condition
    ],
)
def test_an_if_without_else_is_not_rewritten_without_a_value_to_keep(before, test):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.scale = 2\n\n"
        "    def forward(self, x: torch.Tensor, t: torch.Tensor):\n"
        f"{before}"
        f"        if {test}:\n            variance = x * 2\n"
        "        return x + variance\n"
    )
    found = [f for f in _lint(text, ("FL102",)) if "`if`" in f.message]
    assert found and all(f.fix is None for f in found)


@pytest.mark.parametrize("variance_type", ["fixed_small", "learned"])
def test_a_noise_branch_runs_on_every_call_and_a_whole_loop_is_unchanged(variance_type):
    text = (ROOT / "noise_branch.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "        variance = torch.where(t > 0, variance, variance_kept)\n" in fixed
    before = _load(text, "before").NoisyStep(variance_type).eval()
    after = _load(fixed, "after").NoisyStep(variance_type).eval()
    sample = torch.randn(2, 4)
    # torch's global generator: dynamo cannot take a `torch.Generator` argument into a graph
    # (it breaks at a draw from one, fixed or not)
    for t in (50, 0):
        torch.manual_seed(1)
        g0, y0 = _trace(before, sample, torch.tensor(t))
        torch.manual_seed(1)
        g1, y1 = _trace(after, sample, torch.tensor(t))
        assert g0 >= 2 and g1 == 1
        assert torch.equal(y0, y1)
    # a sampling loop down to t = 0, where the original skips the draw
    gen0, gen1 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    x0 = x1 = sample
    for t in range(90, -1, -10):
        x0 = before(x0, torch.tensor(t), gen0)
        x1 = after(x1, torch.tensor(t), gen1)
        assert x0.dtype == x1.dtype and torch.equal(x0, x1)
    # where it is not equal: the generator, one draw further on after the loop
    assert not torch.equal(torch.randn(3, generator=gen0), torch.randn(3, generator=gen1))
    gen0, gen1 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    for t in range(90, -1, -10):
        before(sample, torch.tensor(t), gen0), after(sample, torch.tensor(t), gen1)
    torch.randn(sample.shape, generator=gen0)  # the one draw the fixed step made at t = 0
    assert torch.equal(torch.randn(3, generator=gen0), torch.randn(3, generator=gen1))


def test_noise_branch_fix_is_unsafe_and_states_the_generator_and_the_loop():
    text = (ROOT / "noise_branch.py").read_text()
    (fix,) = [f.fix for f in _lint(text, ("FL102",)) if f.fix and "variance_kept" in f.fix.edits[0].content]
    assert fix.applicability is Applicability.UNSAFE
    assert "last step" in fix.message and "draws from it again after the loop" in fix.message


@pytest.mark.parametrize(
    "body,before",
    [
        ("self.count = 1\n            variance = noise", "variance = 0"),  # an attribute store
        ("noise.add_(1)\n            variance = noise", "variance = 0"),  # an in-place write
        ("variance = noise\n            return variance", "variance = 0"),  # a return
        ("t = t - 1\n            variance = noise", "variance = 0"),  # sets what the test reads
        ("variance = noise", "pass"),  # nothing bound before: no value to keep
        ("print(noise)\n            variance = noise", "variance = 0"),  # a call for its effect
    ],
)
def test_noise_branch_fix_is_not_offered_where_the_branch_does_more_than_set_names(body, before):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x: torch.Tensor, t: torch.Tensor):\n"
        f"        {before}\n"
        "        if t > 0:\n"
        f"            noise = torch.randn(x.shape)\n            {body}\n"
        "        return x + variance\n"
    )
    found = [f for f in _lint(text, ("FL102",)) if "`if`" in f.message]
    assert found and all(f.fix is None for f in found)


def test_equal_values_are_compared_before_the_tensor_test_and_the_break_goes_with_churn_off():
    text = (ROOT / "equal_values.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL102",)), unsafe=True).text
    assert "!= 0.0\n            and s_tmin <= sigma <= s_tmax" in fixed
    assert fix_text(fixed, lambda t: _lint(t, ("FL102",)), unsafe=True).text == fixed  # idempotent
    before, after = _load(text, "before").EulerStep(), _load(fixed, "after").EulerStep()
    out, sample = torch.randn(2, 4), torch.randn(2, 4)
    for sigma in (14.6, 3.0, 0.5):
        args = (out, torch.tensor(sigma), sample)
        g0, y0 = _trace(before, *args)
        g1, y1 = _trace(after, *args)
        assert g0 >= 2 and g1 == 1
        assert torch.equal(y0, y1)
        for churn, tmax in ((0.5, 1e4), (0.5, 1.0), (0.0, 1.0)):  # churn on: the test runs as before
            torch.manual_seed(0)
            y0 = before(*args, s_churn=churn, s_tmax=tmax)
            torch.manual_seed(0)
            y1 = after(*args, s_churn=churn, s_tmax=tmax)
            assert torch.equal(y0, y1)


@pytest.mark.parametrize(
    "expr",
    [
        "x.mean() if s_tmin <= sigma else 0.0",  # a tensor value: the where fix's case
        "float(x.sum()) if s_tmin <= sigma else 0.0",  # a call that reads a tensor
        "self.scale() if s_tmin <= sigma else 0.0",  # a call that may do anything
        "1 if s_tmin <= sigma else 0",  # two literals: never equal, the test decides
        "LIMIT if s_tmin <= sigma else 0.0",  # a global: may be a tensor, `!=` would read it
        "self.limit if s_tmin <= sigma else 0.0",  # an attribute that is no config field
    ],
)
def test_equal_values_fix_only_for_two_host_numbers(expr):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x: torch.Tensor, sigma: torch.Tensor, s_tmin: float = 0.0):\n"
        f"        gamma = {expr}\n"
        "        return x * gamma\n"
    )
    found = [f for f in _lint(text, ("FL102",)) if "conditional" in f.message]
    assert found and all(f.fix is None or "torch.where" in f.fix.edits[0].content for f in found)


def test_a_computed_index_is_read_as_a_tensor_index_and_the_break_goes():
    text = (ROOT / "computed_index.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL101",)), unsafe=True).text
    assert "self.alphas_cumprod[timestep_s.unsqueeze(0).to(self.alphas_cumprod.device)][0]" in "".join(
        fixed.split()
    )
    before, after = _load(text, "before").TableRead(), _load(fixed, "after").TableRead()
    sample = torch.randn(2, 4)
    for index in range(9):
        before.step_index = after.step_index = index
        g0, y0 = _trace(before, sample)
        g1, y1 = _trace(after, sample)
        assert g0 == 2 and g1 == 1
        assert y0.dtype == y1.dtype and torch.equal(y0, y1)


@pytest.mark.parametrize(
    "j", [3, -1, -100, 0, [1, 2], [[0], [-2]], [4]], ids=["3", "-1", "-100", "0", "1d", "2d", "one"]
)
def test_tensor_index_read_gives_pythons_values_shapes_and_errors(j):
    table = torch.randn(100, 3)
    for x in (table, table[:, 0]):
        j_ = torch.tensor(j)
        got = x[j_.unsqueeze(0)][0]
        want = x[j_]
        assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)
    for bad in (torch.tensor(100), torch.tensor(-101)):
        with pytest.raises(IndexError):
            table[bad]
        with pytest.raises(IndexError):
            table[bad.unsqueeze(0)][0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_tensor_index_read_on_the_tables_device():
    # review12: diffusers' DDIM keeps `alphas_cumprod` on the CPU and moves `timesteps` to the GPU;
    # a 0-d index is read as a number, a 1-d one must be on the CPU or the table's device.
    table, j = torch.randn(10), torch.tensor(7, device="cuda")
    with pytest.raises(RuntimeError, match="same device as the indexed tensor"):
        table[j.unsqueeze(0)][0]
    assert torch.equal(table[j.unsqueeze(0).to(table.device)][0], table[j])


def test_tensor_index_fix_reads_the_table_twice_only_where_that_is_a_plain_reference():
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.table = torch.linspace(0, 1, 16)\n\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        a = self.table[x.argmax()]\n"
        "        b = self.make()[x.argmax()]\n"
        "        return x * a * b\n"
    )
    fixes = [f.fix.edits[0].content for f in _lint(text, ("FL101",)) if f.fix is not None]
    # `x` is a parameter: the index is made a tensor on the table's device
    assert fixes == ["self.table[torch.as_tensor(x.argmax(), device=self.table.device).unsqueeze(0)][0]"]


@pytest.mark.parametrize(
    "line",
    [
        "y = self.table[x.argmax() > 0]",  # a boolean index is a mask
        "self.table[x.argmax()] = 1.0",  # a store
        "y = self.table[x.argmax()] if x.argmax() > 0 else x",  # FL102's where fix reads it
        "y = self.table[3]",  # a Python int: a view, no break
    ],
)
def test_tensor_index_fix_only_for_a_read_at_an_integer_tensor_index(line):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.table = torch.linspace(0, 1, 16)\n\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        y = x\n"
        f"        {line}\n"
        "        return x * y\n"
    )
    fixes = [f.fix for f in _lint(text, ("FL101",)) if f.fix is not None]
    assert not any("unsqueeze(0)" in fix.edits[0].content for fix in fixes)


@pytest.mark.parametrize(
    "body",
    [
        "progress_bar.update(1)",
        "progress_bar.update(len(x))",
        "progress_bar.set_postfix(loss=x.item(), step=f'{x.shape[0]}')",
    ],
)
def test_progress_bar_context_fix_where_the_guarded_calls_only_read(body):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        with self.progress_bar(total=3) as progress_bar:\n"
        "            x = x * 2\n"
        f"            {body}\n"
        "        return x\n"
    )
    found = _lint(text, ("FL108",))
    assert len(found) == 1 and found[0].fix is not None
    assert f"if not torch.compiler.is_compiling():\n                {body}" in _fixed_with(text, ("FL108",))


def _fixed_with(text: str, select: tuple[str, ...]) -> str:
    return fix_text(text, lambda t: _lint(t, select), unsafe=True).text


def test_a_loop_over_a_progress_bar_iterates_the_items_while_compiling_and_the_break_goes():
    text = (ROOT / "progress_bar.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL108",)), unsafe=True).text
    assert "(self.timesteps if torch.compiler.is_compiling() else self.progress_bar(self.timesteps))" in fixed
    assert fix_text(fixed, lambda t: _lint(t, ("FL108",)), unsafe=True).text == fixed  # idempotent
    torch.manual_seed(0)
    before = _load(text, "before").Sampler()
    torch.manual_seed(0)
    after = _load(fixed, "after").Sampler()
    x = torch.randn(2, 8)
    g0, y0 = _trace(before, x)
    g1, y1 = _trace(after, x)
    assert g0 == 0  # the skipped call in the loop's header sends the whole frame to eager
    assert g1 == 1
    assert torch.equal(y0, y1)
    assert after.shown == 1  # eager still shows the bar; the compiled call did not
    fix = next(f.fix for f in _lint(text, ("FL108",)) if f.fix is not None)
    assert fix.applicability is Applicability.UNSAFE and "eager runs only" in fix.message


def test_a_progress_bar_entered_with_with_is_skipped_while_compiling_and_the_break_goes():
    text = (ROOT / "progress_bar_context.py").read_text()
    fixed = fix_text(text, lambda t: _lint(t, ("FL108",)), unsafe=True).text
    assert (
        "with (contextlib.nullcontext() if torch.compiler.is_compiling() else "
        "self.progress_bar(total=len(self.timesteps))) as progress_bar:"
    ) in fixed
    assert "if not torch.compiler.is_compiling():\n                    progress_bar.update()" in fixed
    assert "import contextlib" in fixed
    assert fix_text(fixed, lambda t: _lint(t, ("FL108",)), unsafe=True).text == fixed  # idempotent
    torch.manual_seed(0)
    before = _load(text, "before").Sampler()
    torch.manual_seed(0)
    after = _load(fixed, "after").Sampler()
    x = torch.randn(2, 8)
    g0, y0 = _trace(before, x)
    g1, y1 = _trace(after, x)
    assert g0 == 0  # the skipped call in the `with` header sends the whole frame to eager
    assert g1 == 1
    assert torch.equal(y0, y1)
    assert after.shown == 3  # eager still updates the bar once a step; the compiled call did not
    fix = next(f.fix for f in _lint(text, ("FL108",)) if f.fix is not None)
    assert fix.applicability is Applicability.UNSAFE and "eager runs only" in fix.message


@pytest.mark.parametrize(
    "body",
    [
        "x = x * progress_bar.n",  # the bar's value is read: a null context has none
        "progress_bar.update(progress_bar.total)",  # a read inside the guarded call too
        "progress_bar = None",  # rebound
        "progress_bar.update()  # step",  # a comment the rewrite would drop
        # the guard would skip its arguments' work while compiling: the model's computation changes
        "progress_bar.set_postfix(loss=self.advance(x))",
        "progress_bar.update(self.counts.pop())",
        "progress_bar.update(n := 1)",  # binds n only in eager
        "progress_bar.update(len(x))\n            len = 3",  # len is not the builtin here
    ],
)
def test_progress_bar_context_fix_only_where_every_read_is_a_statement_call(body):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        with self.progress_bar(total=3) as progress_bar:\n"
        "            x = x * 2\n"
        "            progress_bar.update()\n"
        f"            {body}\n"
        "        return x\n"
    )
    found = _lint(text, ("FL108",))
    assert len(found) == 1 and found[0].fix is None


@pytest.mark.parametrize(
    "loop",
    [
        "for t in self.progress_bar(total=3):",  # no iterable: nothing to iterate instead
        "for t in self.progress_bar(*self.timesteps):",  # starred: which argument is the iterable?
        "for t in self.own_bar(self.timesteps):",  # another method of another file: may do anything
    ],
)
def test_progress_bar_fix_only_where_the_bar_wraps_a_known_iterable(loop):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        {loop}\n"
        "            x = x * t\n"
        "        return x\n"
    )
    assert not [f for f in _lint(text, ("FL108",)) if f.fix is not None]


def test_a_progress_bar_of_the_same_class_counts_only_when_marked_disabled():
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def progress_bar(self, it):\n        return it\n\n"
        "    def forward(self, x):\n"
        "        for t in self.progress_bar([1, 2]):\n"
        "            x = x * t\n"
        "        return x\n"
    )
    assert not _lint(text, ("FL108",))
    marked = text.replace("    def progress_bar", "    @torch.compiler.disable\n    def progress_bar")
    assert [f.fix is not None for f in _lint(marked, ("FL108",))] == [True]


def test_a_stored_default_lambda_selects_in_the_graph_and_the_break_goes():
    text = (ROOT / "stored_lambda.py").read_text()
    fixed = _fixed(text)
    assert "lambda t: torch.where(" in fixed  # the fixer wraps the long line
    assert "(torch.as_tensor(t) >= 200) & (torch.as_tensor(t) <= 800), 1, 0" in fixed
    assert _fixed(fixed) == fixed  # idempotent
    before, after = _load(text, "before").NoiseStep(), _load(fixed, "after").NoiseStep()
    sample, noise = torch.randn(2, 4), torch.randn(2, 4)
    for t in (999, 800, 500, 200, 199, 0):  # both values of tau, and the bounds
        g0, y0 = _trace(before, sample, noise, torch.tensor(t))
        g1, y1 = _trace(after, sample, noise, torch.tensor(t))
        assert g0 >= 2 and g1 == 1
        assert torch.equal(y0, y1)
        tau = after.tau_func(t)  # a Python-int timestep: the same value, as a 0-d int64 tensor
        assert tau.dtype == torch.int64 and tau.dim() == 0 and tau.item() == before.tau_func(t)
    fix = next(f.fix for f in _lint(text, ("FL102",)) if f.fix is not None)
    assert fix.applicability is Applicability.UNSAFE and "0-d int64 tensor" in fix.message


@pytest.mark.parametrize(
    "lam",
    [
        "lambda t: 1.5 if t >= 200 else 0",  # a float: float32 where Python computed in float64
        "lambda t: 1 if t >= self.low else 0",  # an operand that is no literal
        "lambda t: 1 if t in (1, 2) else 0",  # membership, not a comparison
        "lambda t, s=1: 1 if t >= 200 else 0",  # a default: another caller may pass it
    ],
)
def test_stored_lambda_fix_only_for_comparisons_with_numbers_and_two_ints(lam):
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        f"    def __init__(self):\n        super().__init__()\n        self.low = 1\n        self.f = {lam}\n\n"
        "    def forward(self, x: torch.Tensor, t: torch.Tensor):\n"
        "        return x * self.f(t)\n"
    )
    assert not [f for f in _lint(text, ("FL102",)) if f.fix is not None]


def test_a_stored_lambda_called_with_a_python_number_is_not_flagged():
    text = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.f = lambda t: 1 if t >= 2 else 0\n\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        return x * self.f(x.shape[0])\n"
    )
    assert not _lint(text, ("FL102",))


# ---------------------------------------------------------------- FL106: the second match, else the first

_SECOND_MATCH = (
    "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
    "    def forward(self, x: torch.Tensor, t):\n"
    "        indices = (x == t).nonzero()\n"
    "        pos = 1 if len(indices) > 1 else 0\n"
    "        return indices[pos]\n"
)


def _fix_fl106(text: str) -> str:
    return fix_text(text, lambda t: _lint(t, ("FL106",)), unsafe=True).text


def test_second_match_becomes_static_and_the_break_goes_with_no_recompile():
    text = (ROOT / "second_match.py").read_text()
    fixed = _fix_fl106(text)
    assert "torch.nonzero_static(" in fixed and "size=2, fill_value=-1" in fixed
    assert "pos = 1 if" not in fixed and "torch.where(indices[1] >= 0, indices[1], indices[0])" in fixed
    before, after = _load(text, "before").Scheduler(), _load(fixed, "after").Scheduler()
    x = torch.randn(2, 3)
    for t in before.timesteps.unique():  # single and repeated timesteps
        g0, y0 = _trace(before, x, t)
        g1, y1 = _trace(after, x, t)
        assert g0 >= 2  # the nonzero ends a graph
        assert g1 == 1
        assert torch.equal(y0, y1)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(after, backend=counter, fullgraph=True)
    for t in (750.0, 0.0, 999.0):  # new values of the same shape: no new graph
        assert torch.equal(compiled(x, torch.tensor(t)), before(x, torch.tensor(t)))
    assert counter.frame_count == 1


def test_second_match_fix_reads_the_same_row_for_every_mask_with_a_match():
    fixed = _fix_fl106(_SECOND_MATCH)
    assert "pos" not in fixed
    before, after = _load(_SECOND_MATCH, "a").M(), _load(fixed, "b").M()
    generator = torch.Generator().manual_seed(0)
    seen = set()
    for shape in ((6,), (3, 4), (2, 2, 3)):
        for _ in range(40):
            x = torch.randint(0, 3, shape, generator=generator)
            matches = int((x == 1).sum())
            if matches:
                seen.add(min(matches, 2))
                assert torch.equal(before(x, 1), after(x, 1))
    assert seen == {1, 2}  # both the first-match and the second-match paths were checked


def test_second_match_fix_is_unsafe_and_says_what_happens_with_no_match():
    (found,) = _lint(_SECOND_MATCH, ("FL106",))
    assert found.fix.applicability is Applicability.UNSAFE
    assert "IndexError" in found.fix.message and "-1" in found.fix.message
    fixed = _fix_fl106(_SECOND_MATCH)
    with pytest.raises(IndexError):
        _load(_SECOND_MATCH, "a").M()(torch.zeros(4), 1)
    assert _load(fixed, "b").M()(torch.zeros(4), 1).tolist() == [-1]


@pytest.mark.parametrize(
    "old,new",
    [
        # another read of the buffer would see two padded rows (LTX's `if len(indices) == 0: raise`)
        (
            "        return indices[pos]\n",
            "        if len(indices) == 0:\n            raise ValueError\n        return indices[pos]\n",
        ),
        ("        return indices[pos]\n", "        return indices[pos] + pos\n"),  # `pos` read again
        ("        return indices[pos]\n", "        indices = indices * 2\n        return indices[pos]\n"),
        ("len(indices) > 1", "len(indices) > 2"),  # a third match
        ("1 if len", "2 if len"),
        (".nonzero()", ".nonzero(as_tuple=True)"),
        ("x: torch.Tensor, t", "x, t"),  # a tensor only by its name: numpy's nonzero is a tuple
        ("        pos = 1 if", "        y = x\n        pos = 1 if"),  # not the next statement
        ("import torch\n", "import torch\n\ndef len(v):\n    return 2\n\n"),  # not the builtin
    ],
)
def test_second_match_fix_only_on_the_idiom_alone(old, new):
    text = _SECOND_MATCH.replace(old, new)
    assert text != _SECOND_MATCH
    found = _lint(text, ("FL106",))
    assert found and all(_no_static_fix(f) for f in found)


def test_second_match_fix_refuses_a_len_bound_in_the_function():
    text = _SECOND_MATCH.replace("        indices = (x", "        len = lambda v: 2\n        indices = (x")
    found = _lint(text, ("FL106",))
    assert found and all(_no_static_fix(f) for f in found)


_CANDIDATES = (ROOT / "step_candidates.py").read_text()


def test_second_match_with_a_fallback_gives_the_same_index_for_every_timestep_and_drops_the_nonzero_break():
    fixed = _fix_fl106(_CANDIDATES)
    assert (
        "elif" not in fixed and "# the second match where there are several\n        step_index = " in fixed
    )
    assert "index_candidates[0] >= 0, index_candidates[0], len(self.timesteps) - 1" in fixed
    before, after = _load(_CANDIDATES, "a").M(), _load(fixed, "b").M()
    x = torch.ones(2)
    for t in (9.0, 6.0, 3.0, 0.0, 5.0):  # one match, two, and none (the fallback, no stated difference)
        g0, y0 = _trace(before, x, torch.tensor(t))
        g1, y1 = _trace(after, x, torch.tensor(t))
        assert torch.equal(y0, y1)
        # the nonzero's break goes; the `.item()` the code asks for stays (with no match the
        # original reads no row, so it broke at the nonzero only)
        assert g1 == (g0 - 1 if t != 5.0 else g0)
    (found,) = _lint(_CANDIDATES, ("FL106",))
    assert found.fix.applicability is Applicability.UNSAFE and "fallback" in found.fix.message


@pytest.mark.parametrize(
    "old,new",
    [
        ("len(self.timesteps) - 1", "self.last()"),  # a call that may do anything, now on every call
        ("len(self.timesteps) - 1", "0.5"),  # not an int: torch.where would give a float
        ("index_candidates[1].item()", "index_candidates[-1].item()"),
        ("> 1:", "> 2:"),
        ("        return x * step_index\n", "        return x * step_index + len(index_candidates)\n"),
        (
            "            step_index = index_candidates[0].item()\n",
            "            other = index_candidates[0].item()\n",
        ),
        ("= len(self.timesteps) - 1\n", "= len(self.timesteps) - 1  # the last\n"),  # a comment after code
    ],
)
def test_second_match_with_a_fallback_only_on_the_idiom(old, new):
    text = _CANDIDATES.replace(old, new)
    assert text != _CANDIDATES
    found = _lint(text, ("FL106",))
    assert found and all(_no_static_fix(f) for f in found)


def test_keeping_the_item_as_a_0d_tensor_removes_the_break_and_keeps_outputs():
    text = (ROOT / "item_scale.py").read_text()
    fixed = _fixed(text)
    assert "        peak = x.abs().amax()\n" in fixed and "amax().item()\n" not in fixed

    def make(generator):
        return (torch.randn(3, 8, generator=generator) * 4,)

    confirm_fixture_fix(text, fixed, "PeakNormalize", make)


_BESIDE = """
import torch
from torch import nn

class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.alphas = torch.linspace(0.1, 1.0, 100)
        self.one = torch.tensor(1.0)

    def forward(self, x, t):
        prev_t = t - 10
        a = self.alphas[t]
        b = self.alphas[prev_t] if prev_t >= 0 else self.one
        return x * a + b
"""


def _aot_graphs(model, calls) -> tuple[int, list]:
    """Graphs dynamo compiled with AOT's lowering (what Inductor and the fuselint backend see), and the outputs."""
    from torch._dynamo.backends.registry import lookup_backend

    torch._dynamo.reset()
    graphs = []

    def counted(gm, example_inputs):
        graphs.append(gm)
        return lookup_backend("aot_eager")(gm, example_inputs)

    compiled = torch.compile(model, backend=counted)
    outputs = [compiled(*args) for args in calls]
    return len(graphs), outputs


def test_the_where_fix_reads_the_tables_other_0d_reads_as_1d_so_aot_keeps_one_graph():
    # DDPM's `alphas_cumprod[t]` beside the wrapped `alphas_cumprod[prev_t]`: AOT lowers the plain 0-d read
    # through `.item()` and the backend's compile splits the graph (bench/index_0d_probe.py)
    fixed = _fixed(_BESIDE)
    assert "a = self.alphas[torch.as_tensor(t, device=self.alphas.device).unsqueeze(0)][0]" in fixed
    (found,) = [f for f in _lint(_BESIDE, ("FL102",)) if f.fix]
    assert len(found.fix.edits) == 2 and "the same element as a copy" in found.fix.message
    where_only = fixed.replace(
        "self.alphas[torch.as_tensor(t, device=self.alphas.device).unsqueeze(0)][0]", "self.alphas[t]"
    )
    ts = torch.arange(90, -1, -10)
    calls = [(torch.randn(4), t) for t in (ts[0], torch.tensor(50), ts[-1])]
    before = _load(_BESIDE, "a").Step()
    expected = [before(*args) for args in calls]
    for text, graphs in ((where_only, 2), (fixed, 1)):
        count, outs = _aot_graphs(_load(text, "b").Step(), calls)
        assert count == graphs
        assert all(torch.equal(o, e) for o, e in zip(outs, expected, strict=True))
    # the read itself takes a caller's Python int too
    step = _load(fixed, "c").Step()
    assert torch.equal(
        step.alphas[torch.as_tensor(15, device=step.alphas.device).unsqueeze(0)][0], step.alphas[15]
    )


def test_the_where_fix_says_a_non_finite_skipped_branch_reaches_the_gradient():
    """Forward values are the taken branch's, but torch.where's backward multiplies the skipped branch's
    zero gradient by its derivative: a NaN or inf there (a division by zero Python never ran) makes the
    gradient NaN. The fix's message must say so."""
    import torch

    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    y = torch.where(x.max() > 5, x / (x - x), x)  # the fixed form of `if x.max() > 5: y = x / (x - x)` else x
    y.sum().backward()
    assert torch.equal(y.detach(), x.detach()) and torch.isnan(x.grad).all()
    text = (ROOT / "paired_branch.py").read_text()
    found = lint_text("paired_branch.py", text, load_catalog(), Config(select=("FL102",)))
    messages = [
        f.fix.message for f in found if f.fix and f.fix.message.startswith("select with `torch.where`")
    ]
    assert messages and all("stays finite" in m and "gradient" in m for m in messages)
