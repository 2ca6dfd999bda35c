"""FL101: a tensor's value copied to the host inside code that torch.compile traces.

`.item()`, `.tolist()`, `.numpy()`, `int(t)`/`float(t)`/`bool(t)`, numpy functions applied
to a tensor, a tensor used as a slice bound or as a size, a 0-d tensor computed in the graph
used as an index (`a[x.argmax()]`, `a[i + 1]`) (an implicit `.item()`): each
needs the number on the CPU, so the GPU must finish first and dynamo must stop the graph
(or, with capture_scalar_outputs, guard on an unbacked symbol). Everything downstream of
the value becomes Python, and the kernels on either side cannot fuse.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks import check
from fuselint.source.checks._shared import atom, finding, has_comment, one_row_read, torch_name
from fuselint.source.checks.control_flow import only_guessed, value_dependent
from fuselint.source.dataflow import BOOL, Env, FunctionFlow, Site, describe, flows, traced_numpy
from fuselint.source.export_reads import export_reads
from fuselint.source.item_asserts import item_assert
from fuselint.source.module import SourceFile
from fuselint.source.nodes import parent_map, walk
from fuselint.source.numpy_numbers import numpy_on_numbers, numpy_sum_as_size
from fuselint.source.paths import EXPORT
from fuselint.source.scope import ModelFunction
from fuselint.source.size_displays import host_made, size_parts
from fuselint.source.tensor_checks import tensor_check_fix
from fuselint.source.wrapped_numbers import wrapped_numbers

_SYNC_METHODS = {"item": "`.item()`", "tolist": "`.tolist()`", "numpy": "`.numpy()`"}
_CONVERTERS = frozenset({"int", "float", "bool", "complex", "range"})
# Factories and methods whose positional arguments are sizes: a tensor there is read on the host.
_SIZE_FUNCTIONS = frozenset(
    {"torch.arange", "torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn", "torch.full"}
)
_SIZE_METHODS = frozenset(
    {"new_zeros", "new_ones", "new_empty", "new_full", "view", "reshape", "expand", "repeat"}
)
# Functions that take an output size (`size=(h, w)`, or their second positional argument).
_SIZE_KEYWORD_FUNCTIONS = frozenset(
    {"torch.nn.functional.interpolate", "torch.nn.functional.upsample", "torch.nn.functional.upsample_bilinear",
     "torch.nn.functional.upsample_nearest"}
)  # fmt: skip
# torch's tensor checks read their condition with `.item()` inside torch (gb0124, torch 2.13), whatever
# it is: `torch._assert_async(cond.all())` checks the same on the device without a break.
_TENSOR_CHECKS = frozenset({"torch._check_tensor_all", "torch._check_tensor_all_with"})
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


def _sync_method(site: Site, flow: FunctionFlow, sf: SourceFile) -> str | None:
    call = site.node
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _SYNC_METHODS or call.args:
        return None
    receiver = func.value
    qual = sf.imports.qualname(receiver.func) if isinstance(receiver, ast.Call) else None
    if qual and qual.startswith("numpy."):
        return None  # numpy's own arrays live on the host already
    if func.attr != "numpy" and not flow.is_tensorish(receiver, site.env):
        kind = flow.kind(receiver, site.env)
        if kind is not None or isinstance(receiver, (ast.Constant, ast.List, ast.Tuple, ast.Dict)):
            return None
        if isinstance(receiver, ast.Name) and receiver.id not in flow.assigned:
            return None  # a global or a closure: not something the forward computed
    return _SYNC_METHODS[func.attr]


def _sync_call(site: Site, flow: FunctionFlow, sf: SourceFile) -> str | None:
    """int(t), math.sqrt(t), np.array(t), torch.arange(t): the message, or None."""
    call = site.node
    func = call.func
    tensor_args = [a for a in call.args if flow.is_tensor(a, site.env)]
    if isinstance(func, ast.Name) and func.id in _CONVERTERS and func.id not in sf.imports.aliases:
        if tensor_args:
            return f"`{func.id}({describe(tensor_args[0], 30)})` reads a tensor on the host"
        return None
    qual = sf.imports.qualname(func)
    if qual in _TENSOR_CHECKS:
        return f"`{qual}` reads its condition on the host (gb0124)"
    if qual is not None:
        moved = [a for a in call.args if _is_cpu_copy(a)]
        if moved and not qual.startswith("torch."):
            return f"`.cpu()` result handed to `{qual}` on the host"
        # numpy math dynamo traces on tensors (`np.log(t)`, torch 2.13: no break) is no host read;
        # where its result is read on the host (`float(np.exp(t))`), that use is the finding
        if qual.startswith(("numpy.", "math.")) and tensor_args and not traced_numpy(qual):
            return f"`{qual.split('.')[0]}` function applied to tensor `{describe(tensor_args[0], 30)}`"
        if qual in _SIZE_FUNCTIONS or qual == "torch.randint":
            bad = [a for a in _factory_sizes(call, qual) if _read_size(a, flow, site.env)]
            if bad:
                return f"tensor `{describe(bad[0], 30)}` used as a size in `{qual}` is read on the host"
        if qual in _SIZE_KEYWORD_FUNCTIONS:
            bad = _tensor_sizes(call, flow, site)
            if bad is not None:
                name = qual.rsplit(".", 1)[-1]
                return f"tensor `{describe(bad, 30)}` used as `size` of `{name}` is read on the host"
        return None
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _SIZE_METHODS
        and flow.is_tensorish(func.value, site.env)
    ):
        sizes = call.args[:1] if func.attr == "new_full" else call.args
        single = len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List))
        sizes = size_parts(sizes) if single or func.attr.startswith("new_") else sizes
        # A size parameter taken for a tensor on its name alone (`x.view(bs, -1)`) is a Python int far
        # more often than not: a guess is not enough to call it a host read.
        bad = [
            a
            for a in sizes
            if _read_size(a, flow, site.env)
            and not isinstance(a, ast.Starred)
            and not (isinstance(a, ast.Name) and a.id in flow.guessed and flow.assigned.get(a.id) == 1)
        ]
        if func.attr in ("view", "reshape", "expand", "repeat") and len(call.args) == 1 and not single:
            return None  # x.view(other) may be a shape tuple or view-as-dtype; x.repeat(t) rare
        if bad:
            return f"tensor `{describe(bad[0], 30)}` used as a size in `.{func.attr}()` is read on the host"
    return None


def _factory_sizes(call: ast.Call, qual: str) -> list[ast.expr]:
    """The sizes a factory takes, one by one or in a display: `torch.zeros(2, n)`, `torch.zeros((2, n))`,
    `size=(2, n)`, `torch.randint(low, high, (2, n))` (its bounds are no sizes), `torch.arange`'s ends."""
    if qual == "torch.randint":  # randint(high, size) / randint(low, high, size) / randint(lo, hi, size=s)
        keyword = any(k.arg == "size" for k in call.keywords)
        sizes = call.args[-1:] if len(call.args) > 1 and not keyword else []
    else:
        sizes = call.args[:1] if qual == "torch.full" else list(call.args)
    if qual == "torch.arange":
        sizes = [*sizes, *(k.value for k in call.keywords if k.arg in ("start", "end", "step"))]
    return size_parts([*sizes, *(k.value for k in call.keywords if k.arg == "size")])


