"""Which names hold tensors: a small, honest forward dataflow over one model function.

Source rules need to tell `x.sum() > 0` (a tensor value: a graph break) from
`x.size(0) > 0` (a host number: fine). This module walks a function's statements in
order once, keeping an environment that maps local names to a *kind*:

- ``tensor``: a tensor (``bool`` when it is known to hold booleans: a comparison, `.bool()`);
- ``maybe``: what a submodule call returns, a tensor or a tuple of tensors (HF layers
  return tuples); strong enough for method calls and comparisons, not for `for row in x`;
- ``tuple``: a tuple or list of tensors (`x.chunk(2)`, `(a, b)`);
- ``module``: a submodule (`for layer in self.layers`);
- ``shape`` / ``dim``: a tensor's shape and a host integer read off it (`b, n, _ = x.shape`, `len(x)`);
- ``scalar`` / ``list``: a Python number, bool or string (`1.0 + (n > 1)`), and a Python list or
  tuple of host values (`[None] * n`, a name narrowed by `isinstance(x, list)`): values the code
  shows to live on the host, which rules may trust where a mere absence of kind proves nothing.

Branches and loops merge environments by union (a name that may be a tensor is one); a host
kind survives a merge only where both paths agree on it.
While walking, it records every expression node of every live statement as a `Site`
(node, environment before the statement, statement), indexed by node type, so each
rule reads the sites it cares about instead of walking the tree again. Statements that
dynamo never traces (`if not torch.compiler.is_compiling(): ...`, `if torch.jit.is_scripting():`)
and `raise` statements are not recorded.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from fuselint.source.aliases import resolved, union_members
from fuselint.source.docstring_types import documented_host_params
from fuselint.source.imports import ImportTable
from fuselint.source.nodes import child_nodes, last_name, made_once, of_types, stored_names, walk
from fuselint.source.nodes import self_attribute as _self_attr
from fuselint.source.paths import DEPRECATION, MISUSE, branch_path, handler_path, warns_of_override
from fuselint.source.scope import FunctionNode, ModelFunction, own_nodes
from fuselint.source.tracing_truth import compile_truth, live_nodes

TENSOR, BOOL, MAYBE, TUPLE, MODULE = "tensor", "bool", "maybe", "tuple", "module"
SHAPE, DIM = "shape", "dim"
SCALAR, LIST = "scalar", "list"
# A numpy value computed from Python numbers (`np.lcm(config.a, config.b)`): dynamo traces numpy
# through `torch._numpy`, so to it this is a 0-d tensor, and a branch on it breaks the graph
# (gb0170); arithmetic on it and `int()`/`float()` of it do not (checked with torch 2.13, see
# `fuselint.source.numpy_numbers`).
NUMPY = "numpy"
# An argument that is a parameter taken for a tensor on its name alone: a tensor for the callee,
# but not proof enough to overrule the callee's own annotation, and a guess there too where no
# caller hands more (see `parameter_kinds`).
GUESS = "guess"
HOST = frozenset({SCALAR, LIST})  # shown by the code to be Python values on the host
_NUMBERS = frozenset({SCALAR, DIM})  # host numbers: arithmetic and comparisons on them stay on the host
TENSORS = frozenset({TENSOR, BOOL})  # surely a tensor
TENSORISH = frozenset({TENSOR, BOOL, MAYBE})  # a tensor, or a tuple of them from a submodule

Env = dict[str, str]

# Tensor methods that read a size: their result is a Python number or a shape, whatever tensor they
# are called on.
SIZE_READS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride"})
# Tensor methods whose result lives on the host (a Python number, a shape, a flag).
HOST_METHODS = SIZE_READS | frozenset(
    {
        "storage_offset",
        "is_contiguous", "is_floating_point", "is_complex", "is_signed", "data_ptr", "get_device",
        "item", "tolist", "numpy", "equal", "allclose", "is_nonzero", "is_pinned", "is_shared",
        "is_set_to", "has_names", "untyped_storage", "storage", "dim_order", "is_inference",
        "__len__", "type_as_str", "nbytes", "itemsize", "keys", "values", "items", "get",
        "get_seq_length", "get_usable_length", "get_max_length", "get_max_cache_shape",
    }
)  # fmt: skip
# Attributes of a tensor that are tensors again; every other attribute (shape, dtype) is host.
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})
# Tensor methods that return several tensors.
TUPLE_METHODS = frozenset(
    {"split", "chunk", "unbind", "topk", "sort", "tensor_split", "split_with_sizes", "kthvalue",
     "aminmax", "unflatten_tuple", "hsplit", "vsplit", "dsplit", "frexp", "slogdet"}
)  # fmt: skip
# Reductions that return (values, indices) when given a dim.
DIM_TUPLE_METHODS = frozenset({"max", "min", "median", "mode", "nanmedian", "cummax", "cummin"})
BOOL_METHODS = frozenset(
    {"eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "greater_equal", "less_equal", "not_equal",
     "bool", "isnan", "isinf", "isfinite", "isneginf", "isposinf", "logical_and", "logical_or",
     "logical_not", "logical_xor", "any", "all", "isclose", "isin", "signbit", "isreal"}
)  # fmt: skip
# Comparison methods of tensors that numpy arrays and Python numbers lack (`x.lt(eps)`,
# `x.isnan()`): on a value the flow does not know, the receiver is a tensor and the result a
# boolean one (gpytorch's `if variance.lt(min_variance).any():`, gb0170).
TENSOR_ONLY_BOOL_METHODS = BOOL_METHODS - {"any", "all", "bool"}
# torch functions that return no tensor.
NON_TENSOR_TORCH = frozenset(
    {
        "torch.is_tensor", "torch.is_storage", "torch.is_floating_point", "torch.is_complex",
        "torch.is_nonzero", "torch.numel", "torch.typename", "torch.get_default_dtype",
        "torch.is_grad_enabled", "torch.is_inference_mode_enabled", "torch.is_autocast_enabled",
        "torch.get_autocast_gpu_dtype", "torch.get_autocast_dtype", "torch.result_type",
        "torch.promote_types", "torch.can_cast", "torch.broadcast_shapes", "torch.equal",
        "torch.allclose", "torch.finfo", "torch.iinfo", "torch.device", "torch.dtype",
        "torch.no_grad", "torch.enable_grad", "torch.set_grad_enabled", "torch.inference_mode",
        "torch.autocast", "torch.manual_seed", "torch.seed", "torch.initial_seed",
        "torch.are_deterministic_algorithms_enabled", "torch.get_num_threads", "torch.set_num_threads",
        "torch.set_default_dtype", "torch.use_deterministic_algorithms", "torch.is_same_size",
        "torch.get_device", "torch.nn.functional.pad_size", "torch.sym_int", "torch.sym_float",
        "torch.sym_max", "torch.sym_min", "torch.sym_not",
    }
)  # fmt: skip
NON_TENSOR_TORCH_PREFIXES = (
    "torch.jit.", "torch.cuda.", "torch.compiler.", "torch.distributed.", "torch.backends.",
    "torch._dynamo.", "torch.utils.", "torch.fx.", "torch.onnx.", "torch.testing.", "torch.overrides.",
    "torch.library.", "torch.mps.", "torch.xpu.", "torch.npu.", "torch.hub.", "torch.amp.",
    "torch._C.", "torch.autograd.graph.", "torch.profiler.", "torch.export.", "torch.cpu.",
    "torch.nn.init.", "torch.nn.utils.", "torch.nn.parameter.", "torch.serialization.",
    "torch.nn.parallel.",  # scatter/gather/replicate: tuples and module replicas
)  # fmt: skip
TORCH_TUPLES = frozenset(
    {
        "torch.split", "torch.chunk", "torch.unbind", "torch.topk", "torch.sort", "torch.meshgrid",
        "torch.broadcast_tensors", "torch.tensor_split", "torch.std_mean", "torch.var_mean",
        "torch.aminmax", "torch.kthvalue", "torch.frexp", "torch.histogram", "torch.hsplit", "torch.autograd.grad",
        "torch.vsplit", "torch.linalg.eigh", "torch.linalg.qr", "torch.linalg.svd", "torch.linalg.eig",
        "torch.linalg.slogdet", "torch.linalg.lstsq", "torch.atleast_1d",
    }
)  # fmt: skip
TORCH_DIM_TUPLES = frozenset({"torch.max", "torch.min", "torch.median", "torch.mode", "torch.cummax",
                              "torch.cummin", "torch.nanmedian"})  # fmt: skip
TORCH_BOOLS = frozenset(
    {f"torch.{n}" for n in BOOL_METHODS - {"bool", "any", "all"}} | {"torch.any", "torch.all"}
)
# Parameter names that hold host values in model code (sizes, flags, options).
_HOST_PARAM_NAMES = frozenset(
    {
        "config", "cfg", "H", "W", "C", "T", "B", "N", "D", "L", "h", "w", "height", "width", "dim", "dims",
        "size", "shape", "mode", "training", "deterministic", "return_dict", "use_cache", "kwargs", "args",
        "idx", "index", "device", "dtype", "eps", "scale", "axis", "keepdim", "inplace", "stride",
        "padding", "dilation", "groups", "p", "n", "depth", "train", "is_causal", "causal",
        "past_key_value", "past_key_values", "cache", "layer_past", "return_attention", "need_weights",
        "interpolate_pos_encoding", "temperature", "threshold", "top_k", "top_p", "name", "prefix",
        "reduction", "normalize", "align_corners", "recompute_scale_factor",
    }
)  # fmt: skip
_HOST_PARAM_PREFIXES = (
    "output_", "return_", "use_", "is_", "do_", "num_", "n_", "no_", "past_", "max_", "min_", "enable_", "apply_",
)  # fmt: skip
_HOST_PARAM_SUFFIXES = (
    "_size", "_sizes", "_shape", "_dim", "_dims", "_len", "_length", "_idx", "_id", "_fn", "_func",
    "_name", "_type", "_kwargs", "_config", "_cfg", "_mode", "_rate", "_prob", "_factor", "_ratio",
    "_eps", "_threshold", "_only", "_first", "_device", "_dtype", "_flag", "_dimensions", "_scale",
    "_value", "_layer", "_layers", "_index", "_count", "_strategy", "_method", "_cache", "_height", "_width",
)  # fmt: skip


def _host_param_name(name: str) -> bool:
    return (
        name in _HOST_PARAM_NAMES
        or name.startswith(_HOST_PARAM_PREFIXES)
        or name.endswith(_HOST_PARAM_SUFFIXES)
    )


_NESTED_LIST = re.compile(r"\b(List|list|Sequence)\[\s*(typing\.)?(List|list|Sequence)\[")


def annotation_kind(annotation: ast.expr) -> str | None:
    """`torch.Tensor`, `Optional[torch.Tensor]` -> tensor; tuples of tensors -> tuple; else None."""
    quoted = isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)
    # "int | torch.Tensor" too; unparsed once per file's analysis (each function's parameters
    # are read by several checks)
    text = annotation.value if quoted else made_once("unparsed", annotation, ast.unparse)
    if "Tensor" not in text and "Parameter" not in text:
        return None
    head = text.replace("typing.", "")
    for wrapper in ("Optional[", "Union["):
        if head.startswith(wrapper):
            head = head[len(wrapper) :]
    if _NESTED_LIST.search(text):
        return None  # `List[List[Tensor]]` (NaViT's batches of images): an element is a list, not a tensor
    if head.startswith(("Tuple", "tuple", "List", "list", "Sequence", "Iterable", "Dict", "dict")):
        return TUPLE
    if any(f"{c}[" in text for c in ("list", "List", "tuple", "Tuple")):
        return None  # `Tensor | list[tuple]`: could be either; don't guess
    if _HOST_UNION.search(text):
        return None  # `int | torch.Tensor`: diffusers' callers pass the int read off a shape
    return BOOL if "BoolTensor" in text else TENSOR


def _without_none(annotation: ast.expr) -> ast.expr:
    """`X` of `Optional[X]`, `X | None` and `Union[X, None]`."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [annotation.left, annotation.right]
        kept = [a for a in sides if not (isinstance(a, ast.Constant) and a.value is None)]
        return _without_none(kept[0]) if len(kept) == 1 else annotation
    if isinstance(annotation, ast.Subscript):
        name = last_name(annotation.value)
        if name == "Optional":
            return _without_none(annotation.slice)
        if name == "Union" and isinstance(annotation.slice, ast.Tuple):
            kept = [a for a in annotation.slice.elts if not (isinstance(a, ast.Constant) and a.value is None)]
            return _without_none(kept[0]) if len(kept) == 1 else annotation
    return annotation


_ITERABLES = frozenset({"list", "List", "Sequence", "Iterable", "Iterator", "Collection"})


def tuple_element_annotations(annotation: ast.expr) -> list[ast.expr] | None:
    """The annotations of the fields of `list[tuple[int, torch.Tensor, float, int]]` (under
    `Optional`, `| None`, as `List`/`Sequence`/`Iterable` of `Tuple`, or quoted): what a loop that
    unpacks each item binds, field by field. None for any other annotation."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    outer = _without_none(annotation)
    if not (isinstance(outer, ast.Subscript) and last_name(outer.value) in _ITERABLES):
        return None
    inner = outer.slice
    if not (isinstance(inner, ast.Subscript) and last_name(inner.value) in ("tuple", "Tuple")):
        return None
    fields = inner.slice
    if not isinstance(fields, ast.Tuple) or any(
        isinstance(f, ast.Constant) and f.value is Ellipsis for f in fields.elts
    ):
        return None  # `tuple[int, ...]`: no fields to match
    return list(fields.elts)


# numpy functions that dynamo traces into a 0-d tensor when given Python numbers (each of lcm, gcd,
# sqrt, ceil, log2, abs, isclose, maximum, round, float32, int64, prod and sum checked with torch
# 2.13: `if` on the result breaks). So do `any`, `all` and `count_nonzero`, on Python lists or on
# the arrays an object holds (`if np.any(space.low != 0):`, stable-baselines3's image check:
# `FunctionFlow._object_array`). `np.isscalar`, `np.finfo`, `np.iinfo` stay Python values, and
# numpy.random draws are FL101's finding (`numpy_numbers`).
NUMPY_NUMBER_FUNCTIONS = frozenset(
    {
        "lcm", "gcd", "sqrt", "ceil", "floor", "log", "log2", "log10", "log1p", "exp", "abs", "absolute",
        "round", "around", "rint", "maximum", "minimum", "max", "min", "amax", "amin", "prod", "sum", "mean",
        "isclose", "power", "float_power", "clip", "sign", "sin", "cos", "tan", "arctan", "arctan2",
        "float16", "float32", "float64", "int32", "int64", "trunc", "fmod", "mod", "remainder", "floor_divide",
        "any", "all", "count_nonzero",
    }
)  # fmt: skip


def traced_numpy(qual: str) -> bool:
    """`numpy.log`, `numpy.maximum`: a top-level numpy function of NUMPY_NUMBER_FUNCTIONS, which
    dynamo traces through `torch._numpy` (not `numpy.linalg.*`, not `numpy.random.*`)."""
    module, _, name = qual.partition(".")
    return module == "numpy" and name in NUMPY_NUMBER_FUNCTIONS


def _attribute_chain(expr: ast.expr) -> bool:
    """`space.low`, `self.space.nvec`: an attribute of an object, two names at least."""
    if not isinstance(expr, ast.Attribute):
        return False
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


_HOST_UNION = re.compile(r"(^|[\[|,]\s*)(int|float|bool|str)\s*([\]|,]|$)")


def _is_none(default: ast.expr | None) -> bool:
    return isinstance(default, ast.Constant) and default.value is None


def _numbers_only(kinds: list[str | None]) -> bool:
    """Every caller seen hands a Python number (a literal, a shape, an int option): the parameter
    holds one, whatever its annotation says (lightglue's `height: torch.Tensor` handed ints)."""
    return bool(kinds) and all(k in _NUMBERS for k in kinds)


def parameter_kinds(
    fn: FunctionNode,
    passed: dict[str, list[str | None]] | None = None,
    guessed: set[str] | None = None,
    cls: ast.ClassDef | None = None,
    aliases: Mapping[str, str] | None = None,
) -> Env:
    """Kinds of a model function's parameters.

    `passed` holds the kinds its callers passed for each parameter (a helper called from
    forward, in this file or another): a tensor from any caller decides, whatever the
    annotation or default says; else the annotation and default do. Without callers
    (forward itself) a parameter is a tensor unless its default, type, docstring type or name says not;
    those guesses go into `guessed`, for rules that need more than a guess, and so does an
    unannotated parameter that its callers only hand guesses (`GUESS`). A parameter the body
    shows to hold strings (`host_strings_by_use`; `cls` is the function's class) is no tensor,
    whatever its callers pass, unless its annotation says it is one. An annotation that names one of
    the file's type `aliases` (name -> text, `fuselint.source.aliases`) says what the alias says.
    """
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults, strict=False), *zip(args.kwonlyargs, args.kw_defaults, strict=False)]
    env: Env = {}
    guesses: list[str] = []
    for index, (arg, default) in enumerate(pairs):
        name = arg.arg
        if index == 0 and name in ("self", "cls"):
            continue
        annotation = (
            resolved(arg.annotation, aliases) if aliases and arg.annotation is not None else arg.annotation
        )
        annotated = annotation_kind(annotation) if annotation is not None else None
        sure = [k for k in (passed or {}).get(name, []) if k in TENSORS]
        if sure:
            # A caller hands it a tensor: annotations are hints (`timestep: int` gets a 0-d tensor).
            kind = BOOL if all(k == BOOL for k in passed[name]) else TENSOR
        elif TUPLE in (passed or {}).get(name, []):
            kind = TUPLE  # `paddings: tuple[int, int]` handed a pair of buffers is a pair of tensors
        elif default is not None and not _is_none(default):
            kind = None  # a default of 0, False, "mean", (1, 1): a host option, whatever the annotation says
        elif arg.annotation is not None and annotated is None:
            kind = None  # annotated `int`, `Cache`, `list[...]`: the author says it is no tensor
        elif passed is not None and (name in passed or default is not None):
            kinds = passed.get(name, [])
            kind = next(
                (
                    k
                    for k in (TENSOR, MAYBE, TUPLE)
                    if k in kinds or (k == TENSOR and (BOOL in kinds or GUESS in kinds))
                ),
                None,
            )
            if kind == TENSOR and all(k == BOOL for k in kinds):
                kind = BOOL
            elif kind == TENSOR and annotated is None and not TENSORISH & set(kinds):
                guesses.append(name)  # only callers' guesses (see GUESS): a guess here too
            kind = kind or (None if _numbers_only(kinds) else annotated)
        elif arg.annotation is not None:
            kind = annotated
        elif _host_param_name(name):
            kind = None
        else:
            kind = TENSOR
            guesses.append(name)
        if kind is not None:
            env[name] = kind
    for name in [*_host_numbers_by_use(fn, guesses), *_host_keys_by_use(fn, guesses)]:
        env.pop(name)
        guesses.remove(name)
    for name in sorted(documented_host_params(fn, guesses)):
        env.pop(name)  # `S : int` in the docstring: the author says it is no tensor, as an annotation would
        guesses.remove(name)
    annotated_tensors = {
        a.arg
        for a, _ in pairs
        if a.annotation is not None and annotation_kind(resolved(a.annotation, aliases or {}))
    }
    for name in host_strings_by_use(fn, sorted(set(env) - annotated_tensors), cls):
        env.pop(name)
        if name in guesses:
            guesses.remove(name)
    if guessed is not None:
        guessed.update(guesses)
    return env


