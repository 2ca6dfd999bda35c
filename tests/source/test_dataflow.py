"""The dataflow's kinds: which names and expressions hold tensors at each point of a function."""

from __future__ import annotations

import ast
import textwrap

from fuselint.source.dataflow import BOOL, DIM, MAYBE, MODULE, TENSOR, flows
from fuselint.source.module import SourceFile
from fuselint.source.scope import model_functions


def _flows(source: str):
    sf = SourceFile.parse("m.py", textwrap.dedent(source))
    return sf, flows(model_functions(sf.tree, sf.imports, sf.text), sf.imports)


def kinds_at_return(source: str, function: str = "forward") -> dict[str, str]:
    """The environment before the first `return` of `function`."""
    _, all_flows = _flows(source)
    flow = next(f for f in all_flows if f.fn.node.name == function)
    return dict(flow.of(ast.Return)[0].env)


HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def test_parameters_are_tensors_unless_default_type_or_name_says_not():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x, attention_mask=None, output_attentions=False, config=None, height=None,
                scale: float = 1.0, ids: torch.LongTensor = None, n: int = 3, sizes: list[int] = None,
                past_key_values=None, mask: torch.BoolTensor = None, *args, **kwargs):
        return x
"""
    )
    assert env == {"x": TENSOR, "attention_mask": TENSOR, "ids": TENSOR, "mask": BOOL}


def test_torch_calls_methods_arithmetic_and_indexing_give_tensors():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x):
        a = torch.zeros(3)
        b = F.gelu(x)
        c = x.sum(-1) * 2
        d = 2 + x[0]
        e = x > 0
        f = (x > 0) & (x < 1)
        g = x.T
        h = x.shape
        i = x.size(0)
        j = len(x)
        k = x.dim()
        l = torch.is_tensor(x)
        m = torch.jit.is_scripting()
        n = x.item()
        o = self.proj(x)
        p = x.bool()
        return a
"""
    )
    assert {k: env.get(k) for k in "abcdefghijklmnop"} == {
        "a": TENSOR, "b": TENSOR, "c": TENSOR, "d": TENSOR, "e": BOOL, "f": BOOL, "g": TENSOR,
        "h": "shape", "i": DIM, "j": DIM, "k": None, "l": None, "m": None, "n": None, "o": MAYBE, "p": BOOL,
    }  # fmt: skip


def test_tuple_unpacking_of_tensor_pairs_and_shapes():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x):
        values, idx = x.topk(2)
        top, arg = x.max(dim=-1)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        b, n, c = x.shape
        h, w = x.shape[-2:]
        out, weights = self.attn(x)
        biggest = x.max()
        return values
"""
    )
    assert [env[n] for n in ("values", "idx", "top", "arg", "q", "k", "v")] == [TENSOR] * 7
    assert [env[n] for n in ("b", "n", "c", "h", "w")] == [DIM] * 5
    assert env["out"] == env["weights"] == MAYBE
    assert env["biggest"] == TENSOR


def test_reassigning_a_host_value_removes_the_tensor_and_branches_merge():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x, flag: bool):
        y = x
        y = y.shape[0]
        if flag:
            z = x * 2
        else:
            z = 1.0
        for layer in self.layers:
            w = layer(x)
        return y
"""
    )
    assert "y" not in env or env["y"] == DIM
    assert env["z"] == TENSOR
    assert env["w"] == MAYBE and env["layer"] == MODULE


def test_isinstance_narrows_a_parameter_to_a_host_value():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x):
        if isinstance(x, (list, tuple)):
            return x
        return x
"""
    )
    assert "x" not in env


def test_helper_parameters_take_the_kinds_their_callers_pass():
    _, all_flows = _flows(
        HEADER
        + """
def helper(hidden, size, maybe_mask=None):
    return hidden

class M(nn.Module):
    def forward(self, x):
        return helper(x, x.shape[0])
"""
    )
    helper = next(f for f in all_flows if f.fn.node.name == "helper")
    env = helper.of(ast.Return)[0].env
    assert env == {"hidden": TENSOR}


def test_code_dynamo_never_traces_is_not_recorded():
    _, all_flows = _flows(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x):
        if not torch.compiler.is_compiling():
            print("eager")
        if torch.jit.is_scripting():
            print("script")
        else:
            y = x.sum().item()
        raise ValueError(f"{x.sum().item()}")
"""
    )
    calls = [ast.unparse(s.node) for s in all_flows[0].of(ast.Call)]
    assert not any(c.startswith("print") for c in calls)
    assert calls.count("x.sum().item()") == 1  # the else branch, not the raise


def test_loop_carried_kinds_reach_the_top_of_the_loop():
    _, all_flows = _flows(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x):
        acc = 0
        for i in range(4):
            if acc > 1:
                break
            acc = acc + x
        return acc
"""
    )
    flow = all_flows[0]
    test_site = next(s for s in flow.of(ast.If))
    assert flow.kind(test_site.node.test, test_site.env) == BOOL


def test_static_methods_take_their_callers_arguments_from_the_first_position():
    _, all_flows = _flows(
        HEADER
        + """
class M(nn.Module):
    @staticmethod
    def positions(embeds, padding_idx):
        return embeds

    def forward(self, x):
        return self.positions(x, self.padding_idx)
"""
    )
    helper = next(f for f in all_flows if f.fn.node.name == "positions")
    assert helper.of(ast.Return)[0].env == {"embeds": TENSOR}


def test_a_negated_isinstance_narrows_the_path_that_skips_the_branch():
    env = kinds_at_return(
        HEADER
        + """
def helper(size):
    if not isinstance(size, (list, tuple)):
        size = size.tolist()
    return size

class M(nn.Module):
    def forward(self, x):
        return helper(x.sum(0))
""",
        function="helper",
    )
    assert "size" not in env