def _read_size(size: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """A tensor as a size, which dynamo reads on the host; not one that torch arithmetic made of
    Python numbers (`torch.div(seq_len, w, rounding_mode="trunc") - 1`), whose value it knows."""
    return flow.is_tensor(size, env) and not host_made(size, flow, env)


def _tensor_sizes(call: ast.Call, flow: FunctionFlow, site: Site) -> ast.expr | None:
    """A tensor in `size=` (`F.interpolate(x, size=(h, w))` with `h, w = size_t[0], size_t[1]`):
    dynamo reads its value to size the output ("Data dependent operator", gb0033)."""
    size = next(
        (k.value for k in call.keywords if k.arg == "size"), call.args[1] if len(call.args) > 1 else None
    )
    if size is None:
        return None
    parts = size.elts if isinstance(size, (ast.Tuple, ast.List)) else [size]
    for part in parts:
        if not isinstance(part, ast.Starred) and _surely_tensor(part, flow, site.env, 0):
            return part
    return None


def _surely_tensor(expr: ast.expr, flow: FunctionFlow, env, depth: int) -> bool:
    """A tensor for sure, not by a guess: a parameter counts only when annotated as a tensor (a
    `size` parameter is a tuple far more often), arithmetic only when an operand is surely one
    (`n // width` with `width` unpacked from a submodule's result may be all ints), and a name
    bound by `=` by every value it is bound to."""
    if not flow.is_tensor(expr, env):
        return False
    if isinstance(expr, ast.BinOp):
        return any(_surely_tensor(side, flow, env, depth) for side in (expr.left, expr.right))
    if not isinstance(expr, ast.Name):
        return True
    args = flow.fn.node.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg == expr.id:
            return arg.annotation is not None and "Tensor" in ast.unparse(arg.annotation)
    if depth > 3:
        return True
    values = [
        node.value
        for node in walk(flow.fn.node)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == expr.id
    ]
    return all(_surely_tensor(value, flow, env, depth + 1) for value in values)


# Reductions that give a 0-d tensor when called without a dim.
_REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "amax",
        "amin",
        "norm",
        "std",
        "var",
        "count_nonzero",
    }
)
_TORCH_REDUCTIONS = frozenset(f"torch.{n}" for n in _REDUCTIONS)