# Calls whose positional arguments are sizes: `range(n)`, `torch.arange(j - i, j)`.
_SIZE_CALLS = frozenset({"range", "arange"})
_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _dim_expr(expr: ast.expr) -> bool:
    """A host integer read off a tensor: `x.shape[-1]`, `x.size(1)`, `len(x)`."""
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    if isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        return (isinstance(func, ast.Attribute) and func.attr == "size") or (
            isinstance(func, ast.Name) and func.id == "len"
        )
    return False


def _filled_with_number(fn: FunctionNode, name: str) -> bool:
    """`if p is None: p = 0` (or `if not exists(p): p = c.length if c else 0`): the function's own
    default for a parameter that defaults to None is a host number."""
    for node in walk(fn):
        if not isinstance(node, ast.If) or not _tests_none(node.test, name):
            continue
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == name
                and _number_expr(stmt.value)
            ):
                return True
    return False


def _tests_none(test: ast.expr, name: str) -> bool:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is):
        return isinstance(test.left, ast.Name) and test.left.id == name and _is_none(test.comparators[0])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call):
        call = test.operand
        return (
            isinstance(call.func, ast.Name)
            and call.func.id == "exists"
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id == name
        )
    return False


def _int_constant(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and type(expr.value) is int


def _number_expr(expr: ast.expr) -> bool:
    """An int literal or a dim, or a conditional whose arms are such or plain attributes of an
    object (`cache.cache_length if exists(cache) else 0`), one at least an int literal."""
    if _int_constant(expr) or _dim_expr(expr):
        return True
    if isinstance(expr, ast.IfExp):
        arms = (expr.body, expr.orelse)
        return any(_int_constant(a) for a in arms) and all(
            _number_expr(a) or isinstance(a, ast.Attribute) for a in arms
        )
    return False


def _host_numbers_by_use(fn: FunctionNode, guesses: list[str]) -> list[str]:
    """Of the parameters taken for tensors on their name alone, those the body shows to be host
    integers: one that defaults to None and is filled with a number (`_filled_with_number`), or one
    never rebound whose every use is as a size (`arange(j - i, j)`, `range(n)`), a slice bound
    (`b[..., -i:]`), a comparison with a dim (`b.shape[-1] >= j`), in int arithmetic with those,
    or added in place to something (`idx += j - 1`). One other use (a method call, an argument of
    any other call, arithmetic with a tensor, a return) keeps the guess."""
    if not guesses:
        return []
    defaults = none_defaulted(fn)
    found = [name for name in guesses if name in defaults and _filled_with_number(fn, name)]
    rest = [name for name in guesses if name not in found]
    if not rest:
        return found
    parents: dict[int, ast.AST] = {}
    uses: dict[str, list[ast.Name]] = {name: [] for name in rest}
    stored: set[str] = set()
    for node in walk(fn):
        for child in child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Name) and node.id in uses:
            if isinstance(node.ctx, ast.Load):
                uses[node.id].append(node)
            else:
                stored.add(node.id)
    loaded = {n.id for n in walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    candidates = set(rest) - stored
    sized = [
        name
        for name in sorted(candidates)
        if uses[name]
        and all(_size_use(use, parents, candidates, loaded) for use in uses[name])
        and any(_size_use(use, parents, candidates, loaded) == "size" for use in uses[name])
    ]
    return found + [name for name in rest if name in sized]


def _iterated_source(target: ast.expr, iterable: ast.expr, name: str) -> str | None:
    """The name whose elements the loop target `target` binds `name` to: `P` in `for name in P`,
    `for a, name in zip(Q, P)` and `for i, name in enumerate(P)`; None otherwise."""
    if isinstance(target, ast.Name):
        return iterable.id if target.id == name and isinstance(iterable, ast.Name) else None
    if not (
        isinstance(target, ast.Tuple)
        and isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
    ):
        return None
    sources = iterable.args
    if iterable.func.id == "enumerate" and len(sources) == 1 and len(target.elts) == 2:
        sources = [ast.Constant(None), sources[0]]
    elif iterable.func.id != "zip" or len(sources) != len(target.elts):
        return None
    for element, source in zip(target.elts, sources, strict=True):
        if isinstance(element, ast.Name) and element.id == name and isinstance(source, ast.Name):
            return source.id
    return None


def _host_keys_by_use(fn: FunctionNode, guesses: list[str]) -> list[str]:
    """Of the parameters taken for tensors on their name alone, those whose elements the body uses
    as the keys of a dict comprehension (`{pair: m for m, pair in zip(masks, interactions)}`; a
    subscript store `d[k] = v` may as well index a tensor): a tensor hashes by identity, and iterating one makes new row objects each time, so a dict keyed
    by its rows could never be looked up; such a parameter holds host values (vit-pytorch wwt's
    `interactions`, int pairs)."""
    if not guesses:
        return []
    stores = stored_names(fn)
    found: set[str] = set()
    for node in walk(fn):
        if isinstance(node, ast.DictComp) and isinstance(node.key, ast.Name):
            for generator in node.generators:
                source = _iterated_source(generator.target, generator.iter, node.key.id)
                if source in guesses and source not in stores:
                    found.add(source)
    return sorted(found)


def _string_attributes(cls: ast.ClassDef | None) -> frozenset[str]:
    """`self.X` that its class only sets to string literals or to parameters of the storing method
    that default to one and are never rebound there (`self.tau_label = tau_label`, `tau_label="tau"`)."""
    if cls is None:
        return frozenset()
    sources: dict[str, bool] = {}
    for top in cls.body:
        if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = top.args
        positional = [*args.posonlyargs, *args.args]
        pairs = [
            *zip(reversed(positional), reversed(args.defaults), strict=False),
            *zip(args.kwonlyargs, args.kw_defaults, strict=True),
        ]
        rebound = stored_names(top)
        options = {a.arg for a, d in pairs if _str_constant(d) and a.arg not in rebound}
        # an attribute's verdict is an `and` over its stores: their order does not matter
        for node in of_types(top, ast.Assign, ast.AnnAssign, ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in walk(target):
                    if (attr := _self_attr(t)) is None:
                        continue
                    value = node.value if t is target and not isinstance(node, ast.AugAssign) else None
                    text = _str_constant(value) or (isinstance(value, ast.Name) and value.id in options)
                    sources[attr] = sources.get(attr, True) and text
        for node in of_types(top, ast.Call):
            func = node.func
            named = None
            if isinstance(func, ast.Attribute) and func.attr == "__setattr__" and node.args:
                named = node.args[0]
            elif isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) > 1:
                named = node.args[1]
            if named is not None and _str_constant(named):
                sources[named.value] = False
    return frozenset(attr for attr, text in sources.items() if text)


def _str_constant(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str)


def _text_expr(expr: ast.expr, strings: frozenset[str]) -> bool:
    """A string literal, an f-string, or a `self.X` its class only sets to strings."""
    return _str_constant(expr) or isinstance(expr, ast.JoinedStr) or _self_attr(expr) in strings


def _string_fill(value: ast.expr) -> bool:
    """`["a", "b"]`, `d.keys()`, `list(d.keys())`: a list of string literals or a dict's keys."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts) and all(_str_constant(e) for e in value.elts)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("list", "tuple")
    ):
        value = value.args[0] if len(value.args) == 1 and not value.keywords else value
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "keys"
        and not value.args
    )


def host_strings_by_use(fn: FunctionNode, names: list[str], cls: ast.ClassDef | None = None) -> list[str]:
    """Of `names` (parameters of `fn`), those the body shows to hold strings (site names, labels)
    or to be keyed by them: a string tested `in` it (`self.tau_label in labels`, `"aux" in
    outputs`), `sep.join(it)`, `if it is None: it = list(d.keys())` (or a list of string
    literals), or an element of it (`for l in it`, also in a comprehension) that keys a dict
    display or comprehension (`{l: ... for l in it}`) or is compared `==` / `!=` with a string.
    On a tensor each of these raises or means nothing (a 0-d tensor hashes by identity), so one
    such use is taken as proof."""
    if not names:
        return []
    wanted = set(names)
    strings = made_once("string attributes", cls, _string_attributes)  # once per class, not per method
    shown: set[str] = set()
    elements: dict[str, str] = {}  # loop variable -> the parameter it iterates
    for node in walk(fn):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            if (
                isinstance(node.iter, ast.Name)
                and node.iter.id in wanted
                and isinstance(node.target, ast.Name)
            ):
                elements[node.target.id] = node.iter.id
    for node in walk(fn):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right, op = node.left, node.comparators[0], node.ops[0]
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name) and right.id in wanted:
                if _text_expr(left, strings):
                    shown.add(right.id)
            elif isinstance(op, (ast.Eq, ast.NotEq)):
                for one, other in ((left, right), (right, left)):
                    if isinstance(one, ast.Name) and one.id in elements and _text_expr(other, strings):
                        shown.add(elements[one.id])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            if _str_constant(node.func.value) and len(node.args) == 1:
                arg = node.args[0]
                if isinstance(arg, ast.Name) and arg.id in wanted:
                    shown.add(arg.id)
        elif isinstance(node, ast.DictComp) and isinstance(node.key, ast.Name):
            if node.key.id in elements and any(
                isinstance(g.iter, ast.Name) and g.iter.id == elements[node.key.id] for g in node.generators
            ):
                shown.add(elements[node.key.id])
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Name) and key.id in elements:
                    shown.add(elements[key.id])
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            test = node.test
            if (
                isinstance(test.left, ast.Name)
                and test.left.id in wanted
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Is)
                and _is_none(test.comparators[0])
            ):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.Assign)
                        and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                        and stmt.targets[0].id == test.left.id
                        and _string_fill(stmt.value)
                    ):
                        shown.add(test.left.id)
    return [name for name in names if name in shown]


_HOST_BUILTINS = frozenset({"range", "list", "tuple", "len", "int", "min", "max", "abs", "sorted"})


def _host_value(expr: ast.expr, kind_of, before: set[str], params: set[str]) -> bool:
    """`expr` is a Python value on the host at the nested def: a literal, a name the enclosing
    function bound before the def to a host kind (a size, a number, a list), one of its parameters
    (`params`: never rebound) that it holds no tensor (`height: int`, `scale=1.0`), or builtins and
    arithmetic over those (`list(range(n))`, `n // k`)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        kind = kind_of(expr)
        held = kind in HOST | _NUMBERS | {SHAPE} or (kind is None and expr.id in params)
        return expr.id in before and held
    parts: list[ast.expr] | None = None
    if isinstance(expr, ast.BinOp):
        parts = [expr.left, expr.right]
    elif isinstance(expr, (ast.List, ast.Tuple)):
        parts = expr.elts
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in _HOST_BUILTINS:
        parts = None if expr.keywords else expr.args
    return parts is not None and all(_host_value(p, kind_of, before, params) for p in parts)


def _passed_on(expr: ast.expr, name: str, lists: set[str]) -> bool:
    """A recursive call's argument that keeps a host parameter `name` host: a literal, `name`
    itself or arithmetic of it with literals (`l - 1`), or a name the nested def binds only to
    list displays and comprehensions (`rest = [x for x in lst if x not in c]`)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id == name or expr.id in lists
    if isinstance(expr, ast.BinOp):
        return _passed_on(expr.left, name, lists) and _passed_on(expr.right, name, lists)
    return False


def host_nested_parameters(outer: FunctionNode, inner: FunctionNode, kind_of) -> list[str]:
    """Parameters of a def nested in `outer` that only ever receive host values: every call of it
    is a plain call by name (the name is never handed on as a value), made in `outer` with host
    arguments at the def (`_host_value`, `kind_of` gives kinds there) or by the def itself passing
    them on (`_passed_on`). `parts(range(n), k, m)` after `n = x.shape[1]` hands sizes, whatever
    the parameters' names say. A parameter some call leaves to its default is not decided."""
    params = [a.arg for a in (*inner.args.posonlyargs, *inner.args.args)]
    if not params or inner.args.vararg or inner.args.kwarg:
        return []
    inside = {id(n) for n in walk(inner)}
    before: set[str] = set()
    after: set[str] = set()  # rebound after the def: what a call hands is not what the def saw
    calls: list[ast.Call] = []
    funcs: set[int] = set()
    for node in walk(outer):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == inner.name:
            calls.append(node)
            funcs.add(id(node.func))
        elif isinstance(node, ast.Name) and node.id != inner.name and isinstance(node.ctx, ast.Store):
            if id(node) not in inside:
                (before if node.lineno < inner.lineno else after).add(node.id)
    uses = [n for n in walk(outer) if isinstance(n, ast.Name) and n.id == inner.name and id(n) not in funcs]
    if not calls or any(isinstance(n.ctx, ast.Load) for n in uses):
        return []  # handed on as a value (to checkpoint, map, ...): its callers are not all here
    outer_params = {a.arg for a in (*outer.args.posonlyargs, *outer.args.args, *outer.args.kwonlyargs)}
    # A parameter the enclosing function never rebinds holds at every call what the function
    # itself holds there: where that is no tensor (its annotation, default or name says so), the
    # nested def's parameter that receives it is none either (`between(x)` given `height: int`).
    unbound = outer_params - before - after
    before |= outer_params
    before -= after
    lists = {
        t.id for n in walk(inner) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    lists = {
        name
        for name in lists
        if all(
            isinstance(n.value, (ast.List, ast.ListComp))
            for n in walk(inner)
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        )
    }
    host = []
    for index, name in enumerate(params):
        decided = True
        for call in calls:
            if any(isinstance(a, ast.Starred) for a in call.args):
                return []
            arg = call.args[index] if index < len(call.args) else None
            arg = next((k.value for k in call.keywords if k.arg == name), arg)
            if arg is None:
                decided = False
            elif id(call) in inside:
                decided = decided and _passed_on(arg, name, lists)
            else:
                decided = decided and _host_value(arg, kind_of, before, unbound)
        if decided:
            host.append(name)
    return host


def _called_by_name(outer: FunctionNode, name: str) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in walk(outer)
    )


def defaulted(fn: FunctionNode) -> list[tuple[ast.arg, ast.expr]]:
    """Each parameter that has a default, with it."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = [*zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)]
    return pairs + [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]


def none_defaulted(fn: FunctionNode) -> set[str]:
    """The parameters whose default is a literal `None`."""
    return {a.arg for a, d in defaulted(fn) if _is_none(d)}


def _intish(expr: ast.expr, candidates: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in candidates
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _intish(expr.operand, candidates)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _INT_OPS):
        return _intish(expr.left, candidates) and _intish(expr.right, candidates)
    return _int_constant(expr) or _dim_expr(expr)


def _size_use(use: ast.Name, parents: dict, candidates: set[str], loaded: set[str]) -> str | None:
    """ "size" for a use as a size, "neutral" for one that shows nothing, None for any other."""
    node: ast.AST = use
    parent = parents.get(id(node))
    while True:
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, (ast.USub, ast.UAdd)):
            node, parent = parent, parents.get(id(parent))
        elif isinstance(parent, ast.BinOp) and isinstance(parent.op, _INT_OPS):
            other = parent.right if parent.left is node else parent.left
            if not _intish(other, candidates):
                return None
            node, parent = parent, parents.get(id(parent))
        else:
            break
    if isinstance(parent, ast.Call) and node in parent.args:
        func = parent.func
        called = (
            func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        )
        return "size" if called in _SIZE_CALLS else None
    if isinstance(parent, ast.Slice):
        return "size"
    if isinstance(parent, ast.Compare):
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops):
            return "neutral" if node is use and all(_is_none(c) for c in parent.comparators) else None
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
            return None
        others = [o for o in (parent.left, *parent.comparators) if o is not node]
        return "size" if any(_dim_expr(o) for o in others) else None
    if isinstance(parent, ast.AugAssign) and parent.value is node:
        return "neutral"
    if isinstance(parent, ast.Tuple) and node is use:
        assign = parents.get(id(parent))
        if isinstance(assign, ast.Assign) and len(assign.targets) == 1:
            target = assign.targets[0]
            if isinstance(target, ast.Tuple) and len(target.elts) == len(parent.elts):
                alias = target.elts[parent.elts.index(node)]
                if isinstance(alias, ast.Name) and alias.id not in loaded:
                    return "neutral"  # `n, device = j, self.device` with `n` never read
    return None


_CONTAINER_TYPES = frozenset({"list", "tuple", "List", "Tuple", "dict", "Sequence"})
_SCALAR_TYPES = frozenset({"int", "float", "bool", "str"})
_NUMBER_TYPES = frozenset({"int", "float"})
_TENSOR_TYPES = frozenset({"Tensor", "FloatTensor", "LongTensor", "IntTensor", "BoolTensor", "HalfTensor"})


def value_path(expr: ast.expr) -> str | None:
    """`x` -> "x", `self.domain` -> "self.domain", `self.cfg.scale` -> "self.cfg.scale": the key a
    narrowing test stores in an environment; None for anything but names and attribute chains.
    A dotted key holds what a test showed about the attribute (`""`: no tensor, nothing more)."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


def _isinstance_test(test: ast.expr) -> tuple[str, set[str]] | None:
    """`isinstance(x, (list, np.ndarray))` -> ("x", {"list", "ndarray"}): the name (or attribute
    path, `self.x`) tested and the last part of each type's name."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"):
        return None
    if len(test.args) != 2 or (path := value_path(test.args[0])) is None:
        return None
    types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    return path, {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}


def _narrowed(test: ast.expr) -> tuple[str, str] | None:
    """`isinstance(x, (list, tuple))` -> ("x", "list"): inside the branch the name holds no tensor.

    The kind is `list` or `scalar` when every type named is one of those, "" (unknown) when mixed.
    """
    tested = _isinstance_test(test)
    if tested is None:
        return None
    name, names = tested
    if names <= _CONTAINER_TYPES:
        return name, LIST
    if names <= _SCALAR_TYPES:
        return name, SCALAR
    if names & (_CONTAINER_TYPES | _SCALAR_TYPES | {"ndarray"}):
        return name, ""  # some host container or number: its elements are unknown too
    return None


def _numpy_test(test: ast.expr) -> str | None:
    """`isinstance(x, np.ndarray)` -> "x"."""
    tested = _isinstance_test(test)
    return tested[0] if tested is not None and tested[1] == {"ndarray"} else None


def _bound_names(node: ast.AST) -> tuple[str, ...]:
    """The names `node` binds or deletes: a `Name` stored or deleted, `except E as n`, an import,
    a nested def or class, a `match` capture."""
    if isinstance(node, ast.Name):
        return () if isinstance(node.ctx, ast.Load) else (node.id,)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return (node.name,) if node.name else ()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return tuple((a.asname or a.name).split(".")[0] for a in node.names)
    return ()


def _narrow(env: Env, name: str, members: frozenset[str]) -> Env:
    """`env` where union parameter `name` holds one of `members` (types' last names): a tensor when
    each is a tensor type, no tensor when none is, and what it was when they are mixed."""
    if members and members <= _TENSOR_TYPES | {"Parameter"}:
        if env.get(name) in TENSORS:
            return env  # a caller's boolean tensor stays one
        return {**env, name: BOOL if members == {"BoolTensor"} else TENSOR}
    if not members & (_TENSOR_TYPES | {"Parameter"}):
        return env if env.get(name) in HOST else without(env, name)  # `isinstance(x, float)` said more
    return env


def _leaves(block: list[ast.stmt]) -> bool:
    """The block ends in `return` or `raise`: nothing after it runs with its kinds."""
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise))


def _surely_tensors(env: Env) -> set[str]:
    return {name for name, kind in env.items() if kind in TENSORS}


def _tensor_test(test: ast.expr) -> str | None:
    """`isinstance(x, torch.Tensor)` or `torch.is_tensor(x)` -> "x" (`self.x` -> "self.x"): where
    the test fails, x holds no tensor."""
    if not (isinstance(test, ast.Call) and len(test.args) >= 1):
        return None
    path = value_path(test.args[0])
    if path is None:
        return None
    func = test.func
    if isinstance(func, ast.Attribute) and func.attr == "is_tensor" and len(test.args) == 1:
        return path
    if isinstance(func, ast.Name) and func.id == "isinstance" and len(test.args) == 2:
        types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        names = {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}
        if names and names <= _TENSOR_TYPES:
            return path
    return None


# In an environment that holds any attribute path, this key is present too (a cheap test).
_DOTTED = "."


def without(env: Env, path: str) -> Env:
    """`env` where `path` holds no tensor: a name is dropped, an attribute path marked `""`."""
    out = {k: v for k, v in env.items() if k != path}
    if "." in path:
        out[path] = out[_DOTTED] = ""
    return out


def _forget(env: Env, target: ast.expr) -> None:
    """Storing to `self.x` (or rebinding `self`) ends what tests showed about `self.x` and below."""
    for node in walk(target):
        path = value_path(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if path is not None:
            for key in [k for k in env if k.startswith(path + ".")]:
                del env[key]
            if "." in path:
                env.pop(path, None)


def _option_parameters(fn: FunctionNode) -> frozenset[str]:
    """Parameters whose default is a number, bool or string literal (`domain=2`, `mode="max"`)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = [
        *zip(reversed(positional), reversed(args.defaults), strict=False),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    return frozenset(arg.arg for arg, default in pairs if default is not None and _literal(default))


def _literal(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float, str))


def narrowed_operands(test: ast.BoolOp, env: Env) -> list[Env]:
    """The environment each operand of `a and b` / `a or b` is evaluated in: after
    `not torch.is_tensor(d) and d == 2` (or `torch.is_tensor(d) or d == 2`) the later operands run
    only when `d` holds no tensor; `isinstance(d, (int, float)) and ...` makes it a host number."""
    envs = []
    conjunction = isinstance(test.op, ast.And)
    for value in test.values:
        envs.append(env)
        negated = isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
        inner = value.operand if negated else value
        tested = _tensor_test(inner)
        if tested is not None and negated == conjunction:
            env = without(env, tested)
        narrowed = _narrowed(inner)
        if narrowed is not None and conjunction and not negated:
            env = without(env, narrowed[0])
            if narrowed[1]:
                env[narrowed[0]] = narrowed[1]
    return envs


# Expressions whose parts see names of their own (`[x for x in xs if x]`): `_comprehension_parts`.
_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})
# Node types no rule asks for (contexts and operators): not worth a Site each.
_UNRECORDED = frozenset(
    {ast.Load, ast.Store, ast.Del, *ast.operator.__subclasses__(), *ast.cmpop.__subclasses__(),
     *ast.unaryop.__subclasses__(), *ast.boolop.__subclasses__(), ast.keyword, ast.Constant}
)  # fmt: skip


