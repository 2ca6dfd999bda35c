"""FL102's int-twin fix: 0-d int buffers read as Python numbers (fixtures/breaks/int_buffers.py).

Dynamo (torch 2.13) breaks on the tensor paddings in every layer of the fixture (9 or 10 graphs); with
the twins the model is one graph and every output is bit-equal. The snippets below check the cases the fix
must leave alone.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from source_rules_helpers import dynamo_graphs

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Applicability
from fuselint.source.fixer import fix_text
from fuselint.source.int_buffers import CEIL_BOUND
from fuselint.source.lint import lint_text

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "int_buffers.py"
CATALOG = load_catalog()


def _lint(text: str, select: tuple[str, ...] = ("FL101", "FL102")):
    return lint_text("example.py", text, CATALOG, Config(select=select))


def _twin_fixes(text: str):
    return [f for f in _lint(text, ("FL102",)) if f.fix and "int twin" in f.fix.message]


def _load(text: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own fixture
    return module


CONV = """
import torch
from torch import nn

class Conv(nn.Module):
    def __init__(self, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.Conv1d(2, 2, kernel_size, stride)
{register}

    @staticmethod
    def _pad1d(x, paddings):
        left, right = paddings
        if x.shape[-1] <= max(left, right):
            x = nn.functional.pad(x, (0, 1))
        return nn.functional.pad(x, paddings, "reflect")

    def forward(self, x):
        right = self.padding_total // 2
{use}
        return self.conv(self._pad1d(x, (self.padding_total - right, right)))
{after}
"""
REGISTER = "        self.padding_total = nn.Buffer(torch.tensor(kernel_size - stride), persistent=False)"


def _conv(register: str = REGISTER, use: str = "", after: str = "") -> str:
    return CONV.format(register=register, use=use, after=after)


def test_int_twins_remove_the_branch_in_every_layer_and_outputs_stay_bit_equal():
    torch = pytest.importorskip("torch")
    text = FIXTURE.read_text()
    fixed = fix_text(text, _lint, unsafe=True).text
    assert "self.padding_total_int = kernel_size_int - stride_int" in fixed
    assert "math.ceil(n_frames) - 1" in fixed
    for length in (2, 3, 9, 16, 37):  # 2 and 3 take the short-input branch of the first layer
        torch.manual_seed(0)
        before = _load(text, "before").Encoder().eval()
        torch.manual_seed(0)
        after = _load(fixed, "after").Encoder().eval()
        x = torch.randn(2, 4, length)
        g0, y0, c0 = dynamo_graphs(before, x)
        g1, y1, c1 = dynamo_graphs(after, x)
        # tensor paddings break each of the three layers; the short-input path (2, 3) also slices
        # by a tensor bound
        assert g0 == (10 if length <= 3 else 9)
        assert g1 == 1
        assert torch.equal(y0, y1) and torch.equal(c0, c1) and torch.equal(y0, c1)


def test_buffers_and_state_dict_are_kept():
    pytest.importorskip("torch")
    text = FIXTURE.read_text()
    fixed = fix_text(text, _lint, unsafe=True).text
    before, after = _load(text, "before").Encoder(), _load(fixed, "after").Encoder()
    assert list(before.state_dict()) == list(after.state_dict())
    assert [(n, b.dtype, b.tolist()) for n, b in before.named_buffers()] == [
        (n, b.dtype, b.tolist()) for n, b in after.named_buffers()
    ]
    layer = after.layers[2]  # kernel 3, dilation 3: effective kernel 7
    assert (layer.kernel_size_int, layer.stride_int, layer.padding_total_int) == (7, 1, 6)


def test_twins_are_made_on_the_meta_device_too():
    torch = pytest.importorskip("torch")
    fixed = fix_text(FIXTURE.read_text(), _lint, unsafe=True).text
    module = _load(fixed, "after")
    with torch.device("meta"):
        layer = module.Conv1dPadded(4, 4, stride=2)
    assert layer.padding_total.is_meta
    assert layer.padding_total_int == 2


def test_fix_is_unsafe_states_its_assumptions_and_is_applied_once():
    text = FIXTURE.read_text()
    (found,) = _twin_fixes(text)
    assert found.fix.applicability is Applicability.UNSAFE
    assert "`stride`, `kernel_size`, `padding_total`" in found.fix.message
    assert f"{CEIL_BOUND:,}" in found.fix.message and "return an int" in found.fix.message
    fixed = fix_text(text, _lint, unsafe=True).text
    assert not _lint(fixed)  # the branch and the tensor slice bound (FL101) are both gone
    assert fix_text(fixed, _lint, unsafe=True).text == fixed


def test_the_plain_case_is_fixed():
    (found,) = _twin_fixes(_conv())
    fixed = fix_text(_conv(), _lint, unsafe=True).text
    assert "        self.padding_total_int = kernel_size - stride\n" in fixed
    assert "right = self.padding_total_int // 2" in fixed
    assert found.fix.imports == ()  # no quotient to round: no `math`, no bound on lengths
    assert "float32" not in found.fix.message


@pytest.mark.parametrize(
    "register",
    [
        # persistent: a checkpoint may load another value
        "        self.padding_total = nn.Buffer(torch.tensor(kernel_size - stride))",
        '        self.register_buffer("padding_total", torch.tensor(kernel_size - stride))',
        # float, or not visibly an int
        "        self.padding_total = nn.Buffer(torch.tensor(0.5 * kernel_size), persistent=False)",
        "        self.padding_total = nn.Buffer(torch.tensor(kernel_size, dtype=torch.float32), persistent=False)",
        "        self.padding_total = nn.Buffer(torch.tensor(self.conv.padding[0]), persistent=False)",
        # an int32 tensor wraps where a Python int does not
        "        self.padding_total = nn.Buffer(torch.tensor(kernel_size, dtype=torch.int32), persistent=False)",
        # not registered at the top of __init__
        f"        if stride > 1:\n    {REGISTER}",
    ],
)
def test_buffers_that_may_not_hold_the_int_get_no_twin(register):
    assert _lint(_conv(register), ("FL102",))  # still flagged
    assert not _twin_fixes(_conv(register))


def test_register_buffer_with_persistent_false_is_fixed():
    register = (
        '        self.register_buffer("padding_total", torch.tensor(kernel_size - stride), persistent=False)'
    )
    assert _twin_fixes(_conv(register))


@pytest.mark.parametrize(
    "after",
    [
        # written again with another value
        "\ndef shrink(model):\n    model.padding_total.copy_(torch.tensor(1))\n",
        "\ndef shrink(model):\n    model.padding_total.fill_(model.conv.kernel_size[0])\n",
        "\ndef shrink(model):\n    model.padding_total += 1\n",
        "\ndef shrink(model):\n    model.padding_total = torch.tensor(3)\n",
        "\ndef shrink(model):\n    nn.init.zeros_(model.padding_total)\n",
        "\ndef shrink(model, k):\n    model.padding_total.copy_(torch.tensor(k - model.conv.stride[0]))\n",
    ],
)
def test_buffer_written_with_another_value_gets_no_twin(after):
    assert not _twin_fixes(_conv(after=after))


def test_buffer_written_again_with_its_own_value_keeps_the_twin():
    after = (
        "\ndef reset(model):\n    kernel_size = model.conv.kernel_size[0]\n"
        "    stride = model.conv.stride[0]\n    model.padding_total.copy_(torch.tensor(kernel_size - stride))\n"
    )
    register = (
        "        kernel_size = self.conv.kernel_size[0]\n        stride = self.conv.stride[0]\n"
        "        self.padding_total = nn.Buffer(torch.tensor(kernel_size - stride, dtype=torch.int64), persistent=False)"
    )
    assert _twin_fixes(_conv(register, after=after))
    other = after.replace("kernel_size - stride", "kernel_size + stride")
    assert not _twin_fixes(_conv(register, after=other))


@pytest.mark.parametrize(
    "use",
    [
        "        x = x * self.padding_total.to(x.dtype)",
        "        x = x + torch.cat([self.padding_total.view(1)] * x.shape[-1])",
        "        x = x + self.padding_total",  # broadcast as a tensor: a 0-d tensor, not a number
        "        print(f'{right}')",  # formatted: `tensor(3)` is not `3`
        "        self.last = right",  # stored where other code may read it as a tensor
    ],
)
def test_buffer_used_as_a_tensor_gets_no_twin(use):
    assert not _twin_fixes(_conv(use=use))


def test_a_helper_that_callers_outside_the_class_see_keeps_its_tensor():
    text = _conv(
        use="        right = right + self.extra()",
        after="\n    def extra(self):\n        return self.padding_total % 2\n",
    )
    assert not _twin_fixes(text)
    private = text.replace("self.extra()", "self._extra()").replace("def extra", "def _extra")
    assert _twin_fixes(private)
    called = private + "\ndef probe(m):\n    return m._extra()\n"
    assert not _twin_fixes(called)


def test_a_quotient_must_be_rounded_to_an_int():
    rounded = "        right = torch.ceil(self.padding_total / 2).to(torch.int64)"
    assert _twin_fixes(_conv(use=rounded))
    assert "math.ceil(self.padding_total_int / 2)" in fix_text(_conv(use=rounded), _lint, unsafe=True).text
    assert not _twin_fixes(_conv(use="        right = self.padding_total / 2"))
    assert not _twin_fixes(_conv(use="        right = torch.ceil(self.padding_total / 2)"))


def test_a_helper_may_not_return_a_quotient():
    use = "        right = torch.ceil(self._half()).to(torch.int64)"
    quotient = "\n    def _half(self):\n        return self.padding_total / 2\n"
    assert not _twin_fixes(_conv(use=use, after=quotient))  # a float64 where a float32 tensor was returned
    rounded = "\n    def _half(self):\n        return torch.ceil(self.padding_total / 2).to(torch.int64)\n"
    assert _twin_fixes(_conv(use="        right = self._half()", after=rounded))


DERIVED = (
    "        self.padding_total = nn.Buffer(torch.tensor(kernel_size - stride), persistent=False)\n"
    "        self.padding_right = self.padding_total // 2"
)


def test_an_attribute_computed_from_a_twinned_buffer_gets_a_twin_too():
    use = "        right = self.padding_right + 0"
    fixed = fix_text(_conv(DERIVED, use=use), _lint, unsafe=True).text
    assert "        self.padding_right_int = self.padding_total_int // 2\n" in fixed
    assert "right = self.padding_right_int + 0" in fixed
    other = "\ndef widen(model):\n    model.padding_right = model.padding_total // 2 + 1\n"
    assert not _twin_fixes(_conv(DERIVED, use=use, after=other))  # only its own value may be written
    float_part = DERIVED.replace("// 2", "* 0.5")
    assert "padding_right_int" not in fix_text(_conv(float_part, use=use), _lint, unsafe=True).text


@pytest.mark.parametrize(
    "rounded",
    [
        "torch.ceil(self.padding_total * 0.5).to(torch.int64)",  # float64 product where float32 was
        "torch.ceil(self.padding_total / 2 / 3).to(torch.int64)",  # two roundings of a quotient
        "torch.ceil(self.padding_total / 2 * 3).to(torch.int64)",
        "torch.ceil(self.padding_total / x.shape[-1] ** 2).to(torch.int64)",
    ],
)
def test_only_an_int_quotient_plus_or_minus_ints_is_rounded_by_math(rounded):
    assert not _twin_fixes(_conv(use=f"        right = {rounded}"))
    plus = "torch.ceil(self.padding_total / x.shape[-1] + 1).to(torch.int64) - 1"
    assert _twin_fixes(_conv(use=f"        right = {plus}"))


def test_a_store_into_the_buffer_blocks_the_twin_and_another_class_own_attribute_does_not():
    assert not _twin_fixes(_conv(after="\ndef poke(model):\n    model.padding_total[...] = 2\n"))
    other = "\nclass Other(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.padding_total = 5\n"
    assert _twin_fixes(_conv(after=other))
    subclass = other.replace("class Other(nn.Module)", "class Other(Conv)")
    assert not _twin_fixes(_conv(after=subclass))