def _single_values(flow: FunctionFlow) -> dict[str, list[ast.Assign]]:
    """The assignments of each name that only plain `name = value` statements bind in the function
    (`prev_t = self.timesteps[i]` in one branch, `prev_t = torch.tensor(0)` in the other); a
    parameter counts too, its own value standing before its first assignment."""
    args = flow.fn.node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    found: dict[str, list[ast.Assign]] = {}
    for s in flow.of(ast.Assign):
        if len(s.node.targets) == 1 and isinstance(s.node.targets[0], ast.Name):
            found.setdefault(s.node.targets[0].id, []).append(s.node)
    return {
        name: assigns
        for name, assigns in found.items()
        if flow.assigned.get(name) == len(assigns) + (name in params)
    }


def _values_at(
    name: ast.Name, flow: FunctionFlow, values: dict[str, list[ast.Assign]]
) -> list[ast.expr] | None:
    """The values `name` may hold where it is read: every assignment's, or for a parameter, those
    made before the read when one of them is unconditional (at the function's top level); None for
    a parameter read before any such assignment (its caller's value), or an unknown name."""
    args = flow.fn.node.args
    if name.id not in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
        assigns = values.get(name.id)
        return [a.value for a in assigns] if assigns else None
    before = [a for a in values.get(name.id, []) if a.lineno < name.lineno]
    if any(a in flow.fn.node.body for a in before):
        return [a.value for a in before]
    return None


# Casts and roundings that keep a 0-d tensor 0-d (`torch.floor(s * t).to(dtype=torch.long)`).
_CASTS = frozenset({"to", "long", "int", "short", "float", "double", "type"})
_ROUNDINGS = frozenset({"floor", "ceil", "round", "trunc", "abs", "neg", "clamp", "clip"})
_TORCH_ROUNDINGS = frozenset(f"torch.{n}" for n in _ROUNDINGS)


def _computed_scalar(
    expr: ast.expr,
    flow: FunctionFlow,
    env: dict,
    values: dict[str, list[ast.Assign]],
    handed: frozenset[str] = frozenset(),
    depth: int = 0,
) -> bool:
    """A 0-d tensor computed inside the graph: a reduction without a dim (`x.argmax()`), an
    element of a one-argument nonzero (`m.nonzero(as_tuple=True)[0][0]`), an element of the
    object's tensor state at a host index (`self.timesteps[i + 1]`), arithmetic on one with
    numbers (`i + 1`, `(1 - eta) * t`), a cast or rounding of one (`torch.floor(t).to(torch.long)`),
    or a name every assignment binds to such a value (or to a literal `torch.tensor(0)`).
    Checked with torch 2.13: indexing a tensor with any of these is a data-dependent read (gb0033,
    "Data dependent operator"), while a 0-d tensor the compiled function receives (`a[t]`) is not,
    nor a 1-d index (`a[idx + 1]`)."""
    if depth > 8:
        return False
    if isinstance(expr, ast.Name):
        found = _values_at(expr, flow, values)
        if found is None:
            return expr.id in handed  # a parameter a method of the class is handed a computed value in
        computed = [v for v in found if not _literal_tensor(v, flow)]
        return bool(computed) and all(
            _computed_scalar(v, flow, env, values, handed, depth + 1) for v in computed
        )
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _ARITHMETIC):
        sides = (expr.left, expr.right)
        return any(_computed_scalar(e, flow, env, values, handed, depth + 1) for e in sides) and all(
            _computed_scalar(e, flow, env, values, handed, depth + 1) or _number(e, flow, env) for e in sides
        )
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        qualname = flow.imports.qualname(expr.func)
        if qualname in _TORCH_ROUNDINGS:
            return bool(expr.args) and _computed_scalar(expr.args[0], flow, env, values, handed, depth + 1)
        if qualname in _TORCH_REDUCTIONS:
            # `torch.argmax(t)`: the function form of `t.argmax()`, one tensor and no dim
            return len(expr.args) == 1 and not expr.keywords and flow.is_tensorish(expr.args[0], env)
        receiver = expr.func.value
        if expr.func.attr in _CASTS or (expr.func.attr in _ROUNDINGS and not expr.args):
            return _computed_scalar(receiver, flow, env, values, handed, depth + 1)
        return (
            expr.func.attr in _REDUCTIONS
            and not expr.args
            and not expr.keywords
            and flow.is_tensorish(receiver, env)
        )
    if isinstance(expr, ast.Subscript) and depth > 0 and _state_element(expr, flow, env):
        return True
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Subscript):
        inner, call = expr.value, expr.value.value
        constant = all(
            isinstance(s.slice, ast.Constant) and isinstance(s.slice.value, int) for s in (expr, inner)
        )
        return constant and isinstance(call, ast.Call) and _one_dim_tuple(call)
    return False