def _merge(a: Env, b: Env) -> Env:
    """Union of two environments: a name that may be a tensor on either path is one.

    A host kind (`scalar`, `list`) is a claim that the name is no tensor: it stays only when both
    paths make the same claim, and gives way to whatever the other path knows."""
    if a is b:
        return a
    if _DOTTED in a or _DOTTED in b:
        return _merge_paths(a, b)
    out = {name: kind for name, kind in a.items() if kind not in HOST or b.get(name) == kind}
    for name, kind in b.items():
        mine = a.get(name)
        if kind in HOST:
            if mine is not None and mine not in HOST:
                out[name] = mine
            continue
        if mine is None or mine in HOST or mine == kind:
            out[name] = kind
        elif mine in TENSORS and kind in TENSORS:
            out[name] = TENSOR
        elif mine in TENSORISH or kind in TENSORISH:
            out[name] = MAYBE
        else:
            out[name] = mine
    return out


def _merge_paths(a: Env, b: Env) -> Env:
    """`_merge` where a test narrowed an attribute path: what a test showed about `self.x` holds
    after the merge only when both paths showed it (else the class's own facts apply again)."""
    names = _merge({k: v for k, v in a.items() if "." not in k}, {k: v for k, v in b.items() if "." not in k})
    for key, kind in a.items():
        if "." not in key or key not in b:
            continue
        other = b[key]
        if kind == other:
            names[key] = kind
        elif kind in HOST | {""} and other in HOST | {""}:
            names[key] = ""
        else:
            names[key] = kind if other in HOST | {""} else other
    return names


_new_tuple = tuple.__new__


class Site(NamedTuple):
    """An expression node (or statement) of a live statement, with the environment before it.

    A named tuple, not a frozen dataclass: a function's walk makes one per node, and a frozen
    dataclass's `__init__` (one `object.__setattr__` per field) cost ~2% of a cold lint."""

    node: ast.AST
    env: Env
    stmt: ast.stmt
    # The side road the statement is on (`fuselint.source.paths`): "deprecation", "misuse",
    # "error", or None on the normal path.
    path: str | None = None


