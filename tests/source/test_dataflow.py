"""The dataflow's kinds: which names and expressions hold tensors at each point of a function."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from fuselint.source.dataflow import BOOL, DIM, LIST, MAYBE, MODULE, SCALAR, TENSOR, flows
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
    assert env["x"] == LIST  # a host container, not a tensor


def test_host_values_the_code_computes_are_scalars_and_lists():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x, caches=None):
        factor = 1.0 + 1.0 * (x.size(2) > 1)
        flag = not (x.shape[0] > 2)
        pads = [None] * len(x)
        sizes = (3, 4)
        y = x * 2.0
        return x
"""
    )
    assert env["factor"] == SCALAR and env["flag"] == SCALAR
    assert env["pads"] == LIST and env["sizes"] == LIST
    assert env["y"] == TENSOR


def test_a_host_kind_survives_a_merge_only_when_both_paths_agree():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x, c: bool):
        a = 1.0
        b = 2
        if c:
            a = x.sum()
            d = 3
        else:
            e = [1, 2]
        return x
"""
    )
    assert env["a"] == TENSOR  # a tensor on one path is a tensor
    assert env["b"] == SCALAR
    assert "d" not in env and "e" not in env  # known on one path only: no claim


def _paths(source: str) -> dict[str, str | None]:
    """The path of each call's site, by the called name."""
    _, all_flows = _flows(HEADER + textwrap.dedent(source))
    return {ast.unparse(site.node.func): site.path for flow in all_flows for site in flow.of(ast.Call)}


def test_sites_in_deprecation_misuse_and_error_branches_carry_their_path():
    paths = _paths(
        """
import logging
logger = logging.getLogger(__name__)

class M(nn.Module):
    def forward(self, x, cross_attention_kwargs=None, use_cache=False, **kwargs):
        if cross_attention_kwargs is not None:
            if cross_attention_kwargs.get("scale", None) is not None:
                logger.warning("Passing `scale` to `cross_attention_kwargs` is deprecated.")
        unused = [k for k in kwargs if k != "a"]
        if len(unused) > 0:
            logger.warning(f"attention_kwargs {unused} are not expected and will be ignored.")
        if x.dim() != 3:
            print(x.shape)
            raise ValueError("x must be 3-d")
        if use_cache:
            x.mean()
        if torch.isnan(x).any():
            logger.warning("NaN in the input")
        return torch.relu(x)
"""
    )
    assert paths["cross_attention_kwargs.get"] is None  # the test runs on every call
    assert paths["logger.warning"] is None  # the last one, a warning about the data
    assert paths["print"] == "error"
    assert paths["x.mean"] is None
    assert paths["torch.isnan(x).any"] is None
    assert paths["torch.relu"] is None
    deprecation = _paths(
        """
import logging
logger = logging.getLogger(__name__)

class M(nn.Module):
    def forward(self, x, cross_attention_kwargs=None, **kwargs):
        if cross_attention_kwargs.get("scale", None) is not None:
            logger.warning("Passing `scale` is deprecated.")
            x.float()
        if kwargs:
            logger.warning_once(f"{list(kwargs)} are not expected and will be ignored.")
        return x
"""
    )
    assert deprecation["logger.warning"] == "deprecation" and deprecation["x.float"] == "deprecation"
    assert deprecation["logger.warning_once"] == "misuse"


def test_a_branch_that_always_fails_an_assert_is_an_error_path():
    paths = _paths(
        """
class M(nn.Module):
    def forward(self, boxes):
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        if degenerate.any():
            bad = boxes[torch.where(degenerate.any(dim=1))[0][0]].tolist()
            torch._assert(False, f"invalid box {bad}")
        if boxes.dim() != 2:
            boxes.float()
            assert False, "2-d boxes"
        if boxes.numel() == 0:
            boxes.half()
            torch._assert(boxes.numel() == 0, "checked")
        return boxes
"""
    )
    assert paths["torch.where"] == "error" and paths["boxes.float"] == "error"
    assert paths["boxes.dim"] is None and paths["boxes.half"] is None


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


def test_a_union_of_a_tensor_and_a_python_number_is_not_taken_for_a_tensor():
    env = kinds_at_return(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x: torch.Tensor | None, max_len: "int | torch.Tensor", scale: Union[float, torch.Tensor],
                ids: torch.IntTensor):
        return x
"""
    )
    assert env == {"x": TENSOR, "ids": TENSOR}


def test_a_branch_that_calls_deprecate_is_a_deprecation_path():
    # diffusers: the message is a variable, the call to `deprecate` says what the branch is for.
    paths = _paths(
        """
class GEGLU(nn.Module):
    def forward(self, x, *args, **kwargs):
        if len(args) > 0 or kwargs.get("scale", None) is not None:
            message = "The `scale` argument will be ignored."
            deprecate("scale", "1.0.0", message)
        return torch.relu(x)