def _hand_computed(file_flows: list[FunctionFlow]) -> dict[int, frozenset[str]]:
    """For each method, the parameters some `self.method(...)` call of another method of its class
    hands a computed 0-d tensor (PNDM's `step_prk`: `timestep = self.prk_timesteps[k]`, then
    `self._get_prev_sample(cur_sample, timestep, ...)`, which reads `self.alphas_cumprod[timestep]`)."""
    methods = {(id(f.fn.cls), f.fn.node.name): f for f in file_flows if f.fn.cls is not None}
    # Seeded with the parameters callers in other files hand an iterated element of the object's
    # tensor state (`FunctionFlow.iterated`); a method hands on what it was handed (`step` ->
    # `_get_variance`): repeated until nothing changes.
    handed: dict[int, set[str]] = {id(f.fn.node): set(f.iterated) for f in file_flows if f.iterated}
    values = {id(f): _single_values(f) for f in file_flows if f.fn.cls is not None}
    changed = True
    while changed:
        changed = False
        for flow in file_flows:
            if flow.fn.cls is not None:
                changed |= _hand_on(flow, values[id(flow)], methods, handed)
    return {key: frozenset(names) for key, names in handed.items() if names}


def _hand_on(flow: FunctionFlow, values: dict, methods: dict, handed: dict[int, set[str]]) -> bool:
    """Add to `handed` the parameters `flow`'s `self.m(...)` calls hand a computed 0-d tensor;
    whether any was new."""
    changed = False
    own = frozenset(handed.get(id(flow.fn.node), ()))
    for site in flow.of(ast.Call):
        func = site.node.func
        if not (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
        ):
            continue
        callee = methods.get((id(flow.fn.cls), func.attr))
        if callee is None or callee is flow:
            continue
        args = callee.fn.node.args
        params = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
        pairs = list(zip(params, site.node.args, strict=False))
        pairs += [(k.arg, k.value) for k in site.node.keywords if k.arg is not None]
        for param, arg in pairs:
            if isinstance(arg, ast.Starred):
                break
            known = handed.setdefault(id(callee.fn.node), set())
            if param not in known and _computed_scalar(arg, flow, site.env, values, own):
                known.add(param)
                changed = True
    return changed


def _iterated_by(index: ast.expr, flow: FunctionFlow) -> str:
    """Where an index that is a parameter handed an iterated element comes from, for the message."""
    if not (isinstance(index, ast.Name) and index.id in flow.iterated):
        return ""
    attr, caller = next((a, c) for p, a, c in flow.fn.elements if p == index.id and a in flow.tensor_attrs)
    return f" (an element of `self.{attr}` that {caller} iterates)"


def _number(expr: ast.expr, flow: FunctionFlow, env: dict) -> bool:
    """A number that is no tensor: a host number, or arithmetic of literals and names the flow
    knows as no tensor (`1 - eta`, `eta` a step's float option)."""
    if flow.host_number(expr, env):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _ARITHMETIC):
        return all(_number(e, flow, env) for e in (expr.left, expr.right))
    return isinstance(expr, ast.Name) and flow.kind(expr, env) is None and expr.id not in flow.guessed