@dataclass
class FunctionFlow:
    """The result of walking one function: its sites by node type, and kind queries on them."""

    fn: ModelFunction
    imports: ImportTable
    methods: frozenset[str]  # the names of its class's methods
    tensor_attrs: frozenset[str] = frozenset()  # `self.X` its class only sets to tensors
    host_attrs: frozenset[str] = frozenset()  # `self.X` its class only sets to number options
    # What the file's in-scope helpers return, where that is a numpy number (see `HelperReturns`).
    helpers: HelperReturns | None = None
    sites: dict[type, list[Site]] = field(default_factory=lambda: defaultdict(list))
    # Parameters taken for tensors on their name alone (no type, no default, no caller seen).
    guessed: set[str] = field(default_factory=set)
    # Parameters every call that reaches this helper leaves at a constant default (`copy=False`),
    # never rebound: a test on one is decided, and the other arm is dead (see `defaulted_parameters`).
    constants: dict[str, object] = field(default_factory=dict)
    # Parameters a caller in another file hands an element it iterates from this object's tensor
    # attribute (`iterated_parameters`): 0-d tensors computed in the caller's graph.
    iterated: frozenset[str] = frozenset()
    # Parameters annotated with a union (`edge_index: Adj`, `Adj = Union[Tensor, SparseTensor]`):
    # the last names of the types each may hold (`fuselint.source.aliases.union_members`).
    unions: dict[str, frozenset[str]] = field(default_factory=dict)
    # What the `isinstance` tests around the statement being walked left of each union (`_walk_If`).
    _members: dict[str, frozenset[str]] = field(default_factory=dict)
    _kinds: dict[int, str | None] = field(default_factory=dict)
    _recording: bool = True
    _path: str | None = None

    @cached_property
    def assigned(self) -> dict[str, int]:
        """How many times each name is stored to anywhere in the function (dead code included)."""
        return self._name_counts(ast.Store)

    @cached_property
    def loaded(self) -> dict[str, int]:
        return self._name_counts(ast.Load)

    def _name_counts(self, ctx: type) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in walk(self.fn.node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ctx):
                counts[node.id] = counts.get(node.id, 0) + 1
            elif ctx is ast.Store and isinstance(node, ast.arg):
                counts[node.arg] = counts.get(node.arg, 0) + 1
        return counts

    def of(self, *types: type) -> list[Site]:
        if len(types) == 1:
            return self.sites.get(types[0], [])
        return [s for t in types for s in self.sites.get(t, [])]

    # ------------------------------------------------------------ kinds of expressions

    def kind(self, expr: ast.AST | None, env: Env) -> str | None:
        if expr is None:
            return None
        key = id(expr)
        if self._recording and key in self._kinds:
            return self._kinds[key]
        kind = self._kind(expr, env)
        if self._recording:
            self._kinds[key] = kind
        return kind

    def is_tensor(self, expr: ast.AST | None, env: Env) -> bool:
        return self.kind(expr, env) in TENSORS

    def is_tensorish(self, expr: ast.AST | None, env: Env) -> bool:
        return self.kind(expr, env) in TENSORISH

    def host_number(self, expr: ast.expr, env: Env) -> bool:
        """A number the code shows to be on the host: a literal, a known scalar, or a config field."""
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self.host_number(expr.operand, env)
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
        if self.kind(expr, env) == SCALAR:
            return True
        chain = []
        while isinstance(expr, ast.Attribute):
            chain.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Name):
            chain.append(expr.id)
        return len(chain) >= 2 and any("config" in part.lower() for part in chain[1:])

    def _numpy_number(self, call: ast.Call, qual: str, env: Env) -> bool:
        """`np.lcm(config.a, config.b)`: a numpy function of host numbers (or of a host list), or of
        the arrays an object holds (`np.any(space.low != 0)`)."""
        if not traced_numpy(qual):
            return False
        if not call.args or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            return False
        return all(self._host_numbers(a, env) or self._object_array(a, env) for a in call.args)

    def _numpy_on_tensor(self, call: ast.Call, qual: str, env: Env) -> bool:
        """`np.log(t)`, `np.maximum(t, eps)` of a tensor: dynamo traces it as torch ops, so its
        result is a tensor in the graph (FL101 flags where it is read on the host, not the call)."""
        return traced_numpy(qual) and any(self.kind(a, env) in (TENSOR, BOOL) for a in call.args)

    def _object_array(self, expr: ast.expr, env: Env) -> bool:
        """`space.low != 0`, `self.space.high - space.low`: arrays an object holds (a gymnasium
        space's bounds), compared or combined with host numbers. dynamo wraps a numpy array it
        reaches through an object as a tensor, so numpy on it is a tensor too (torch 2.13:
        `if np.any(space.low != 0):` breaks, gb0170). Not a tensor the flow knows: that is
        FL101's numpy-on-tensor finding."""
        if self.kind(expr, env) in TENSORISH:
            return False
        if isinstance(expr, ast.Compare):
            parts = [expr.left, *expr.comparators]
        elif isinstance(expr, ast.BinOp):
            parts = [expr.left, expr.right]
        elif isinstance(expr, ast.UnaryOp):
            parts = [expr.operand]
        else:
            return _attribute_chain(expr)
        held = [p for p in parts if not self.host_number(p, env)]
        return bool(held) and all(self._object_array(p, env) for p in held)

    def _host_numbers(self, expr: ast.expr, env: Env) -> bool:
        if isinstance(expr, (ast.List, ast.Tuple)):
            return bool(expr.elts) and all(self._host_numbers(e, env) for e in expr.elts)
        return self.host_number(expr, env) or self.kind(expr, env) in (DIM, LIST, NUMPY)

    def _kind(self, expr: ast.AST, env: Env) -> str | None:
        rule = _EXPRESSION_KINDS.get(type(expr))
        return None if rule is None else rule(self, expr, env)

    # One method per expression type (the table `_EXPRESSION_KINDS` below the class); a type
    # without one has no kind.

    def _kind_Name(self, expr: ast.Name, env: Env) -> str | None:
        return env.get(expr.id)

    def _kind_Attribute(self, expr: ast.Attribute, env: Env) -> str | None:
        if _DOTTED in env:
            path = value_path(expr)
            if path is not None and path in env:
                return env[path] or None  # what a test showed (`""`: no tensor)
        base = self.kind(expr.value, env)
        if base in TENSORISH:
            if expr.attr == "shape":
                return SHAPE
            return TENSOR if expr.attr in TENSOR_ATTRS else None
        if expr.attr in ("weight", "bias") and isinstance(expr.value, ast.Attribute):
            if isinstance(expr.value.value, ast.Name) and expr.value.value.id == "self":
                return TENSOR  # self.proj.weight: a submodule's parameter
        if isinstance(expr.value, ast.Name) and expr.value.id == "self" and expr.attr in self.tensor_attrs:
            return TENSOR  # self.timesteps = torch.from_numpy(...): a tensor attribute
        return None

    def _kind_Subscript(self, expr: ast.Subscript, env: Env) -> str | None:
        base = self.kind(expr.value, env)
        sliced = isinstance(expr.slice, ast.Slice)
        if sliced and isinstance(expr.slice.step, ast.UnaryOp):
            return TUPLE if base in TENSORISH or base == TUPLE else None  # x[::-1]: tensors can't
        if base in TENSORS:
            return base
        if base == TUPLE:
            return TUPLE if sliced else TENSOR
        if base == MAYBE:
            return MAYBE
        if base == SHAPE:
            return SHAPE if isinstance(expr.slice, ast.Slice) else DIM
        return None

    def _kind_Constant(self, expr: ast.Constant, env: Env) -> str | None:
        return SCALAR if isinstance(expr.value, (int, float, complex, str)) else None

    def _kind_BinOp(self, expr: ast.BinOp, env: Env) -> str | None:
        left, right = self.kind(expr.left, env), self.kind(expr.right, env)
        if TUPLE in (left, right) or isinstance(expr.left, (ast.Tuple, ast.List)):
            if left in TENSORISH or right in TENSORISH or TUPLE in (left, right):
                return TUPLE
            return LIST if left == LIST else None  # [None] * n
        if isinstance(expr.left, ast.Constant) and isinstance(expr.left.value, str):
            return None
        if left in TENSORISH or right in TENSORISH:
            bitwise = isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor))
            if bitwise and left == BOOL and right in (BOOL, None):
                return BOOL
            # a mask of unknown dtype joined with a comparison (DISK's `nmsed = nms_mask & (heatmap >
            # t)`, `nms_mask` from a helper of another file): `&` of an integer tensor with a bool
            # one is rare, so the result is taken for a mask (and `nmsed[b]` for a row of it)
            if isinstance(expr.op, ast.BitAnd) and right == BOOL and left in (TENSOR, None):
                return BOOL
            # two boolean tensors multiplied or added stay boolean (torch 2.13: `a * b` is `a & b`,
            # kornia's SOLD2 `detection_results * detection_results_inlier` then indexes with it)
            return BOOL if isinstance(expr.op, (ast.Mult, ast.Add)) and left == right == BOOL else TENSOR
        if NUMPY in (left, right):
            return NUMPY if {left, right} <= {*_NUMBERS, NUMPY} else None
        return SCALAR if left in _NUMBERS and right in _NUMBERS else None

    def _kind_UnaryOp(self, expr: ast.UnaryOp, env: Env) -> str | None:
        inner = self.kind(expr.operand, env)
        if inner == NUMPY:
            return NUMPY
        if isinstance(expr.op, ast.Not):
            return SCALAR if inner in _NUMBERS else None
        if inner in _NUMBERS:
            return SCALAR
        return inner if inner in TENSORS else (TENSOR if inner == MAYBE else None)

    def _kind_Compare(self, expr: ast.Compare, env: Env) -> str | None:
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops):
            return None
        kinds = [self.kind(o, env) for o in (expr.left, *expr.comparators)]
        if any(k in TENSORISH for k in kinds):
            return BOOL
        if NUMPY in kinds:
            return NUMPY if all(k in _NUMBERS or k == NUMPY for k in kinds) else None
        return SCALAR if all(k in _NUMBERS for k in kinds) else None

    def _kind_BoolOp(self, expr: ast.BoolOp, env: Env) -> str | None:
        # `a and b` is one of its operands: a tensor operand may be the value.
        kinds = [self.kind(v, e) for v, e in zip(expr.values, narrowed_operands(expr, env), strict=True)]
        for k in (TENSOR, BOOL, NUMPY):
            if k in kinds:
                return TENSOR if k == BOOL and TENSOR in kinds else k
        return None

    def _kind_IfExp(self, expr: ast.IfExp, env: Env) -> str | None:
        body, orelse = self.kind(expr.body, env), self.kind(expr.orelse, env)
        for k in (TENSOR, BOOL, MAYBE, TUPLE):
            if k in (body, orelse):
                return k
        return None

    def _kind_Tuple(self, expr: ast.Tuple | ast.List, env: Env) -> str | None:
        kinds = [self.kind(e, env) for e in expr.elts]
        if any(k in TENSORISH for k in kinds):
            return TUPLE
        host = all(k in _NUMBERS or k == LIST or _is_none(e) for k, e in zip(kinds, expr.elts, strict=True))
        return LIST if host else None

    def _kind_NamedExpr(self, expr: ast.NamedExpr, env: Env) -> str | None:
        return self.kind(expr.value, env)

    def _kind_Call(self, call: ast.Call, env: Env) -> str | None:
        func = call.func
        qual = self.imports.qualname(func)
        if qual is not None:
            if qual.startswith("numpy.") and self._numpy_number(call, qual, env):
                return NUMPY
            if qual.startswith("numpy.") and self._numpy_on_tensor(call, qual, env):
                return TENSOR
            if (
                qual in _AS_TENSOR
                and call.args
                and _keeps_dtype(call)
                and self.kind(call.args[0], env) == BOOL
            ):
                return BOOL  # torch.as_tensor(mask, device=d): the same boolean mask
            return _torch_call_kind(qual, call)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id == "self":
                # self.proj(x) calls a submodule; self.helper(x) a method whose result we don't know.
                if func.attr in self.methods:
                    cls = self.fn.cls.name if self.fn.cls is not None else None
                    return self.helpers.kind((cls, func.attr)) if self.helpers else None
                inherited = self._inherited(func.attr)
                if inherited is not None and (kind := self.helpers.kind(inherited)) is not None:
                    return kind
                return _host_method_kind(func.attr, call) if func.attr in HOST_METHODS else MAYBE
            rk = self.kind(receiver, env)
            if rk == MODULE:
                return _host_method_kind(func.attr, call) if func.attr in HOST_METHODS else MAYBE
            if rk in TENSORISH:
                if func.attr == "size":
                    return DIM if call.args else SHAPE
                if rk == BOOL and func.attr in _MOVES and _keeps_dtype(call, positional=True):
                    return BOOL  # mask.to(x.device), mask.clone(): still a boolean mask
                return _method_kind(func.attr, call)
            if isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name):
                if receiver.value.id == "self" and func.attr in ("forward", "__call__"):
                    return MAYBE
            if rk is None and func.attr in TENSOR_ONLY_BOOL_METHODS:
                return BOOL  # variance.lt(eps): only a tensor has the method
            return None
        if isinstance(func, ast.Name):
            if func.id == "len" and len(call.args) == 1 and self.kind(call.args[0], env) in TENSORS:
                return DIM
            if func.id in ("max", "min") and len(call.args) > 1 and not call.keywords:
                # dynamo turns max/min of tensors into torch.maximum/minimum: a tensor, no branch
                if any(self.kind(a, env) in TENSORS for a in call.args):
                    return TENSOR
            if env.get(func.id) == MODULE:
                return MAYBE
            if func.id.startswith(FIX_OPS) and func.id not in env:
                return fix_op_kind(func.id)
            return self.helpers.kind((None, func.id)) if self.helpers and func.id not in env else None
        if isinstance(func, ast.Subscript):
            return MAYBE  # self.layers[i](x)
        return None

    # ------------------------------------------------------------ walking statements

    def bind(self, target: ast.expr, kind: str | None, value: ast.expr | None, env: Env) -> None:
        """Bind `target` in `env` (mutated) to a value of `kind`."""
        if _DOTTED in env:
            _forget(env, target)
        if isinstance(target, ast.Name):
            if kind is None:
                env.pop(target.id, None)
            else:
                env[target.id] = kind
            if (
                isinstance(value, (ast.Subscript, ast.Compare))  # not a plain alias of the guess
                and self.assigned.get(target.id) == 1
                and self.read_off_guess(value)
            ):
                self.guessed.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            if elements is not None and any(isinstance(e, ast.Starred) for e in elements):
                self._bind_starred(target, elements, env)
                return
            attr = _self_call(value)
            inherited = self._inherited(attr) if attr is not None else None
            returned = self._returned_elements(value) if kind is None else None
            if inherited is not None and kind == MAYBE:
                # a base class's method, not a submodule: an element every return shows to be a host
                # value (`out.size(0)`, `out.device`) is one; any other is what the call's kind gives
                hosts = self.helpers.host_elements(inherited)
                if hosts is not None and len(hosts) == len(target.elts):
                    returned = tuple(h or _element_kind(kind, value) for h in hosts)
            if returned is not None and len(returned) == len(target.elts):
                for element, element_kind in zip(target.elts, returned, strict=True):
                    self.bind(element, element_kind, None, env)
                return
            for index, element in enumerate(target.elts):
                if elements is not None and len(elements) == len(target.elts):
                    self.bind(element, self.kind(elements[index], env), elements[index], env)
                elif isinstance(element, ast.Starred):
                    self.bind(element.value, TUPLE if kind in (TUPLE, TENSOR, BOOL) else None, None, env)
                else:
                    self.bind(element, _element_kind(kind, value), None, env)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None, None, env)

    def _returned_elements(self, value: ast.expr | None) -> tuple[str | None, ...] | None:
        """Per position, what `self.helper(...)` or `helper(...)` of this file returns when every
        `return` of it is a tuple of one length (`return batch, x, edge_src`)."""
        if not (isinstance(value, ast.Call) and self.helpers is not None):
            return None
        attr = _self_call(value)
        if attr in self.methods:
            return self.helpers.elements((self.fn.cls.name if self.fn.cls is not None else None, attr))
        if attr is not None:
            inherited = self._inherited(attr)
            return None if inherited is None else self.helpers.elements(inherited)
        if isinstance(value.func, ast.Name):
            return self.helpers.elements((None, value.func.id))
        return None

    def _inherited(self, attr: str) -> tuple[str, str] | None:
        """The helper key of `self.attr` when a base class of the file defines the method and the class
        does not: Python looks the name up along the bases, so `self._check(x)` in a subclass runs the
        base's `_check`, a method and no submodule. What it returns is its helper's answer where that
        is known; a tuple's elements that its returns do not show are unknown, not each a tensor."""
        if attr in self.methods or self.helpers is None or self.fn.cls is None:
            return None
        owner = self.helpers.owner(self.fn.cls, attr)
        return None if owner is None else (owner, attr)

    def _bind_starred(self, target: ast.Tuple | ast.List, elements: list[ast.expr], env: Env) -> None:
        """`b, n, m, d = *x.shape[:2], mask, x.device`: the elements before the one starred element
        bind in order, those after it from the end, and the names between get what the starred
        value holds (a shape's entries are dims); anything less plain binds no kind."""
        starred = [i for i, e in enumerate(elements) if isinstance(e, ast.Starred)]
        names = target.elts
        if len(starred) != 1 or any(isinstance(t, ast.Starred) for t in names):
            for name in names:
                self.bind(name.value if isinstance(name, ast.Starred) else name, None, None, env)
            return
        head, tail = starred[0], len(elements) - starred[0] - 1
        if head + tail > len(names):
            for name in names:
                self.bind(name, None, None, env)
            return
        kinds = [self.kind(e, env) for e in elements]
        spread = _element_kind(self.kind(elements[head].value, env), None)
        middle = [spread] * (len(names) - head - tail)
        for name, kind, source in zip(
            names,
            [*kinds[:head], *middle, *kinds[head + 1 :]],
            [*elements[:head], *[None] * len(middle), *elements[head + 1 :]],
            strict=True,
        ):
            self.bind(name, kind, source, env)

    def _iter_element_kind(self, iterable: ast.expr, env: Env) -> str | None:
        if isinstance(iterable, ast.Attribute) and isinstance(iterable.value, ast.Name):
            if iterable.value.id == "self":
                # for layer in self.layers; a tensor attribute's rows are tensors (`self.mask`)
                return TENSOR if self.kind(iterable, env) in TENSORS else MODULE
        if isinstance(iterable, ast.Subscript) and isinstance(iterable.value, ast.Attribute):
            if isinstance(iterable.value.value, ast.Name) and iterable.value.value.id == "self":
                return MODULE  # for layer in self.layers[:n]
        kind = self.kind(iterable, env)
        if kind in TENSORS or kind == TUPLE:
            return TENSOR
        if kind == MAYBE:
            return MAYBE
        return None

    def read_off_guess(self, expr: ast.expr) -> bool:
        """`expr` only reads what a guess holds (see `guessed`): the guessed name itself, a fixed
        element or slice of it (`pathway[0]`, `pathway[:-1]`), or a comparison of such values with
        each other or with literals (`start > end`). A parameter taken for a tensor on its name alone
        may as well be a tuple of ints (vit-pytorch wwt's `pathway`); what is read off it at a fixed
        place is no more than a guess either. The elements a loop over a guess binds are not made
        guesses: comparisons of a guessed tensor's rows (torchdiffeq's `all(x < y for x, y in
        zip(ts[:-1], ts[1:]))`) break, and stay flagged."""
        if isinstance(expr, ast.Name):
            return expr.id in self.guessed and self.assigned.get(expr.id) == 1
        if isinstance(expr, ast.Subscript):
            # a fixed element or slice: `pathway[0]`, `pathway[:-1]` (no index the code computes)
            return self.read_off_guess(expr.value) and not any(
                isinstance(n, ast.Name) for n in walk(expr.slice)
            )
        if isinstance(expr, ast.Compare):
            parts = [expr.left, *expr.comparators]
            return any(not isinstance(p, ast.Constant) for p in parts) and all(
                isinstance(p, ast.Constant) or self.read_off_guess(p) for p in parts
            )
        return False

    def _bind_for_target(self, target: ast.expr, iterable: ast.expr, env: Env) -> None:
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, (ast.Name, ast.Attribute)):
            name = iterable.func.id if isinstance(iterable.func, ast.Name) else None
            if self.imports.qualname(iterable.func) == "itertools.zip_longest":
                name = "zip"  # the shorter iterables are padded with None: each name holds what zip gives
            if (
                name == "enumerate"
                and iterable.args
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                self.bind(target.elts[0], None, None, env)
                self._bind_for_target(target.elts[1], iterable.args[0], env)
                return
            if name == "zip" and isinstance(target, ast.Tuple) and len(target.elts) == len(iterable.args):
                for element, source in zip(target.elts, iterable.args, strict=False):
                    self._bind_for_target(element, source, env)
                return
            if name in ("range", "reversed", "sorted", "list", "tuple"):
                inner = iterable.args[0] if name != "range" and iterable.args else None
                if inner is None:
                    self.bind(target, None, None, env)
                else:
                    self._bind_for_target(target, inner, env)
                return
        fields = self._parameter_fields(iterable, target)
        if fields is not None:
            # `for index, latent, strength, frames in conditions` over `list[tuple[int, Tensor, float,
            # int]]`: each name is what its field's annotation says, not all of them tensors
            for element, annotation in zip(target.elts, fields, strict=True):
                self.bind(element, annotation_kind(annotation), None, env)
            return
        kind = self._iter_element_kind(iterable, env)
        if isinstance(target, ast.Name):
            self.bind(target, kind, None, env)
        else:
            self.bind(target, TUPLE if kind in TENSORISH else None, None, env)

    def _parameter_fields(self, iterable: ast.expr, target: ast.expr) -> list[ast.expr] | None:
        """The field annotations of the parameter `iterable` names, when it is annotated a list of
        tuples as long as `target` unpacks (`tuple_element_annotations`) and the name is bound
        nowhere else in the function (not rebound, not a nested def's own parameter); else None."""
        if not isinstance(iterable, ast.Name) or not isinstance(target, (ast.Tuple, ast.List)):
            return None
        if any(isinstance(e, ast.Starred) for e in target.elts):
            return None
        args = getattr(self.fn.node, "args", None)
        if args is None:
            return None
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if a.arg == iterable.id and a.annotation is not None:
                stores = self.assigned.get(iterable.id)
                if stores != 1 and not (stores == 2 and self._filled_alike(iterable.id, a.annotation)):
                    return None
                fields = tuple_element_annotations(a.annotation)
                return fields if fields is not None and len(fields) == len(target.elts) else None
        return None

    def _filled_alike(self, name: str, annotation: ast.expr) -> bool:
        """`if name is None: name = self.m(...)` is the parameter's one rebinding, and the method `m`
        of the class is annotated to return the parameter's own type, None left out (diffusers LTX-2's
        `condition_latents = self.encode_conditions(...)`, both `list[tuple[int, Tensor, float,
        int]]`): the fields keep their types."""
        cls = self.fn.cls
        if cls is None:
            return False
        methods = {s.name: s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        wanted = ast.dump(_without_none(annotation))
        for node in walk(self.fn.node):
            if not (isinstance(node, ast.If) and _tests_none(node.test, name)):
                continue
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name
                    and isinstance(stmt.value, ast.Call)
                ):
                    method = methods.get(_self_attr(stmt.value.func) or "")
                    return (
                        method is not None
                        and method.returns is not None
                        and ast.dump(_without_none(method.returns)) == wanted
                    )
        return False

    def _record(self, stmt: ast.stmt, exprs: list[ast.AST | None], env: Env, live: bool) -> None:
        if not (live and self._recording):
            return
        add, path = self.sites, self._path
        add[type(stmt)].append(Site(stmt, env, stmt, path))
        for expr in exprs:
            if expr is None:
                continue
            self._record_tree(expr, env, stmt, path)

    def _record_tree(self, expr: ast.AST, env: Env, stmt: ast.stmt, path: str | None) -> None:
        """Record `expr` and the nodes under it as sites of `stmt`, each with `env`; the parts of a
        comprehension get the names its `for` clauses bind (`_record_comprehension`)."""
        add = self.sites
        make = _new_tuple  # `Site(node, env, stmt, path)` without the named tuple's own `__new__`
        stack = [expr]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Lambda:
                continue  # error-message thunks (`lambda: f"..."`): run only when a check fails
            if kind is ast.IfExp:
                truth = self.trace_truth(node.test)
                if truth is not None:  # `deepcopy(s) if copy else s` with copy left False
                    add[kind].append(make(Site, (node, env, stmt, path)))
                    stack.extend([node.test, node.body if truth else node.orelse])
                    continue
            if kind is ast.BoolOp:
                # `a and b` never evaluates `b` where `a` is False on every traced call
                # (`not is_compiling() and bool(m.any())`): the operands after the deciding one
                # are not traced
                decisive = isinstance(node.op, ast.Or)
                values = list(node.values)
                for index, value in enumerate(values[:-1]):
                    if self.trace_truth(value) is decisive:
                        values = values[: index + 1]
                        break
                if len(values) < len(node.values):
                    add[kind].append(make(Site, (node, env, stmt, path)))
                    stack.extend(values)
                    continue
            if kind not in _UNRECORDED:
                add[kind].append(make(Site, (node, env, stmt, path)))
            if kind in _COMPREHENSIONS:
                self._record_comprehension(node, env, stmt, path)
                continue
            stack.extend(child_nodes(node))

    def _record_comprehension(self, node: ast.expr, env: Env, stmt: ast.stmt, path: str | None) -> None:
        """The parts of `[elt for t in it if cond]`, each with the names its `for` clauses bind:
        `t` holds what iterating `it` gives (a row of a tensor, an element of a list of tensors).
        Each `comprehension` clause is recorded with the environment its `if` tests see."""
        inner = env
        for generator in node.generators:
            self._record_tree(generator.iter, inner, stmt, path)
            inner = dict(inner)
            self._bind_for_target(generator.target, generator.iter, inner)
            self.sites[ast.comprehension].append(Site(generator, inner, stmt, path))
            for part in (generator.target, *generator.ifs):
                self._record_tree(part, inner, stmt, path)
        for end in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
            self._record_tree(end, inner, stmt, path)

    def block(self, body: list[ast.stmt], env: Env, live: bool) -> Env:
        # What an early return narrowed (`_walk_If`) holds to the end of its own block only: a loop
        # may run no time and starts each pass as it started, a handler runs after a raise in the
        # `try`, another `case` runs instead.
        members = self._members
        try:
            for stmt in body:
                env = self.statement(stmt, env, live)
                if live and isinstance(stmt, ast.If) and self._always_leaves(stmt):
                    # `if not flag: return x` with flag left False, or `if is_tracing(x): return`
                    # (transformers' padding warning): the rest is dead while dynamo traces
                    live = False
            return env
        finally:
            self._members = members

    def _always_leaves(self, stmt: ast.If) -> bool:
        truth = self.trace_truth(stmt.test)
        taken = stmt.body if truth else stmt.orelse
        return truth is not None and bool(taken) and isinstance(taken[-1], (ast.Return, ast.Raise))

    def branch(self, body: list[ast.stmt], env: Env, live: bool, path: str | None) -> Env:
        """Walk a branch; its sites are on `path` unless the branch already sits on a side road."""
        outer, members = self._path, self._members
        self._path = outer or path
        try:
            return self.block(body, env, live)
        finally:
            self._path, self._members = outer, members

    def statement(self, stmt: ast.stmt, env: Env, live: bool) -> Env:
        """Walk one statement: record its sites, and return the environment after it."""
        return _STATEMENTS.get(type(stmt), FunctionFlow._walk_other)(self, stmt, env, live)

    # One method per statement type (the table `_STATEMENTS` below the class); `_walk_other`
    # takes the rest (Expr, Return, Global, Pass, Break, Continue ...).

    def _walk_Assign(self, stmt: ast.Assign, env: Env, live: bool) -> Env:
        self._record(stmt, [*stmt.targets, stmt.value], env, live)
        kind = self.kind(stmt.value, env)
        env = dict(env)
        for target in stmt.targets:
            self.bind(target, kind, stmt.value, env)
        return env

    def _walk_AnnAssign(self, stmt: ast.AnnAssign, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.target, stmt.value], env, live)
        if stmt.value is not None:
            env = dict(env)
            self.bind(stmt.target, self.kind(stmt.value, env), stmt.value, env)
        return env

    def _walk_AugAssign(self, stmt: ast.AugAssign, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.target, stmt.value], env, live)
        if _DOTTED in env and isinstance(stmt.target, ast.Attribute):
            env = dict(env)
            _forget(env, stmt.target)
        if isinstance(stmt.target, ast.Name):
            before, added = env.get(stmt.target.id), self.kind(stmt.value, env)
            if before not in TENSORISH and added in TENSORISH and before != TUPLE:
                env = {**env, stmt.target.id: TENSOR}
        return env

    def constant_truth(self, test: ast.expr) -> bool | None:
        """The value of a test on parameters left at their defaults (`if copy:`, `meta is None`)."""
        if isinstance(test, ast.Name) and test.id in self.constants:
            return bool(self.constants[test.id])
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.constant_truth(test.operand)
            return None if inner is None else not inner
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.left, ast.Name)
            and test.left.id in self.constants
            and _is_none(test.comparators[0])
        ):
            return (self.constants[test.left.id] is None) == isinstance(test.ops[0], ast.Is)
        return None

    def trace_truth(self, test: ast.expr) -> bool | None:
        """The value `test` has on every call dynamo traces, or None: `compile_truth` (is_compiling,
        is_scripting) and `constant_truth` (parameters left at their defaults), through `not`,
        `and`, `or`, calls of in-scope helpers that return a constant while tracing
        (`HelperReturns.compile_return`), and `x in c` where `c` is bound once, to an empty
        collection while tracing (`stop_checks = rounds(n) if _can_stop_cascade(image) else ()`,
        kornia's distance transform: a check it skips while compiling)."""
        truth = compile_truth(test)
        if truth is None:
            truth = self.constant_truth(test)
        if truth is not None:
            return truth
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.trace_truth(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            values = [self.trace_truth(v) for v in test.values]
            decisive = isinstance(test.op, ast.Or)  # the value that decides: True for `or`
            if decisive in values:
                return decisive
            return not decisive if all(v is (not decisive) for v in values) else None
        if isinstance(test, ast.Call) and self.helpers is not None and not test.keywords:
            key = _helper_key(test.func, self.fn.cls.name if self.fn.cls is not None else None)
            value = self.helpers.compile_return(key) if key is not None else _UNKNOWN
            return bool(value) if value is not _UNKNOWN else None
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and self._empty_while_traced(test.comparators[0])
        ):
            return isinstance(test.ops[0], ast.NotIn)
        return None

    def _empty_while_traced(self, expr: ast.expr) -> bool:
        """`expr` is a name bound once in the function to an empty collection on every traced call,
        directly or as the arm of a conditional expression whose test dynamo decides."""
        if not isinstance(expr, ast.Name) or self.assigned.get(expr.id) != 1:
            return False
        for node in walk(self.fn.node):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == expr.id
            ):
                value = node.value
                while isinstance(value, ast.IfExp):
                    truth = self.trace_truth(value.test)
                    if truth is None:
                        return False
                    value = value.body if truth else value.orelse
                return _empty_literal(value)
        return False

    def _walk_If(self, stmt: ast.If, env: Env, live: bool) -> Env:
        body_path = branch_path(stmt.test, stmt.body)
        if body_path is None and warns_of_override(stmt.test, stmt.body):
            if stmt.test.id in self._left_as_passed(stmt.lineno):
                body_path = MISUSE
        if self._path is None and body_path in (DEPRECATION, MISUSE) and self._size_guarded(stmt.test, env):
            self._path = body_path  # the test's tensor read is on the branch's side road
            self._record(stmt, [stmt.test], env, live)
            self._path = None
        else:
            self._record(stmt, [stmt.test], env, live)
        truth = self.trace_truth(stmt.test)
        body_in, else_in = env, env
        negated = isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
        narrowed = _narrowed(stmt.test.operand if negated else stmt.test)
        if narrowed is None and isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And):
            # `isinstance(s, Sequence) and isinstance(s[0], Tensor)`: the body runs only when each holds
            narrowed = next((n for n in map(_narrowed, stmt.test.values) if n is not None), None)
        if _numpy_test(stmt.test.operand if negated else stmt.test) in _surely_tensors(env):
            # `isinstance(p, np.ndarray)` of a value this path makes a tensor: the numpy branch
            # is dead here (MONAI's point sampling, reached from VISTA3D with tensor points).
            truth = negated
        if narrowed is not None:
            inner = without(env, narrowed[0])
            if narrowed[1]:
                inner[narrowed[0]] = narrowed[1]
            body_in, else_in = (env, inner) if negated else (inner, env)
        tested = _tensor_test(stmt.test.operand if negated else stmt.test)
        if tested is not None:
            host = without(env, tested)
            body_in, else_in = (host, env) if negated else (env, host)
            if truth is None and self._host_option(tested, env):
                # `if torch.is_tensor(self.domain):` where the class only ever stores a number
                # option there: the tensor arm is dead, and its kinds reach nothing after it
                # (normflows' `compute_domain_codomain`).
                truth = negated
        union = self._union_test(stmt)
        members = self._members
        if union is not None:
            name, body_members, else_members = union
            body_in, else_in = _narrow(body_in, name, body_members), _narrow(else_in, name, else_members)
            self._members = {**members, name: body_members}
        body_env = self.branch(stmt.body, body_in, live and truth is not False, body_path)
        if union is not None:
            self._members = {**members, name: else_members}
        else_env = self.branch(
            stmt.orelse, else_in, live and truth is not True, branch_path(None, stmt.orelse, stmt.body)
        )
        self._members = members
        if union is not None and truth is None and _leaves(stmt.body) != _leaves(stmt.orelse):
            # after `if isinstance(x, SparseTensor): return ...`, x is what the other arm left
            self._members = {**members, name: body_members if _leaves(stmt.orelse) else else_members}
        # A branch that returns or raises hands nothing on: after `if isinstance(x, Tensor):
        # return f(x)` only the other branch's kinds hold (`x` is no tensor there; kornia's
        # `_patch_indices` then reads `int(i) for i in x` of a list).
        if truth is not None:
            return body_env if truth else else_env  # the dead arm hands on nothing
        if _leaves(stmt.body) and not _leaves(stmt.orelse):
            return else_env
        if _leaves(stmt.orelse) and not _leaves(stmt.body):
            return body_env
        return _merge(body_env, else_env)

    def _union_test(self, stmt: ast.If) -> tuple[str, frozenset[str], frozenset[str]] | None:
        """`if isinstance(x, SparseTensor):` on a union parameter `x` (`unions`) that still holds
        what the caller passed: (x, the members it may be in the body, those in the other arm).
        Also under `not`, and for the body of `isinstance(x, A) and ...`. None where the test names
        no member of the union (`EdgeIndex`, a subclass the annotation does not list, tells nothing:
        a `Tensor` may be one), or names `object`."""
        if not self.unions:
            return None
        test, negated, conjunction = stmt.test, False, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            test = next((v for v in test.values if _isinstance_test(v) is not None), test)
            conjunction = True
        tested = _isinstance_test(test)
        if tested is None or tested[0] not in self.unions:
            return None
        name, types = tested
        members = self._members.get(name, self.unions[name])
        if "object" in types or not types & members or not self._holds_parameter(name, stmt):
            return None
        # an int passes where `float` is annotated (and an int or float where `complex` is): a test of
        # `float` alone leaves them
        implied = {"int"} if "float" in members else set()
        implied |= {"int", "float"} if "complex" in members else set()
        kept, rest = members & types, (members | implied) - types
        if conjunction:
            return name, kept, members  # the other arm runs whether or not x is one
        return (name, rest, kept) if negated else (name, kept, rest)

    def _holds_parameter(self, name: str, stmt: ast.stmt) -> bool:
        """`name` holds what the caller passed when `stmt` runs: the statement is the function's
        own (not a nested def's), nothing stores to `name` above it, nor in a loop around it."""
        if not any(node is stmt for node in own_nodes(self.fn.node)):
            return False
        stores = [n.lineno for n in walk(self.fn.node) if name in _bound_names(n)]
        test = stmt.test if isinstance(stmt, ast.If) else stmt
        if any(line <= (test.end_lineno or stmt.lineno) for line in stores):  # a walrus in the test
            return False
        for loop in walk(self.fn.node):
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
                span = range(loop.lineno, (loop.end_lineno or loop.lineno) + 1)
                if stmt.lineno in span and any(line in span for line in stores):
                    return False
        return True

    def _left_as_passed(self, line: int) -> frozenset[str]:
        """The parameters defaulting to None or False that the function has not rebound before `line`:
        what they hold there is what the caller passed."""
        unset = {
            a.arg
            for a, d in defaulted(self.fn.node)
            if isinstance(d, ast.Constant) and (d.value is None or d.value is False)  # not 0, which == False
        }
        if not unset:
            return frozenset()
        for node in walk(self.fn.node):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno < line:
                unset -= stored_names(node)
        return frozenset(unset)

    def _size_guarded(self, test: ast.expr, env: Env) -> bool:
        """`if long.shape[-1] >= ids.shape[-1] and not torch.equal(ids, long):`: the test's tensor
        read runs only once a comparison of host sizes holds (`and` short-circuits). Where the
        branch only warns that the input was cut or misused, that comparison is the test for the
        side road, and the read belongs to it (diffusers' prompt-truncation check: a prompt
        shorter than the model's limit stops at the sizes)."""
        if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
            return False
        guard = test.values[0]
        if not isinstance(guard, ast.Compare):
            return False
        operands = [guard.left, *guard.comparators]
        literal = [isinstance(o, ast.Constant) and isinstance(o.value, (int, float)) for o in operands]
        return not all(literal) and all(
            is_literal or _dim_expr(o) or self.kind(o, env) in _NUMBERS
            for o, is_literal in zip(operands, literal, strict=True)
        )

    def _host_option(self, path: str, env: Env) -> bool:
        """`path` holds a host value that a tensor test cannot find a tensor in: a kind the code
        showed (a number, a list, a shape, a failed test), or `self.X` of a class that stores only
        literals and number options in X (`self.domain = domain` with `domain=2`). A parameter's
        own number default proves nothing here: callers in other files hand tensors through
        `**kwargs` unseen (normflows' `tail_bound`, a buffer passed on to the spline function)."""
        kind = env.get(path)
        if kind is not None:
            return kind in (SCALAR, LIST, DIM, SHAPE, "")
        owner, _, attr = path.partition(".")
        return owner == "self" and attr in self.host_attrs

    def _walk_While(self, stmt: ast.While, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.test], env, live)
        truth = compile_truth(stmt.test)
        body_env = self.branch(stmt.body, env, live and truth is not False, None)
        # A second pass (not live: it records nothing) carries kinds around the loop.
        body_env = self.block(stmt.body, _merge(env, body_env), False)
        else_env = self.branch(stmt.orelse, env, live and truth is not True, None)
        return _merge(body_env, else_env)

    def _walk_For(self, stmt: ast.For | ast.AsyncFor, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.target, stmt.iter], env, live)
        loop_env = dict(env)
        self._bind_for_target(stmt.target, stmt.iter, loop_env)
        # A first silent pass lets kinds carried around the loop reach its top.
        was = self._recording
        self._recording = False
        after = self.block(stmt.body, loop_env, live)
        self._recording = was
        loop_env = _merge(loop_env, after)
        after = self.block(stmt.body, loop_env, live)
        return self.block(stmt.orelse, _merge(env, after), live)

    def _walk_With(self, stmt: ast.With | ast.AsyncWith, env: Env, live: bool) -> Env:
        self._record(stmt, [i.context_expr for i in stmt.items], env, live)
        env = dict(env)
        for item in stmt.items:
            if item.optional_vars is not None:
                self.bind(item.optional_vars, None, None, env)
        return self.block(stmt.body, env, live)

    def _walk_Try(self, stmt: ast.Try, env: Env, live: bool) -> Env:
        out = self.block(stmt.body, env, live)
        for handler in stmt.handlers:
            out = _merge(out, self.branch(handler.body, env, live, handler_path(handler)))
        out = self.block(stmt.orelse, out, live)
        return self.block(stmt.finalbody, out, live)

    def _walk_Match(self, stmt: ast.Match, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.subject], env, live)
        out = env
        for case in stmt.cases:
            out = _merge(out, self.block(case.body, env, live))
        return out

    def _walk_FunctionDef(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, env: Env, live: bool) -> Env:
        # A closure (e.g. a checkpointed custom_forward) is traced when called: walk it too.
        self._record(stmt, list(stmt.decorator_list), env, live)
        guesses: set[str] = set()
        inner = parameter_kinds(stmt, guessed=guesses)
        for name in host_nested_parameters(self.fn.node, stmt, lambda e: self.kind(e, env)):
            inner.pop(name, None)
            guesses.discard(name)
        # A nested def that the function never calls by name is only handed on (returned as a
        # collate function, given to a loader): a parameter taken for a tensor on its name alone
        # is as much a guess there as in the function itself (`def collate(items): for item in
        # items:` gets a list of dicts). Where the function calls it, the calls decide (above).
        # A name bound anywhere else in the function is left a tensor, so that no other binding
        # of it reads as a guess.
        if not _called_by_name(self.fn.node, stmt.name):
            self.guessed.update(name for name in guesses if self.assigned.get(name) == 1)
        else:
            # Called by name with elements of something not known to hold tensors (`for p in
            # pathways: build(p)`): the calls show no tensor, so the name's guess stays a guess.
            self.guessed.update(
                name
                for name in self._handed_elements(stmt, env)
                if name in guesses and self.assigned.get(name) == 1
            )
        self.block(stmt.body, {**env, **inner}, live)
        return env

    def _handed_elements(self, inner: ast.FunctionDef | ast.AsyncFunctionDef, env: Env) -> list[str]:
        """Parameters of the nested def `inner` that every call of it by name hands the element of
        an iteration (`f(p) for p in ps`) over a name bound once, before the def, to no tensor,
        tuple of tensors or submodule output, or to a guess."""
        params = [a.arg for a in (*inner.args.posonlyargs, *inner.args.args)]
        iterated: dict[str, ast.expr] = {}  # a loop name -> what it iterates
        calls = []
        args = self.fn.node.args
        bound = {
            a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
        }  # and stored before the def
        for node in walk(self.fn.node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.lineno < inner.lineno:
                bound.add(node.id)
            if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                iterated[node.target.id] = node.iter
            elif (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == inner.name
            ):
                calls.append(node)
        found = []
        for index, name in enumerate(params):
            args = [c.args[index] if index < len(c.args) and not c.keywords else None for c in calls]
            if calls and all(
                isinstance(a, ast.Name)
                and self.assigned.get(a.id) == 1
                and isinstance(iterated.get(a.id), ast.Name)
                and self.assigned.get(iterated[a.id].id) == 1
                and iterated[a.id].id in bound
                and (
                    self.kind(iterated[a.id], env) not in (*TENSORISH, TUPLE)
                    or self.read_off_guess(iterated[a.id])
                )
                for a in args
            ):
                found.append(name)
        return found

    def _walk_untraced(self, stmt: ast.stmt, env: Env, live: bool) -> Env:
        return env  # an error path (raise), or nothing traced (class, import)

    def _walk_Assert(self, stmt: ast.Assert, env: Env, live: bool) -> Env:
        self._record(stmt, [stmt.test], env, live)
        return env

    def _walk_Delete(self, stmt: ast.Delete, env: Env, live: bool) -> Env:
        self._record(stmt, list(stmt.targets), env, live)
        return env

    def _walk_other(self, stmt: ast.stmt, env: Env, live: bool) -> Env:
        self._record(stmt, [getattr(stmt, "value", None)], env, live)
        return env


# Dispatch tables: node type -> the FunctionFlow method for it (exact types: `ast` has no subclasses
# of these in what `ast.parse` returns).
_EXPRESSION_KINDS = {
    ast.Name: FunctionFlow._kind_Name,
    ast.Call: FunctionFlow._kind_Call,
    ast.Attribute: FunctionFlow._kind_Attribute,
    ast.Subscript: FunctionFlow._kind_Subscript,
    ast.Constant: FunctionFlow._kind_Constant,
    ast.BinOp: FunctionFlow._kind_BinOp,
    ast.UnaryOp: FunctionFlow._kind_UnaryOp,
    ast.Compare: FunctionFlow._kind_Compare,
    ast.BoolOp: FunctionFlow._kind_BoolOp,
    ast.IfExp: FunctionFlow._kind_IfExp,
    ast.Tuple: FunctionFlow._kind_Tuple,
    ast.List: FunctionFlow._kind_Tuple,
    ast.NamedExpr: FunctionFlow._kind_NamedExpr,
}
_STATEMENTS = {
    ast.Assign: FunctionFlow._walk_Assign,
    ast.AnnAssign: FunctionFlow._walk_AnnAssign,
    ast.AugAssign: FunctionFlow._walk_AugAssign,
    ast.If: FunctionFlow._walk_If,
    ast.While: FunctionFlow._walk_While,
    ast.For: FunctionFlow._walk_For,
    ast.AsyncFor: FunctionFlow._walk_For,
    ast.With: FunctionFlow._walk_With,
    ast.AsyncWith: FunctionFlow._walk_With,
    ast.Try: FunctionFlow._walk_Try,
    getattr(ast, "TryStar", ast.Try): FunctionFlow._walk_Try,  # Python 3.11+
    ast.Match: FunctionFlow._walk_Match,
    ast.FunctionDef: FunctionFlow._walk_FunctionDef,
    ast.AsyncFunctionDef: FunctionFlow._walk_FunctionDef,
    ast.Raise: FunctionFlow._walk_untraced,
    ast.ClassDef: FunctionFlow._walk_untraced,
    ast.Import: FunctionFlow._walk_untraced,
    ast.ImportFrom: FunctionFlow._walk_untraced,
    ast.Assert: FunctionFlow._walk_Assert,
    ast.Delete: FunctionFlow._walk_Delete,
}


def _element_kind(kind: str | None, value: ast.expr | None) -> str | None:
    """The kind of each name when a value of `kind` is unpacked into several names."""
    if kind in (TUPLE, TENSOR, BOOL):
        return TENSOR
    if kind == MAYBE:
        return MAYBE
    if kind == SHAPE:
        return DIM
    return None


_AS_TENSOR = frozenset({"torch.as_tensor", "torch.asarray"})
# Tensor methods that keep the dtype when given no dtype (`.to(device)`).
_MOVES = frozenset({"to", "clone", "detach", "contiguous", "cuda", "cpu"})


def _keeps_dtype(call: ast.Call, positional: bool = False) -> bool:
    """The call names no dtype: no `dtype=`, and with `positional`, no positional argument but a
    device (`x.device`, `device`, "cuda"), as in `mask.to(x.device)`."""
    if any(k.arg == "dtype" or k.arg is None for k in call.keywords):
        return False
    if not positional:
        return True
    return all(
        (isinstance(a, ast.Attribute) and a.attr == "device")
        or (isinstance(a, ast.Name) and a.id == "device")
        or (isinstance(a, ast.Constant) and isinstance(a.value, str))
        for a in call.args
    )


def _has_dim(call: ast.Call) -> bool:
    return bool(call.args) or any(k.arg == "dim" for k in call.keywords)


# Methods of Python lists that tensors lack: `mems.copy()`, `mems.pop(0)` hold no tensor.
_LIST_METHODS = frozenset({"copy", "pop", "append", "extend", "insert"})


# Tensor metadata attributes: host values (a device, a dtype, a shape).
_METADATA = frozenset({"device", "dtype", "shape", "ndim", "is_cuda", "layout"})


def _self_call(value: ast.expr | None) -> str | None:
    """`m` of a call `self.m(...)`, else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if isinstance(value.func.value, ast.Name) and value.func.value.id == "self":
            return value.func.attr
    return None


def _host_method_kind(method: str, call: ast.Call) -> str | None:
    """`self.size(-1)` of a class that inherits `size` from another file, `p.size()` of an element of
    `self.grid`: a method tensors answer on the host (`HOST_METHODS`) is no submodule's call, so its
    result is a host value, a shape or a length for `size` (gpytorch's `ZeroLinearOperator.matmul`,
    `GridKernel.is_ragged` compare sizes; neither breaks under dynamo, torch 2.13)."""
    if method == "size":
        return DIM if call.args else SHAPE
    return None


def _method_kind(method: str, call: ast.Call) -> str | None:
    if method in HOST_METHODS or method.startswith(("is_", "has_")):
        return None  # is_contiguous(), is_floating_point(), has_names(): flags on the host
    if method in _LIST_METHODS:
        return None
    if method in TUPLE_METHODS:
        return TUPLE
    if method in DIM_TUPLE_METHODS:
        return TUPLE if _has_dim(call) and not _other_tensor_arg(call) else TENSOR
    if method in BOOL_METHODS:
        return BOOL
    if method in ("to", "type") and call.args and _dtype_name(call.args[-1]) == "bool":
        return BOOL
    if method == "nonzero" and any(k.arg == "as_tuple" for k in call.keywords):
        return TUPLE
    return TENSOR


def _other_tensor_arg(call: ast.Call) -> bool:
    # torch.max(a, b) / a.max(b) is elementwise, not a (values, indices) pair; a dim is a constant.
    first = call.args[0] if call.args else None
    return first is not None and not isinstance(first, (ast.Constant, ast.UnaryOp))


def _dtype_name(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return expr.attr
    return None


# Tensor subclasses a module holds its state in (`self.padding_total = nn.Buffer(t)`).
_PARAMETER_TYPES = frozenset(
    {"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer"}
)


# Functions under a prefix of NON_TENSOR_TORCH_PREFIXES that return one tensor.
_TENSOR_UTILS = frozenset({"torch.nn.utils.rnn.pad_sequence"})


def _torch_call_kind(qual: str, call: ast.Call) -> str | None:
    if not qual.startswith("torch."):
        return None
    if qual in _PARAMETER_TYPES:
        return TENSOR
    if qual in _TENSOR_UTILS:
        return TENSOR
    if qual in NON_TENSOR_TORCH or qual.startswith(NON_TENSOR_TORCH_PREFIXES):
        return None
    last = qual.rsplit(".", 1)[-1]
    if last.startswith("_") or any(part.startswith("_") for part in qual.split(".")[1:-1]):
        return None  # private helpers: no promise about what they return
    if last[:1].isupper():
        return MODULE if qual.startswith("torch.nn.") else (TENSOR if last.endswith("Tensor") else None)
    if qual in TORCH_TUPLES:
        return TUPLE
    if qual in TORCH_DIM_TUPLES:
        rest = call.args[1:]
        has_dim = bool(rest) and isinstance(rest[0], (ast.Constant, ast.UnaryOp))
        return TUPLE if has_dim or any(k.arg == "dim" for k in call.keywords) else TENSOR
    if qual == "torch.where" and len(call.args) == 1:
        return TUPLE
    if qual == "torch.nonzero" and any(k.arg == "as_tuple" for k in call.keywords):
        return TUPLE
    if qual in TORCH_BOOLS:
        return BOOL
    return TENSOR


_TENSOR_METHODS = frozenset({"to", "float", "double", "half", "bfloat16", "long", "int", "clone", "detach"})


def _makes_tensor(expr: ast.expr, imports: ImportTable) -> bool:
    """A value the code visibly builds as a tensor: a torch function's result, or a tensor method
    of one (`torch.from_numpy(t).to(device)`, `torch.arange(n).flip(0)`)."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    qual = imports.qualname(func)
    if qual is None:
        if isinstance(func, ast.Name):
            return _builds_tensor(func.id, imports)
        return (
            isinstance(func, ast.Attribute)
            and _method_kind(func.attr, expr) in TENSORS
            and _makes_tensor(func.value, imports)
        )
    return _torch_call_kind(qual, expr) == TENSOR


def _builds_tensor(name: str, imports: ImportTable) -> bool:
    """Whether the file's module-level function `name` returns, on every `return`, a tensor it
    builds: `torch.tensor(betas)`, or a local name whose every assignment builds one."""
    if name not in imports.builds:
        imports.builds[name] = False  # a recursive call proves nothing
        fn = imports.functions.get(name)
        imports.builds[name] = fn is not None and _returns_built(fn, imports)
    return imports.builds[name]


def _returns_built(fn: ast.FunctionDef, imports: ImportTable) -> bool:
    returns: list[ast.Return] = []
    assigned: dict[str, list[ast.expr | None]] = defaultdict(list)
    stack: list[ast.AST] = list(fn.body)
    while stack:  # the function's own statements: not those of a nested def, lambda or class
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return):
            returns.append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in walk(target):
                    if isinstance(name, ast.Name):
                        assigned[name.id].append(node.value if name is target else None)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            for name in walk(node.target):
                if isinstance(name, ast.Name):
                    assigned[name.id].append(None)
        stack.extend(child_nodes(node))
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}

    def built(value: ast.expr | None) -> bool:
        if isinstance(value, ast.Name):
            values = assigned.get(value.id)
            return (
                bool(values)
                and value.id not in params
                and all(
                    v is not None and not isinstance(v, ast.Name) and _makes_tensor(v, imports)
                    for v in values
                )
            )
        return value is not None and _makes_tensor(value, imports)

    return bool(returns) and all(built(r.value) for r in returns)


