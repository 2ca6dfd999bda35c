"""FL101: host syncs are flagged where a tensor reaches the host, and only there."""

from __future__ import annotations

from source_rules_helpers import findings, fixed, lines

MODULE = """
import math
import numpy as np
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x, lengths, n_heads: int = 4):
{body}
"""


def body(*statements: str) -> str:
    return MODULE.format(body="\n".join("        " + s for s in statements))


def test_item_tolist_numpy_on_tensors_are_flagged():
    src = body("a = x.sum().item()", "b = lengths.tolist()", "c = x.detach().cpu().numpy()", "return a, b, c")
    assert lines(src, "FL101") == [9, 10, 11]


def test_conversions_numpy_and_math_on_tensors_are_flagged():
    src = body("a = int(x.max())", "b = np.asarray(x)", "c = math.sqrt(x.mean())", "return a, b, c")
    assert lines(src, "FL101") == [9, 10, 11]


def test_tensor_slice_bounds_and_sizes_are_implicit_items():
    src = body("m = lengths.max()", "y = x[:, :m]", "z = torch.arange(m)", "return y, z")
    assert lines(src, "FL101") == [10, 11]


def test_host_values_are_not_flagged():
    src = body(
        "b, n, d = x.shape",
        "k = int(d ** 0.5)",
        "h = int(n_heads)",
        "y = x[:, : n // 2]",
        "z = torch.arange(x.size(1))",
        "w = math.sqrt(d)",
        "v = np.sqrt(h)",
        "return x.view(b, n, k, -1), y, z, w, v",
    )
    assert lines(src, "FL101") == []


def test_item_on_a_value_the_code_computed_as_a_python_float_is_not_flagged():
    # diffusers' kvae video VAE: the isinstance guard is never true, dynamo traces it clean.
    src = body(
        "time_factor = 1.0 + 1.0 * (x.size(2) > 1)",
        "if isinstance(time_factor, torch.Tensor):",
        "    time_factor = time_factor.item()",
        "return x.repeat_interleave(int(time_factor), dim=2)",
    )
    assert lines(src, "FL101") == []


def test_item_on_a_tensor_under_the_same_guard_is_flagged():
    src = body(
        "factor = x.sum()",
        "if isinstance(factor, torch.Tensor):",
        "    factor = factor.item()",
        "return x * factor",
    )
    assert lines(src, "FL101") == [11]


def test_a_size_parameter_guessed_from_its_name_is_not_a_host_read():
    src = MODULE.replace("lengths, n_heads: int = 4", "bs, lengths").format(
        body="        y = x.view(bs, -1)\n        return y.view(lengths.sum(), -1)"
    )
    assert lines(src, "FL101") == [10]


def test_code_outside_model_functions_is_not_flagged():
    src = """
import torch

def postprocess(logits):
    return logits.argmax(-1).tolist()
"""
    assert lines(src, "FL101") == []


def test_item_feeding_only_tensor_arithmetic_is_fixed_by_keeping_the_tensor():
    src = body("s = x.mean().item()", "return x * s + x / s")
    assert "s = x.mean()\n" in fixed(src, "FL101")
    inline = body("return x * (x.mean() + 1).item()")
    assert "return x * (x.mean() + 1)\n" in fixed(inline, "FL101")


def test_item_used_on_the_host_has_no_fix():
    src = body("s = x.mean().item()", "return x * s, round(s)")
    (finding,) = [f for f in findings(src, "FL101")]
    assert finding.fix is None
    twice = body("s = x.mean().item()", "s = s + 1", "return x * s")
    assert all(f.fix is None for f in findings(twice, "FL101"))


def test_cpu_copy_handed_to_a_host_library_is_flagged():
    src = """
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

class Matcher(nn.Module):
    def forward(self, cost):
        rows, cols = linear_sum_assignment(cost.cpu())
        same_device = torch.as_tensor(cost.cpu())
        return rows, cols, same_device
"""
    assert lines(src, "FL101") == [8]


def test_a_parameter_guessed_from_its_name_is_no_slice_bound_or_branch_on_its_own():
    # torchaudio's _HDecLayer.forward(x, skip, length): `length` is a Python int its caller passes;
    # only its name made it a tensor, and a guess is not enough to report a host read
    src = (
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
        "    def forward(self, x, length):\n"
        "        z = x[..., self.pad : self.pad + length]\n"
        "        if z.shape[-1] != length:\n"
        "            raise ValueError('bad')\n"
        "        m = x.sum()\n"
        "        return x[..., : self.pad + m]\n"
    )
    assert lines(src, "FL101") == [10]
    assert lines(src, "FL102") == []


def test_a_numpy_branch_of_a_value_known_to_be_a_tensor_is_dead():
    # MONAI's point sampling: `p` is a row of a tensor, so `isinstance(p, np.ndarray)` is False
    # and only the tensor branch runs (its `.tolist()` is the real sync).
    src = body(
        "for p in x.round():",
        "    if isinstance(p, np.ndarray):",
        "        a = np.round(p).astype(int).tolist()",
        "    else:",
        "        a = p.int().tolist()",
        "return a",
    )
    assert lines(src, "FL101") == [13]
    # A value the code does not show to be a tensor may be an array: dynamo breaks on its
    # `.tolist()` (torch 2.13), so the numpy branch stays checked.
    unknown = src.replace("for p in x.round():", "for p in self.points:")
    assert lines(unknown, "FL101") == [11, 13]


def test_numpy_of_a_tensor_says_dynamo_traces_it_and_where_the_graph_breaks():
    # dynamo (torch 2.13) traces `x.cpu().numpy()` and numpy calls on it as tensor ops: one graph;
    # the sync on a GPU tensor stays, and the graph breaks where the array reaches Python code
    src = body("a = x.cpu().numpy()", "b = lengths.tolist()", "return a, b")
    by_line = {f.span.line: f.message for f in findings(src) if f.code == "FL101"}
    assert "dynamo traces the numpy calls on it" in by_line[9] and "breaks the graph here" not in by_line[9]
    assert "dynamo breaks the graph here" in by_line[10]