def _state_element(expr: ast.Subscript, flow: FunctionFlow, env: dict) -> bool:
    """`self.timesteps[i]`: one element of the object's tensor state at a host index (a name,
    attribute or arithmetic of them, no slice, list or tensor). Counted only inside a larger
    computed value (the caller passes depth > 0): as a bare index `self.t[self.s[i]]` it may be
    a row of a 2-d state."""
    value, index = expr.value, expr.slice
    if not (
        isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self"
    ):
        return False
    if value.attr not in flow.tensor_attrs and value.attr not in _numpy_attributes(flow):
        return False
    if not isinstance(index, (ast.Name, ast.Attribute, ast.BinOp, ast.Constant)):
        return False
    return not any(flow.is_tensorish(n, env) for n in walk(index) if isinstance(n, (ast.Name, ast.Attribute)))


def _numpy_attributes(flow: FunctionFlow) -> set[str]:
    """`self.X` that the class sets to a numpy call's result somewhere (`self.prk_timesteps =
    np.array([])`): dynamo traces numpy arrays as tensors, so an element read at a host index is a
    0-d tensor of the graph (PNDM's `timestep = self.prk_timesteps[k]`, gb0033 at its use)."""
    cls = flow.fn.cls
    found: set[str] = set()
    for node in walk(cls) if cls is not None else ():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            qual = flow.imports.qualname(node.value.func) or ""
            if qual.startswith("numpy."):
                found.update(
                    t.attr
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                )
    return found


def _literal_tensor(expr: ast.expr, flow: FunctionFlow) -> bool:
    """`torch.tensor(0)`: a 0-d constant, which dynamo folds (it indexes without a break)."""
    return (
        isinstance(expr, ast.Call)
        and flow.imports.qualname(expr.func) == "torch.tensor"
        and len(expr.args) == 1
        and _number_literal(expr.args[0])
    )