def _cast_base(expr: ast.expr) -> ast.expr:
    """`x.to("cpu").float()` -> `x`: the value a chain of tensor-preserving casts starts from."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _TENSOR_METHODS
    ):
        expr = expr.func.value
    return expr


def _local_tensors(
    body: list[ast.stmt], imports: ImportTable, before: dict[str, bool], at: dict[int, dict]
) -> dict:
    """Which local names hold a tensor the code built, statement by statement (name -> bool);
    `at` gets the state before each `self.X = <name>` statement. Branches merge by agreement:
    a name is a tensor after an `if` only when every way through leaves it one."""
    state = dict(before)
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            if any(_self_attr(t) for t in stmt.targets):
                at[id(stmt)] = state
            base = _cast_base(stmt.value)
            made = (
                _makes_tensor(stmt.value, imports)
                or (isinstance(base, ast.Name) and state.get(base.id, False))
                or _arithmetic_on_tensor(stmt.value, state)
            )
            state = dict(state)
            for target in stmt.targets:
                for node in walk(target):
                    if isinstance(node, ast.Name):
                        state[node.id] = bool(made) and node is target
            continue
        blocks = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
        blocks = [b for b in blocks if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        if not blocks and not isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            continue
        outs = [_local_tensors(b, imports, state, at) for b in blocks]
        always = isinstance(stmt, (ast.With, ast.AsyncWith)) or (isinstance(stmt, ast.If) and stmt.orelse)
        if not always or not outs:
            outs.append(state)  # the body may not run (a loop, an `if` without `else`, a `try`)
        assigned = {n.id for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        merged = dict(state)
        for name in assigned:
            merged[name] = all(out.get(name, False) for out in outs)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.AugAssign, ast.AnnAssign)):
            for node in walk(stmt.target):
                if isinstance(node, ast.Name):
                    merged[node.id] = False
        state = merged
    return state


def _arithmetic_on_tensor(value: ast.expr, state: dict) -> bool:
    """`shift * sigmas / (1 + (shift - 1) * sigmas)` with `sigmas` a local tensor: arithmetic of
    names and number literals in which some name holds a built tensor gives a tensor."""
    operands = _arithmetic_operands(value, _INT_OPS + (ast.Div, ast.Pow))
    return (
        isinstance(value, ast.BinOp)
        and all(isinstance(n, ast.Name) for n in operands)
        and any(state.get(n.id, False) for n in operands)
    )


def _arithmetic_operands(expr: ast.expr, ops: tuple[type[ast.operator], ...]) -> list[ast.expr]:
    """What `expr` combines with the binary `ops` and unary `+`/`-`, number literals left out:
    `1.0 - a * b` -> [a, b] (in no particular order)."""
    operands: list[ast.expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ops):
            stack += [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            stack.append(node.operand)
        elif not (isinstance(node, ast.Constant) and type(node.value) in (int, float)):
            operands.append(node)
    return operands


def tensor_attributes(cls: ast.ClassDef, imports: ImportTable) -> frozenset[str]:
    """Attributes a class sets only to tensors built by torch (or None) and to nothing else:
    `self.timesteps = torch.from_numpy(t)`, `self.register_buffer("mask", torch.ones(n))`, a local
    the method built with torch (`sigmas = torch.from_numpy(s)` then `self.sigmas = sigmas.to(d)`),
    or a cast of another such attribute (`self.sigmas = self.sigmas.to("cpu")`). One assignment of
    anything else (a number, a list, an unknown call) and the attribute is left unknown."""
    # attribute -> how each assignment sets it: "made" (a built tensor), "none", "attr:Y" (a cast
    # of self.Y), ("local", statement, method) (a cast of a local name), or None (anything else)
    sources: dict[str, list] = defaultdict(list)
    for top in cls.body:
        method = top if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        # the names the method assigns (a parameter it never rebinds is no local tensor)
        stored = stored_names(top)
        pending: list[tuple[list, int, ast.Assign]] = []
        # Each attribute's list of kinds is read as a whole (any, all, None in it): the order of
        # its entries does not matter, so assignments and calls are read group by group.
        for node in of_types(top, ast.Assign, ast.AnnAssign, ast.AugAssign):
            kind = type(node)
            targets = node.targets if kind is ast.Assign else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "data" and _self_attr(target.value):
                    continue  # `self.X.data = ...` swaps a tensor's data: X stays a tensor
                stored_into = _item_store_base(target)
                for t in walk(target):
                    if _self_attr(t) is None:
                        continue
                    kinds = sources[t.attr]
                    if t is target and kind is ast.AugAssign:
                        continue  # `self.X += 1`: an in-place op keeps a tensor a tensor
                    if t is stored_into:
                        continue  # `self.X[idx] = 0`: an item store into X keeps a tensor a tensor
                    # Unpacking: the value is not the attribute's own.
                    if t is not target or node.value is None:
                        kinds.append(None)
                        continue
                    value = node.value
                    base = _cast_base(value)
                    if _is_none(value):
                        kinds.append("none")
                    elif _makes_tensor(value, imports):
                        kinds.append("made")
                    elif _self_attr(base) is not None:
                        kinds.append("attr:" + _self_attr(base))
                    elif (operand := _number_arithmetic_of(value)) is not None:
                        kinds.append("attr:" + operand)
                    elif isinstance(base, ast.Name) and method is not None and kind is ast.Assign:
                        kinds.append(None)  # resolved below, once the method's stores are known
                        pending.append((kinds, len(kinds) - 1, node))
                    else:
                        kinds.append(None)
        for node in of_types(top, ast.Call):
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_buffer"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                value = node.args[1] if len(node.args) > 1 else None
                if value is not None and _is_none(value):
                    sources[node.args[0].value].append("none")  # an optional buffer, off
                else:
                    made = value is not None and _makes_tensor(value, imports)
                    sources[node.args[0].value].append("made" if made else None)
        states: dict[int, dict] | None = None
        for kinds, index, node in pending:
            if _cast_base(node.value).id not in stored:
                continue
            if states is None:
                states = {}
                _local_tensors(method.body, imports, {}, states)
            if states.get(id(node), {}).get(_cast_base(node.value).id, False):
                kinds[index] = "made"
    candidates = {n for n, kinds in sources.items() if None not in kinds}
    while True:
        # A tensor is built somewhere: "made", or computed from another attribute that is one
        # (`self.alphas = 1.0 - self.betas`); one computed from an attribute that is not a
        # tensor is not one either.
        tensors: set[str] = set()
        grown = True
        while grown:
            grown = False
            for name in sorted(candidates - tensors):
                if any(k == "made" or (k.startswith("attr:") and k[5:] in tensors) for k in sources[name]):
                    tensors.add(name)
                    grown = True
        kept = {n for n in tensors if all(not k.startswith("attr:") or k[5:] in tensors for k in sources[n])}
        if kept == candidates:
            return frozenset(kept)
        candidates = kept


def _item_store_base(target: ast.expr) -> ast.expr | None:
    """`self.X` of an item store `self.X[i] = v` (or `self.X[i][j] = v`): the store changes X's
    items in place and says nothing of what X is."""
    if not isinstance(target, ast.Subscript):
        return None
    base = target.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return base if _self_attr(base) is not None else None


def _number_arithmetic_of(value: ast.expr) -> str | None:
    """The attribute X of `1.0 - self.X`, `-self.X`, `self.X * 2` (arithmetic of one attribute and
    number literals, a tensor exactly when X is one), else None."""
    operands = _arithmetic_operands(value, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow))
    if len(operands) != 1 or _self_attr(value) is not None:
        return None
    return _self_attr(operands[0])


def _is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


Callees = dict[tuple[str | None, str], FunctionNode]
# callee node (by id) -> parameter -> the kinds its callers passed
Passed = dict[int, dict[str, list[str]]]


# class node id -> (methods, tensor attributes, host option attributes)
ClassFacts = dict[int, tuple[frozenset[str], frozenset[str], frozenset[str]]]


def _class_facts(cls: ast.ClassDef | None, imports: ImportTable, known: ClassFacts) -> tuple:
    """What every method of a class shares: its method names and its tensor attributes, once per class."""
    if cls is None:
        return frozenset(), frozenset(), frozenset()
    if id(cls) not in known:
        # Once per file's analysis (a pool worker keeps it for a later round's flows too).
        known[id(cls)] = made_once("class facts", cls, lambda c: _facts_of(c, imports))
    return known[id(cls)]


def _facts_of(
    cls: ast.ClassDef, imports: ImportTable
) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    methods = frozenset(s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return methods, tensor_attributes(cls, imports), option_attributes(cls)


def option_attributes(cls: ast.ClassDef) -> frozenset[str]:
    """Attributes a class stores only number, bool or string options in: literals, and parameters
    of the storing method that default to one and are never rebound there (`self.domain = domain`
    with `domain=2`). A tensor test on one (`torch.is_tensor(self.domain)`) finds a tensor only for
    a caller who passes one where the signature offers a number; none in the tree is assumed to,
    as for a parameter's own default (`parameter_kinds`). Any other store, and the attribute is out."""
    sources: dict[str, bool] = {}
    for top in cls.body:
        if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        options = _option_parameters(top)
        # the names the method rebinds, and what it stores in attributes (judged after); an
        # attribute's verdict is an `and` over its stores, so their order does not matter
        rebound = stored_names(top)
        stores: list[tuple[str, ast.expr | None]] = []
        for node in of_types(top, ast.Assign, ast.AnnAssign, ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in walk(target):
                    if (attr := _self_attr(t)) is not None:
                        stores.append((attr, node.value if t is target else None))
        for node in of_types(top, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.args:
                if node.func.attr in ("register_buffer", "register_parameter", "__setattr__") or (
                    isinstance(node.func.value, ast.Name) and node.func.attr == "setattr"
                ):
                    name = node.args[0]
                    if isinstance(name, ast.Constant) and isinstance(name.value, str):
                        sources[name.value] = False
            elif isinstance(node.func, ast.Name) and node.func.id == "setattr":
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    sources[str(node.args[1].value)] = False
        for attr, value in stores:
            option = value is not None and (
                _literal(value)
                or (isinstance(value, ast.Name) and value.id in options and value.id not in rebound)
            )
            sources[attr] = sources.get(attr, True) and option
    return frozenset(name for name, option in sources.items() if option)


@dataclass
class HelperReturns:
    """What an in-scope helper of the file returns, where the helper itself decides it, worked out
    on first use from the helper's own flow, once per helper. Its parameters count as unknown: a
    helper's result is known only when it does not depend on what the caller passed.

    - a numpy number (`NUMPY`): reformer's `lcm = _get_least_common_mult_chunk_len(config)`
      followed by `if length % lcm != 0`;
    - a tensor, when some `return` hands back one the helper built or read from its object's
      tensor state: a scheduler's `prev_t = self.previous_timestep(t)`, which returns
      `self.timesteps[index + 1]` or `torch.tensor(-1)` (or a number on another path: kinds merge
      by union, so a value that may be a tensor is one).

    Helpers that call no numpy or torch function and read no tensor attribute are not walked."""

    functions: dict[tuple[str | None, str], ModelFunction]
    imports: ImportTable
    classes: ClassFacts
    known: dict[int, str | None] = field(default_factory=dict)
    tuples: dict[int, tuple[str | None, ...] | None] = field(default_factory=dict)
    hosts: dict[int, tuple[str | None, ...] | None] = field(default_factory=dict)

    def kind(self, key: tuple[str | None, str]) -> str | None:
        return self._once(self.known, key, self._returns)

    @cached_property
    def _classes(self) -> dict[str, ast.ClassDef]:
        return {fn.cls.name: fn.cls for fn in self.functions.values() if fn.cls is not None}

    def owner(self, cls: ast.ClassDef, attr: str) -> str | None:
        """The nearest base class of `cls` in the file (among the classes with in-scope functions)
        that defines the method `attr`, searched breadth-first along the bases; None if none does."""
        seen: set[str] = set()
        todo = list(cls.bases)
        while todo:
            base = todo.pop(0)
            name = base.id if isinstance(base, ast.Name) else None
            found = self._classes.get(name) if name is not None and name not in seen else None
            if found is None:
                continue
            seen.add(name)
            if any(
                isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == attr for s in found.body
            ):
                return name
            todo += found.bases
        return None

    def compile_return(self, key: tuple[str | None, str]) -> object:
        """The constant an in-scope helper returns while dynamo traces, or `_UNKNOWN`: walking its
        body in order, the first statement that surely returns is `return <constant>` (an `if` whose
        test is True while tracing, `if torch.jit.is_tracing() or is_compiling(): return False`, or a
        plain `return False`), and no statement before it may return (branches dynamo never takes
        left out). kornia's `_can_stop_cascade(image)` is False under compile."""
        fn = self.functions.get(key)
        if fn is None:
            return _UNKNOWN
        return made_once("compile_return", fn.node, _compile_return)

    def elements(self, key: tuple[str | None, str]) -> tuple[str | None, ...] | None:
        """The kinds, per position, of the tuple every `return` of the helper builds
        (`return batch, data["x"], edge_src`): a tensor where some return puts one there, known from
        the helper's own code and its parameters' annotations (`data: Dict[str, torch.Tensor]`),
        never from its callers. None when a return is anything else or the lengths differ."""
        return self._once(self.tuples, key, self._elements)

    def _once(self, cache: dict, key: tuple[str | None, str], compute):
        """compute(helper), worked out once per helper; None for an unknown helper."""
        fn = self.functions.get(key)
        if fn is None:
            return None
        if id(fn.node) not in cache:
            cache[id(fn.node)] = None  # a recursive call sees "unknown"
            cache[id(fn.node)] = compute(fn)
        return cache[id(fn.node)]

    def host_elements(self, key: tuple[str | None, str]) -> tuple[str | None, ...] | None:
        """Per position of the tuple every `return` of the helper builds, SCALAR where each return puts
        a host value there by its form alone: a size read (`out.size(0)`, `x.dim()`, `x.numel()`) or a
        tensor's metadata (`out.device`, `x.dtype`, `x.shape`), whatever the receiver; None elsewhere."""
        return self._once(self.hosts, key, self._host_elements)

    def _host_elements(self, fn: ModelFunction) -> tuple[str | None, ...] | None:
        returns = [n for n in live_nodes(fn.node) if isinstance(n, ast.Return)]
        if not returns or not all(isinstance(r.value, ast.Tuple) for r in returns):
            return None
        if len({len(r.value.elts) for r in returns}) != 1:
            return None
        # what each name is bound to; a binding other than `name = value` (unpacked, augmented, a loop
        # target) is the target itself, which is no host form
        assigned: dict[str, list[ast.AST]] = defaultdict(list)
        plain = set()
        for node in walk(fn.node):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned[target.id].append(node.value)
                        plain.add(id(target))
        for node in walk(fn.node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in plain:
                assigned[node.id].append(node)

        def host(expr: ast.expr, seen: frozenset[str] = frozenset()) -> bool:
            if isinstance(expr, ast.Name):
                values = assigned.get(expr.id) if expr.id not in seen else None
                return bool(values) and all(host(v, seen | {expr.id}) for v in values)
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
                return expr.func.attr in SIZE_READS
            return isinstance(expr, ast.Attribute) and expr.attr in _METADATA

        columns = zip(*(r.value.elts for r in returns), strict=True)
        kinds = tuple(SCALAR if all(host(e) for e in column) else None for column in columns)
        return kinds if any(kinds) else None

    def _elements(self, fn: ModelFunction) -> tuple[str | None, ...] | None:
        returns = [n for n in live_nodes(fn.node) if isinstance(n, ast.Return)]
        if not returns or not all(isinstance(r.value, ast.Tuple) for r in returns):
            return None
        lengths = {len(r.value.elts) for r in returns}
        if len(lengths) != 1 or any(isinstance(e, ast.Starred) for r in returns for e in r.value.elts):
            return None
        flow = self._flow(fn)
        args = fn.node.args
        env = {
            a.arg: kind
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
            if a.annotation is not None and (kind := annotation_kind(a.annotation)) is not None
        }
        flow.block(fn.node.body, env, True)
        kinds: list[str | None] = [None] * lengths.pop()
        for site in flow.of(ast.Return):
            for index, element in enumerate(site.node.value.elts):
                if flow.kind(element, site.env) in TENSORS:
                    kinds[index] = TENSOR
        return tuple(kinds) if any(kinds) else None

    def _flow(self, fn: ModelFunction) -> FunctionFlow:
        """A flow of the helper `fn` with its class's facts, to walk with an environment."""
        methods, tensor_attrs, host_attrs = _class_facts(fn.cls, self.imports, self.classes)
        return FunctionFlow(
            fn=fn,
            imports=self.imports,
            methods=methods,
            tensor_attrs=tensor_attrs,
            host_attrs=host_attrs,
            helpers=self,
        )

    def _returns(self, fn: ModelFunction) -> str | None:
        tensor_attrs = _class_facts(fn.cls, self.imports, self.classes)[1]
        if not _may_return_built(fn.node, self.imports, tensor_attrs):
            return None
        flow = self._flow(fn)
        flow.block(fn.node.body, {}, True)
        kinds = {flow.kind(site.node.value, site.env) for site in flow.of(ast.Return)}
        if NUMPY in kinds:
            return NUMPY
        if kinds & TENSORS:
            return BOOL if kinds & TENSORS == {BOOL} else TENSOR
        return None


# The functions FL106's unbacked-size fix defines in a file (`fuselint.source.unbacked_ops`): custom
# ops whose bodies the scope leaves out (dynamo never traces them), so what they return is known here.
FIX_OPS = "_fuselint_"


def fix_op_kind(name: str) -> str:
    """A tensor, or a tuple of them: the as-tuple nonzero and a `unique` with inverse or counts."""
    several = name.endswith("_nonzero_tuple") or (
        "_unique" in name and ("_inverse" in name or "_counts" in name)
    )
    return TUPLE if several else TENSOR


def _may_return_built(fn: FunctionNode, imports: ImportTable, tensor_attrs: frozenset[str]) -> bool:
    """Whether a helper calls numpy or torch or reads a tensor attribute, and returns a value:
    only then can its result be a number or tensor of its own making."""
    if not any(isinstance(n, ast.Return) and n.value is not None for n in walk(fn)):
        return False
    for node in walk(fn):
        if isinstance(node, ast.Call):
            qual = imports.qualname(node.func) or ""
            if qual.startswith(("numpy.", "torch.")):
                return True
        elif isinstance(node, ast.Attribute) and node.attr in tensor_attrs and _self_attr(node):
            return True
    return False


def _number_annotation(annotation: ast.expr) -> bool:
    """`int`, `float`, `int | torch.Tensor`, `Union[float, torch.FloatTensor]`: a number, perhaps a tensor."""
    parts: list[ast.expr] = []
    stack = [annotation]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            stack += [node.left, node.right]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).rsplit(".", 1)[-1] == "Union":
            stack += node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        else:
            parts.append(node)
    names = [ast.unparse(p).rsplit(".", 1)[-1] for p in parts]
    return any(n in _NUMBER_TYPES for n in names) and all(n in _NUMBER_TYPES | _TENSOR_TYPES for n in names)


def entry_numbers(
    fn: FunctionNode, tensor_attrs: frozenset[str], cls: ast.ClassDef | None = None
) -> list[str]:
    """Parameters of a configured entry (`traced-functions`: compiled by code outside the tree)
    that are annotated as numbers but may hold 0-d tensors: annotations are hints, and nothing in the tree
    shows what the caller passes. A required number parameter (`timestep: int`,
    `timestep: int | torch.Tensor`) counts when the body uses it as a key into the object's own
    tensor state: `self.alphas_cumprod[t]` or `self.timesteps == t` (directly or through
    `t = timestep`), or hands it to a method of its class (by position or keyword) that does
    so with the parameter it lands in (PNDM's `step` -> `step_plms(timestep=timestep)` ->
    `_get_prev_sample(sample, timestep, ...)`). Such a value is a position in, or an element of, a schedule tensor, and a
    caller that takes it from one (`for t in scheduler.timesteps: scheduler.step(out, t, x)`)
    hands dynamo a tensor: `if t > 0` then breaks the graph where an int would not. A parameter
    with a default is a host option, as everywhere else; an annotation that admits a tensor is
    not evidence on its own (diffusers' `EntropyBoundScheduler.step(timestep: int | torch.Tensor)`
    gets a `range` index from its pipeline)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    required = positional[: len(positional) - len(args.defaults)]
    required += [a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=False) if d is None]
    candidates = [a.arg for a in required if a.annotation is not None and _number_annotation(a.annotation)]
    if not candidates:
        return []
    methods = {
        s.name: s
        for s in (cls.body if cls is not None else ())
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    return sorted(_keys_into_state(fn, candidates, tensor_attrs, methods, frozenset({id(fn)})))


def _keys_into_state(
    fn: FunctionNode,
    names: list[str],
    tensor_attrs: frozenset[str],
    methods: dict[str, FunctionNode],
    seen: frozenset[int],
) -> set[str]:
    """Which of `names` (parameters of `fn`) the body uses as a key into the object's tensor
    state, itself or through a method of the class it hands them to (see `entry_numbers`)."""
    aliases = {name: {name} for name in names}
    for node in walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for group in aliases.values():
                if node.value.id in group:
                    group.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def owners(expr: ast.expr) -> set[str]:
        if not isinstance(expr, ast.Name):
            return set()
        return {name for name, group in aliases.items() if expr.id in group}

    def state(expr: ast.expr) -> bool:
        return _self_attr(expr) in tensor_attrs

    keyed: set[str] = set()
    for node in walk(fn):
        used: list[ast.expr] = []
        if isinstance(node, ast.Subscript) and state(node.value):
            used = [node.slice]
        elif isinstance(node, ast.Compare) and any(state(o) for o in (node.left, *node.comparators)):
            used = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and _self_attr(node.func) in methods:
            callee = methods[_self_attr(node.func)]
            if id(callee) in seen:
                continue
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in callee.decorator_list)
            params = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)][0 if static else 1 :]
            handed: dict[str, set[str]] = defaultdict(set)
            for param, arg in zip(params, node.args, strict=False):
                if isinstance(arg, ast.Starred):
                    break
                handed[param] |= owners(arg)
            for keyword in node.keywords:
                if keyword.arg is not None:
                    handed[keyword.arg] |= owners(keyword.value)
            handed = {p: ours for p, ours in handed.items() if ours}
            if handed:
                inner = _keys_into_state(callee, sorted(handed), tensor_attrs, methods, seen | {id(callee)})
                keyed.update(ours for p in inner for ours in handed[p])
        for expr in used:
            keyed |= owners(expr)
    return keyed


def analyze(
    fn: ModelFunction,
    imports: ImportTable,
    callees: Callees | None = None,
    passed: Passed | None = None,
    classes: ClassFacts | None = None,
    helpers: HelperReturns | None = None,
    defaulted: dict[int, dict[str, object]] | None = None,
) -> FunctionFlow:
    """The flow of one model function.

    `passed` holds, per callee node (by id), the kinds its callers gave each parameter; with
    `callees` (the in-scope functions by (class, name)), this function's calls add to it.
    `classes` shares the facts of a class between the flows of its methods.
    """
    passed = {} if passed is None else passed
    methods, tensor_attrs, host_attrs = _class_facts(fn.cls, imports, {} if classes is None else classes)
    flow = FunctionFlow(
        fn=fn,
        imports=imports,
        methods=methods,
        tensor_attrs=tensor_attrs,
        host_attrs=host_attrs,
        helpers=helpers,
    )
    given = passed.get(id(fn.node)) if fn.reason == "called" else None
    if fn.reason == "reached":  # callers in other files, and any in this file
        given = {name: list(kinds) for name, kinds in fn.given}
        for name, kinds in passed.get(id(fn.node), {}).items():
            given.setdefault(name, []).extend(kinds)
    aliases = dict(fn.aliases)
    env = parameter_kinds(fn.node, given, flow.guessed, fn.cls, aliases)
    flow.unions = union_parameters(fn.node, aliases)
    if fn.reason == "called" and given is None:
        _no_guesses(env, flow.guessed)
    flow.iterated = iterated_parameters(fn, tensor_attrs)
    for name in sorted(flow.iterated):
        if env.get(name) not in TENSORS:
            env[name] = TENSOR
            flow.guessed.discard(name)
    if fn.reason in ("called", "reached") and defaulted:
        left = defaulted.get(id(fn.node), {})
        flow.constants = {name: value for name, value in left.items() if flow.assigned.get(name) == 1}
    if fn.reason == "configured":  # compiled elsewhere: its callers are not in the tree
        env.update(dict.fromkeys(entry_numbers(fn.node, tensor_attrs, fn.cls), TENSOR))
    flow.block(fn.node.body, env, True)
    if callees:
        _record_calls(flow, callees, passed)
    return flow


def union_parameters(fn: FunctionNode, aliases: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """The parameters annotated with a union that holds a tensor type, written out or through one
    of the file's type `aliases`: name -> the last names of the union's types."""
    found = {}
    args = fn.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.annotation is None:
            continue
        members = union_members(resolved(arg.annotation, aliases))
        if members is not None and members & (_TENSOR_TYPES | {"Parameter"}):
            found[arg.arg] = members
    return found


def _no_guesses(env: Env, guessed: set[str]) -> None:
    """A helper in scope with no call seen: it is handed to a call (`functools.partial(f, ...)`,
    `map(f, xs)`, a callback, `fuselint.source.scope`), which passes what it likes (pyro's
    `partial(_config_fn, ...)` gets a site dict). A parameter is a tensor only by its annotation."""
    for name in sorted(guessed):
        env.pop(name, None)
    guessed.clear()


def iterated_parameters(fn: ModelFunction, tensor_attrs: frozenset[str]) -> frozenset[str]:
    """The parameters a caller hands an element it iterates from this object's attribute
    (`fn.elements`, from reach), where the function's own class sets that attribute only to
    tensors: `for t in self.scheduler.timesteps: self.scheduler.step(out, t, x)` makes `step`'s
    `timestep` a 0-d tensor the caller's graph computes (an element of `self.timesteps`, which
    `set_timesteps` sets from `torch.from_numpy`). The caller's file cannot know what
    `timesteps` holds; the callee's class decides: a list of ints hands ints."""
    return frozenset(name for name, attr, _caller in fn.elements if attr in tensor_attrs)


def _record_calls(flow: FunctionFlow, callees: Callees, passed: Passed) -> None:
    """Note for each same-file callee the kinds of the arguments this flow passes it."""
    cls = flow.fn.cls.name if flow.fn.cls is not None else None
    for site in flow.of(ast.Call):
        func = site.node.func
        skip = 0
        if isinstance(func, ast.Name):
            callee = callees.get((None, func.id))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            callee = callees.get((cls, func.attr))
            static = callee is not None and any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in callee.decorator_list
            )
            skip = 0 if static else 1
        else:
            continue
        if callee is None:
            continue
        given = passed.setdefault(id(callee), {})
        params = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)][skip:]
        for name, arg in zip(params, site.node.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            given.setdefault(name, []).append(argument_kind(flow, arg, site.env))
        for keyword in site.node.keywords:
            if keyword.arg is not None:
                given.setdefault(keyword.arg, []).append(argument_kind(flow, keyword.value, site.env))


def argument_kind(flow: FunctionFlow, arg: ast.expr, env: Env) -> str | None:
    """The kind a call hands over for `arg`: `guess` for a parameter taken for a tensor on its
    name alone and never rebound (`forward(self, x, length)` passing `length`)."""
    kind = flow.kind(arg, env)
    if (
        kind == TENSOR
        and isinstance(arg, ast.Name)
        and arg.id in flow.guessed
        and flow.assigned.get(arg.id) == 1
    ):
        return GUESS
    return kind


def flows(functions: list[ModelFunction], imports: ImportTable) -> list[FunctionFlow]:
    """The flows of a file's model functions, callers before callees so that arguments' kinds reach helpers.

    Each rule of a file gets the same `functions` list from the linter: the flows are made on the
    first request and kept for the file's analysis (`nodes.remembered_walks`), so no state is
    written onto the (shared) AST nodes and nothing outlives the file.
    """
    # By the list's id, kept beside its flows (so it lives as long as its id is a key); all under
    # one key, which a worker keeping the file's memo for a later round drops (`lint._KeptFiles`).
    made = made_once("flows", None, lambda _: {})
    found = made.get(id(functions))
    if found is None:
        found = made[id(functions)] = (functions, _flows(functions, imports))
    return found[1]


def _flows(functions: list[ModelFunction], imports: ImportTable) -> list[FunctionFlow]:
    callees: Callees = {}
    for fn in functions:
        callees[(fn.cls.name if fn.cls is not None else None, fn.node.name)] = fn.node
    passed: Passed = {}
    classes: ClassFacts = {}
    by_key = {(fn.cls.name if fn.cls is not None else None, fn.node.name): fn for fn in functions}
    helpers = HelperReturns(by_key, imports, classes)
    done: dict[int, FunctionFlow] = {}
    for fn in functions:
        if fn.reason != "called" and not fn.left:
            done[id(fn)] = analyze(fn, imports, callees, passed, classes, helpers)
    pending = [fn for fn in functions if fn.reason == "called" or fn.left]
    defaulted = defaulted_parameters(functions) if pending else {}
    while pending:
        ready = next((fn for fn in pending if id(fn.node) in passed), pending[0])
        done[id(ready)] = analyze(ready, imports, callees, passed, classes, helpers, defaulted)
        pending.remove(ready)
    return [done[id(fn)] for fn in functions]


_UNKNOWN = object()


def defaulted_parameters(functions: list[ModelFunction]) -> dict[int, dict[str, object]]:
    """Per helper called in the file (by node id): the parameters that every call of it from an
    in-scope function leaves at, or passes as, one constant (`copy=False`, `meta=None`).

    An argument is a constant when it is a literal `True`/`False`/`None`, or a parameter of the
    calling helper that is itself such a constant (`items(copy_state=False)` handing
    `copy_state` on), found by repeating until nothing changes. `*args`/`**kwargs`, or the helper
    handed on uncalled (`map(self.f, xs)`), may pass anything. Calls are matched as the scope follows them: `f(...)` and, in class C, `self.m(...)`.
    Callers in other files are not seen: only helpers that this file's entries reach (reason
    "called") are asked about.
    """
    helpers = {
        (fn.cls.name if fn.cls is not None else None, fn.node.name): fn.node
        for fn in functions
        if fn.reason == "called" or fn.left
    }
    # What the calls from other files leave at a default (a root of `fuselint.source.reach`).
    outside = {id(fn.node): dict(fn.left) for fn in functions if fn.left}
    calls: list[tuple[FunctionNode, ast.Call, FunctionNode]] = []
    handed: set[int] = set()
    for fn in functions:
        nodes = list(live_nodes(fn.node))
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        cls = fn.cls.name if fn.cls is not None else None
        for node in nodes:
            key = _helper_key(node, cls)
            if key in helpers and isinstance(node.ctx, ast.Load) and id(node) not in called:
                handed.add(id(helpers[key]))
        for call in (n for n in nodes if isinstance(n, ast.Call)):
            key = _helper_key(call.func, cls)
            if key in helpers:
                calls.append((fn.node, call, helpers[key]))
    known: dict[int, dict[str, object]] = {}
    for _round in range(6):
        found = {
            id(node): _left_constant(node, calls, known, outside.get(id(node)))
            for node in helpers.values()
            if id(node) not in handed
        }
        found = {key: value for key, value in found.items() if value}
        if found == known:
            break
        known = found
    return known


def _compile_return(fn: FunctionNode) -> object:
    """See `HelperReturns.compile_return`."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Return):
            value = stmt.value
            return value.value if isinstance(value, ast.Constant) else _UNKNOWN
        if isinstance(stmt, ast.If):
            truth = compile_truth(stmt.test)
            if truth is False:
                live = stmt.orelse
            elif truth is True:
                first = stmt.body[0]
                if isinstance(first, ast.Return) and isinstance(first.value, ast.Constant):
                    return first.value.value
                return _UNKNOWN
            else:
                live = [*stmt.body, *stmt.orelse]
            if any(isinstance(n, ast.Return) for s in live for n in walk(s)):
                return _UNKNOWN
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for n in walk(stmt)):
            return _UNKNOWN
    return _UNKNOWN


_EMPTY_CALLS = frozenset({"tuple", "list", "set", "frozenset", "dict"})


def _empty_literal(expr: ast.expr) -> bool:
    """`()`, `[]`, `{}`, `set()`, `frozenset()`: an empty collection."""
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return not expr.elts
    if isinstance(expr, ast.Dict):
        return not expr.keys
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in _EMPTY_CALLS
        and not expr.args
        and not expr.keywords
    )


def _helper_key(node: ast.AST, cls: str | None) -> tuple[str | None, str] | None:
    """`f` -> (None, "f"); `self.m` inside class C -> ("C", "m"), as the scope follows calls."""
    if isinstance(node, ast.Name):
        return (None, node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return (cls, node.attr)
    return None


def _left_constant(
    helper: FunctionNode,
    calls: list,
    known: dict[int, dict[str, object]],
    outside: dict[str, object] | None = None,
) -> dict[str, object]:
    """The parameters of `helper` that every call in `calls` leaves at, or passes as, one constant;
    for a function that calls from other files reach, `outside` holds what those leave at a default."""
    args = helper.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, object] = {}
    pairs = [
        *zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    for a, d in pairs:
        defaults[a.arg] = d.value if isinstance(d, ast.Constant) else _UNKNOWN
    values: dict[str, object] = dict(outside or {})
    seen = outside is not None
    if outside is not None:  # a parameter the other files' calls pass is open
        for name in [a.arg for a in positional] + [a.arg for a in args.kwonlyargs]:
            values.setdefault(name, _UNKNOWN)
    for caller, call, callee in calls:
        if callee is not helper:
            continue
        seen = True
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return {}
        names = [a.arg for a in positional]
        if isinstance(call.func, ast.Attribute) and names and names[0] in ("self", "cls"):
            names = names[1:]
        given = dict(zip(names, call.args, strict=False))
        given.update((k.arg, k.value) for k in call.keywords)
        for name in names + [a.arg for a in args.kwonlyargs]:
            if name in given:
                value = _argument_constant(given[name], caller, known)
            else:
                value = defaults.get(name, _UNKNOWN)
            if value is _UNKNOWN or not isinstance(value, (bool, type(None))):
                values[name] = _UNKNOWN
            elif values.setdefault(name, value) is not value:
                values[name] = _UNKNOWN
    if not seen:
        return {}
    return {name: value for name, value in values.items() if value is not _UNKNOWN}


def _argument_constant(arg: ast.expr, caller: FunctionNode, known: dict[int, dict[str, object]]) -> object:
    if isinstance(arg, ast.Constant):
        return arg.value
    if isinstance(arg, ast.Name) and arg.id in known.get(id(caller), {}):
        stores = sum(
            1
            for n in walk(caller)
            if (isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Store))
            or (isinstance(n, ast.arg) and n.arg == arg.id)
        )
        if stores == 1:
            return known[id(caller)][arg.id]
    return _UNKNOWN


def describe(node: ast.AST, limit: int = 60) -> str:
    """Short source text of a node for messages."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