"""
    )
    assert paths["deprecate"] == "deprecation"
    assert paths["torch.relu"] is None


def _node_state(tree: ast.AST) -> list[tuple[str, tuple[str, ...]]]:
    return [(type(n).__name__, tuple(sorted(vars(n)))) for n in ast.walk(tree)]


def test_flows_store_nothing_on_the_shared_ast_nodes():
    """Every rule of a file reads the same tree: the analysis keeps its caches in its own tables."""
    root = Path(__file__).resolve().parents[2] / "fixtures"
    checked = 0
    for path in sorted(root.rglob("*.py")):
        sf = SourceFile.parse(str(path), path.read_text())
        functions = model_functions(sf.tree, sf.imports, sf.text)
        if not functions:
            continue
        before, dump = _node_state(sf.tree), ast.dump(sf.tree, include_attributes=True)
        result = flows(functions, sf.imports)
        assert any(flow.sites for flow in result)
        assert _node_state(sf.tree) == before, path
        assert ast.dump(sf.tree, include_attributes=True) == dump, path
        checked += 1
    assert checked >= 20


def test_each_statement_kind_walks_its_bodies_and_merges_their_kinds():
    _, all_flows = _flows(
        HEADER
        + """
class M(nn.Module):
    def forward(self, x, n: int = 2):
        while n > 0:
            w = x.sum()
            n -= 1
        with torch.no_grad():
            v = x * 2
        try:
            t = x.exp()
        except ValueError:
            t = None
        match n:
            case 1:
                m = x.abs()
            case _:
                m = 0
        assert n >= 0
        del n
        return w, v, t, m
"""
    )
    flow = all_flows[0]
    env = flow.of(ast.Return)[0].env
    assert {name: env.get(name) for name in ("w", "v", "t", "m")} == {
        "w": TENSOR,
        "v": TENSOR,
        "t": TENSOR,
        "m": TENSOR,
    }
    called = {ast.unparse(site.node) for site in flow.of(ast.Call)}
    assert {"x.sum()", "torch.no_grad()", "x.exp()", "x.abs()"} <= called
    assert len(flow.of(ast.While)) == len(flow.of(ast.With)) == len(flow.of(ast.Match)) == 1
    assert len(flow.of(ast.Assert)) == len(flow.of(ast.Delete)) == 1


def test_an_except_block_is_an_error_path_unless_it_catches_a_lookup():
    paths = _paths(
        """
import warnings

class M(nn.Module):
    def forward(self, x):
        try:
            y = torch.linalg.inv(x)
        except (RuntimeError, ValueError):
            warnings.warn("singular")
        try:
            z = self.cache["k"]
        except KeyError:
            print(x.shape)
        try:
            w = torch.linalg.cholesky(x)
        except Exception:
            x.float()
        return y
"""
    )
    assert paths["warnings.warn"] == "error"
    assert paths["print"] is None  # a missing key takes another normal way
    assert paths["x.float"] == "error"
    assert paths["torch.linalg.inv"] is None


def test_a_warning_that_a_quoted_argument_is_ignored_is_a_misuse_path():
    # MONAI's losses: `softmax=True` on a single-channel prediction is ignored, with a warning
    paths = _paths(
        """
import warnings

class M(nn.Module):
    def forward(self, x, softmax: bool = False):
        if x.shape[1] == 1:
            if softmax:
                warnings.warn("single channel prediction, `softmax=True` ignored.")
        else:
            x = torch.softmax(x, 1)
        if x.isnan().any():
            print("NaN values ignored")
        return x
"""
    )
    assert paths["warnings.warn"] == "misuse"
    assert paths["print"] is None  # a warning about the data, not about an argument


def test_warnings_that_the_input_is_wrong_are_misuse_and_a_warn_beside_a_raise_is_an_error():
    # torchaudio's mu-law and TimeStretch dtype checks, kornia's unknown config key, MONAI's
    # RetinaNet NaN check (raises with grad enabled, warns without); a warning about data stays normal.
    paths = _paths(
        """
import warnings

class M(nn.Module):
    def forward(self, x, config=None):
        if not x.is_floating_point():
            warnings.warn("The input Tensor must be of floating type. This will be an error in v0.12.")
        if not torch.is_complex(x):
            logger.warning("Providing non-complex tensor produces invalid results.")
        for key in config:
            if key not in self.known:
                logger.warning_once(f"Custom configuration contains a key which is not recognized ({key}).")
        if x.isnan().any():
            if torch.is_grad_enabled():
                raise ValueError("NaN in predicted boxes.")
            else:
                logger.error("NaN in predicted boxes.")
        if x.shape[0] > 8:
            logger.debug("large batch")
        return x
"""
    )
    assert paths["warnings.warn"] == "misuse"
    assert paths["logger.warning"] == "misuse"
    assert paths["logger.warning_once"] == "misuse"
    assert paths["logger.error"] == "error"
    assert paths["logger.debug"] is None


def test_flows_are_shared_by_the_rules_of_a_file_and_die_with_its_analysis():
    import gc

    from fuselint.source import nodes
    from fuselint.source.dataflow import FunctionFlow

    source = (
        HEADER
        + "class M(nn.Module):\n    def forward(self, x):\n        if x.sum() > 0:\n            x = x + 1\n        return x\n"
    )
    sf = SourceFile.parse("m.py", source)
    functions = model_functions(sf.tree, sf.imports, sf.text)
    with nodes.remembered_walks():
        first = flows(functions, sf.imports)
        assert flows(functions, sf.imports) is first
    assert flows(functions, sf.imports) is not first  # outside a file's analysis: made afresh
    del first
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, FunctionFlow) and o.fn in functions]