def _number_literal(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        expr = expr.operand
    return (
        isinstance(expr, ast.Constant)
        and isinstance(expr.value, (int, float))
        and not isinstance(expr.value, bool)
    )


def _one_dim_tuple(call: ast.Call) -> bool:
    """`x.nonzero(as_tuple=True)`, `torch.nonzero(x, as_tuple=True)`, `torch.where(m)`: a tuple of 1-d tensors."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    as_tuple = any(
        k.arg == "as_tuple" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )
    return (name == "nonzero" and as_tuple) or (name == "where" and len(call.args) == 1 and not call.keywords)


def _indexes_tensor(site: Site, flow: FunctionFlow) -> bool:
    """`t[i]` with one index that is neither a slice nor a literal, read from a tensor."""
    sub = site.node
    if isinstance(sub.slice, (ast.Tuple, ast.Slice, ast.Constant)) or not isinstance(sub.ctx, ast.Load):
        return False
    return flow.is_tensorish(sub.value, site.env)


def _is_cpu_copy(expr: ast.expr) -> bool:
    """`t.cpu()` or `t.detach().cpu()`: a tensor copied to the host for host code to use."""
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "cpu"
        and not expr.args
    )


def _host_copy(expr: ast.expr | None) -> ast.Call | None:
    """The call in `expr`'s chain of methods and subscripts that moves a tensor to the host:
    `.cpu()`, or `.to(...)` given anything but dtypes (`x.cpu().permute(0, 2, 3, 1).float()`,
    `out["logits"][0].to("cpu")`); None when the chain has none."""
    while isinstance(expr, (ast.Call, ast.Subscript)):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
            continue
        func = expr.func
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "cpu" or (func.attr == "to" and not _dtypes_only(expr)):
            return expr
        expr = func.value
    return None


def _dtypes_only(call: ast.Call) -> bool:
    """`.to(torch.float32)`, `.to(dtype=x.dtype)`: a cast that leaves the tensor where it is."""
    return all(
        isinstance(a, ast.Attribute)
        and (a.attr == "dtype" or isinstance(a.value, ast.Name) and a.value.id == "torch")
        for a in call.args
    ) and all(k.arg in ("dtype", "non_blocking", "copy", "memory_format") for k in call.keywords)


def _array_taker(call: ast.Call, parents: dict[int, ast.AST], sf: SourceFile) -> str | None:
    """The imported function, neither numpy's nor torch's, that takes the array `call` (`t.numpy()`)
    makes as an argument (inside a tuple or list too): `Image.fromarray(t.numpy())`, `sf.write(buf,
    t.numpy())`, `pickle.dumps(t.numpy())`; dynamo skips such a function and breaks there (torch
    2.13: "Attempted to call function marked as skipped"). Its name, else None."""
    child, parent = call, parents.get(id(call))
    while isinstance(parent, (ast.Tuple, ast.List, ast.Starred, ast.keyword)):
        child, parent = parent, parents.get(id(parent))
    if not isinstance(parent, ast.Call) or child is parent.func:
        return None
    qual = sf.imports.qualname(parent.func)
    if qual is None or qual.startswith(("numpy.", "torch.")) or qual.split(".")[0] in ("numpy", "torch"):
        return None
    return qual


def _numpy_copy(call: ast.Call, flow: FunctionFlow) -> ast.Call | None:
    """Where the tensor that `call` (`t.numpy()`) turns into an array was copied to the host: the
    call itself when its chain has the copy (`t.cpu().numpy()`, `numpy(force=True)`), the copy on
    the one line that binds `t` (`t = x.float().cpu()`), else None: `Tensor.numpy()` raises on a
    GPU tensor, so without a copy before it the tensor was on the CPU and nothing waits for a GPU
    (the ONNX pipelines' `torch.from_numpy(...)` latents), and dynamo traces the call (torch 2.13)."""
    if any(k.arg == "force" for k in call.keywords) or _host_copy(call.func.value) is not None:
        return call
    receiver = call.func.value
    while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
        receiver = receiver.func.value  # `t.float().numpy()`: the copy is in `t`'s binding
    if not isinstance(receiver, ast.Name) or flow.assigned.get(receiver.id, 0) != 1:
        return None
    for node in walk(flow.fn.node):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == receiver.id
        ):
            return _host_copy(node.value)
    return None


def _slice_bound(site: Site, flow: FunctionFlow) -> ast.expr | None:
    sub = site.node
    slices = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    for part in slices:
        if isinstance(part, ast.Slice):
            for bound in (part.lower, part.upper, part.step):
                if (
                    bound is not None
                    and flow.is_tensor(bound, site.env)
                    and not _on_a_guess(bound, flow, site.env)
                ):
                    return bound
    return None


# Methods that only a tensor has (no list, tuple, dict, set, str or numpy array does): a parameter
# taken for a tensor on its name alone that the body calls one of them on is surely one.
_TENSOR_ONLY_METHODS = frozenset(
    {"numel", "nelement", "dim", "unsqueeze", "detach", "float", "long", "half", "cpu", "cuda"}
)


def _tensor_container(test: ast.Compare, flow: FunctionFlow, env: Env) -> ast.expr | None:
    """The tensor on the right of an `in` / `not in` of `test`: Python runs `Tensor.__contains__`,
    which is `bool((tensor == value).any().item())` for a number or tensor value, so dynamo breaks
    there (gb0124, bench/reach22_toys.py). A parameter taken for a tensor on its name alone counts
    only where the body calls a tensor-only method on it (`if key in cache:` is a dict far more often).
    A string on the left says the right is no tensor: `Tensor.__contains__` raises for one."""
    for left, op, right in zip((test.left, *test.comparators[:-1]), test.ops, test.comparators, strict=True):
        if not isinstance(op, (ast.In, ast.NotIn)) or not flow.is_tensor(right, env):
            continue
        if isinstance(left, ast.JoinedStr) or (
            isinstance(left, ast.Constant) and isinstance(left.value, str)
        ):
            continue
        if only_guessed(right, flow, test) and not _tensor_by_use(right.id, flow):
            continue
        return right
    return None


def _tensor_by_use(name: str, flow: FunctionFlow) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in _TENSOR_ONLY_METHODS
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == name
        for n in walk(flow.fn.node)
    )


def _on_a_guess(expr: ast.expr, flow: FunctionFlow, env: Env) -> bool:
    """`expr` is a tensor only through parameters taken for tensors on their name alone (`pad +
    length`): as a slice bound such a parameter is a Python int far more often (the size check
    above makes the same call for a bare name)."""
    names = [n for n in walk(expr) if isinstance(n, ast.Name) and flow.is_tensor(n, env)]
    calls = [n for n in walk(expr) if isinstance(n, (ast.Call, ast.Subscript))]
    return (
        bool(names)
        and not calls
        and all(n.id in flow.guessed and flow.assigned.get(n.id) == 1 for n in names)
    )


def _item_fix(site: Site, flow: FunctionFlow, sf: SourceFile, parents: dict[int, ast.AST]) -> Fix | None:
    """Drop `.item()` when the number only meets tensors in arithmetic: a 0-d tensor does the same."""
    call = site.node
    receiver = call.func.value
    if not flow.is_tensor(receiver, site.env):
        return None
    parent = parents.get(id(call))
    uses: list[ast.expr] = [call]
    if (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        name = parent.targets[0].id
        if flow.assigned.get(name, 0) != 1:
            return None
        uses = [s.node for s in flow.of(ast.Name) if s.node.id == name and isinstance(s.node.ctx, ast.Load)]
        if not uses or flow.loaded.get(name, 0) != len(uses):
            return None  # some use sits where the flow did not record it (a dead branch): be careful
    for use in uses:
        op = parents.get(id(use))
        if not isinstance(op, ast.BinOp) or not isinstance(op.op, _ARITHMETIC):
            return None
        other = op.right if op.left is use else op.left
        env = next(s.env for s in flow.of(ast.BinOp) if s.node is op)
        if not flow.is_tensor(other, env):
            return None
    return Fix(
        Applicability.UNSAFE,
        "keep the 0-d tensor instead of calling `.item()`",
        (sf.replace(call, atom(sf, receiver)),),
    )


INDEX_MESSAGE = (
    "read it as a tensor index, `X[j.unsqueeze(0).to(X.device)][0]` (`torch.as_tensor(j, device=X.device)` "
    "for a parameter, which a caller may pass as a Python int), which dynamo keeps in the graph (the same "
    "values, shape, device and "
    "dtype for every integer `j`, negative ones included, and the same IndexError out of range; assumes `j` is an integer, not a boolean mask, and that nothing writes through "
    "the result: it is a copy, where `X[j]` was a view of `X`)"
)


def _index_fix(site: Site, flow: FunctionFlow, sf: SourceFile, parents: dict[int, ast.AST]) -> Fix | None:
    """`X[j]` -> `X[j.unsqueeze(0).to(X.device)][0]` for a 0-d tensor `j` computed in the graph.

    Python's indexing reads a 0-d integer tensor as a number (`select` at `j.item()`, gb0033);
    a 1-d index is advanced indexing, which dynamo traces. `X[j.unsqueeze(0)]` has shape
    `(1, *j.shape, *X.shape[1:])`, so `[0]` gives `X[j]`'s shape for a `j` of any dimension:
    exact wherever `j` is an integer tensor. Only on a surely-tensor `X` read (not stored to),
    and a `j` that is not known to be boolean."""
    sub = site.node
    if not isinstance(sub.ctx, ast.Load) or not flow.is_tensor(sub.value, site.env):
        return None
    if flow.kind(sub.slice, site.env) == BOOL or has_comment(sf, sub):
        return None
    if _in_tensor_branch(sub, parents, flow, site.env):
        return None  # FL102's where fix reads it in range and without `.item()`: one fix, not two
    if not _plain_reference(sub.value):
        return None  # the fix reads `X` twice (its device too)
    table = atom(sf, sub.value)
    args = flow.fn.node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    # On `X`'s device: a 1-d index on another device than the CPU raises where a 0-d one was read as a
    # number (diffusers' DDIM: `alphas_cumprod` on the CPU, `timesteps` moved to the GPU).
    content, imports = one_row_read(table, atom(sf, sub.slice)), ()
    if any(isinstance(n, ast.Name) and n.id in params for n in walk(sub.slice)):
        # a parameter (`timestep: int`) may be a Python int from another caller: make it a tensor
        torch, imports = torch_name(sf)
        content = one_row_read(table, sf.segment(sub.slice), torch)
    return Fix(Applicability.UNSAFE, INDEX_MESSAGE, (sf.replace(sub, content),), imports)


def _plain_reference(expr: ast.expr) -> bool:
    """A name or a chain of attributes of one (`self.alphas_cumprod`): read twice, the same value."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _in_tensor_branch(node: ast.AST, parents: dict[int, ast.AST], flow: FunctionFlow, env: Env) -> bool:
    """`node` sits in a branch of an `if` or conditional expression whose test reads tensor values."""
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            if value_dependent(parent.test, flow, env) is not None:
                return True
        child, parent = parent, parents.get(id(parent))
    return False


@check("FL101")
def host_sync(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    file_flows = flows(functions, sf.imports)
    handed = _hand_computed(file_flows)
    yield from wrapped_numbers(sf, file_flows, rule)
    for flow in file_flows:
        fn = flow.fn
        parents: dict[int, ast.AST] | None = None
        yield from numpy_on_numbers(sf, flow, rule)
        yield from numpy_sum_as_size(sf, flow, rule)
        copies: set[int] = set()  # the host copies reported for a `.numpy()`, each once
        exported: frozenset[int] | None = None  # reads written for torch.export, found when first needed
        for site in flow.of(ast.Call):
            what = _sync_method(site, flow, sf)
            if what is not None:
                fix = None
                if site.node.func.attr == "item":
                    parents = parents if parents is not None else parent_map(fn.node)
                    fix = _item_fix(site, flow, sf, parents) or item_assert(sf, site, flow, parents)
                subject = describe(site.node.func.value, 40)
                if site.node.func.attr == "numpy":
                    copy = _numpy_copy(site.node, flow)
                    if copy is None:
                        parents = parents if parents is not None else parent_map(fn.node)
                        taker = _array_taker(site.node, parents, sf)
                        if taker is not None:
                            # a CPU tensor: no sync, but the array goes to code dynamo cannot trace here
                            message = (
                                f"{what} on `{subject}` hands an array to `{taker}`, which dynamo cannot "
                                "trace: the graph breaks here; keep the value as a tensor"
                            )
                            yield finding(sf, rule, site.node, message, None, path=site.path)
                        continue  # a tensor on the CPU already (`.numpy()` raises on a GPU one): no sync
                    if id(copy) in copies:
                        continue
                    copies.add(id(copy))
                    # dynamo traces numpy on tensors as tensor ops: no break on this line itself
                    message = (
                        f"{what} on `{subject}` copies it to the host (a GPU sync); dynamo traces the "
                        "numpy calls on it as tensor ops, and the graph breaks where the array "
                        "reaches other Python code; keep the value as a tensor"
                    )
                    if copy is not site.node:
                        message = (
                            f"`{describe(copy, 40)}` copies a tensor to the host (a GPU sync) for the "
                            f"`.numpy()` on line {site.node.lineno}; dynamo traces the numpy calls on it "
                            "as tensor ops, and the graph breaks where the array reaches other Python "
                            "code; keep the value as a tensor"
                        )
                        yield finding(sf, rule, copy, message, None, path=site.path)
                        continue
                else:
                    message = f"{what} on `{subject}` copies it to the host: {rule.message}"
                path = site.path
                if path is None and site.node.func.attr in ("item", "tolist"):
                    if exported is None:
                        exported = export_reads(fn.node, fn.cls, sf.imports)
                    path = EXPORT if id(site.node) in exported else None
                yield finding(sf, rule, site.node, message, fix, path=path)
                continue
            what = _sync_call(site, flow, sf)
            if what is not None:
                fix = tensor_check_fix(sf, site.node)
                yield finding(sf, rule, site.node, f"{what}: {rule.message}", fix, path=site.path)
        for site in flow.of(ast.Compare):
            container = _tensor_container(site.node, flow, site.env)
            if container is not None:
                yield finding(
                    sf,
                    rule,
                    site.node,
                    f"`in` on tensor `{describe(container, 30)}` calls `Tensor.__contains__`, which reads "
                    f"`(tensor == value).any()` on the host (gb0124): {rule.message}",
                    path=site.path,
                )
        values = None  # the function's single-assignment names, built on first need
        for site in flow.of(ast.Subscript):
            if _indexes_tensor(site, flow):
                values = _single_values(flow) if values is None else values
                index = site.node.slice
                if not _computed_scalar(index, flow, site.env, values, handed.get(id(fn.node), frozenset())):
                    index = None
            else:
                index = None
            if index is not None:
                parents = parents if parents is not None else parent_map(fn.node)
                yield finding(
                    sf,
                    rule,
                    index,
                    f"indexing `{describe(site.node.value, 30)}` with `{describe(index, 30)}`, a 0-d tensor "
                    f"computed in the graph{_iterated_by(index, flow)}, reads its value on the host (gb0033): "
                    f"{rule.message}",
                    _index_fix(site, flow, sf, parents),
                    path=site.path,
                )
                continue
            bound = _slice_bound(site, flow)
            if bound is not None:
                yield finding(
                    sf,
                    rule,
                    bound,
                    f"tensor `{describe(bound, 30)}` as a slice bound is an implicit `.item()`: {rule.message}",
                    path=site.path,
                )
