"""FL106's fix that keeps a data-sized result in the graph: a custom op with an unbacked size.

dynamo breaks at `x[mask]`, `nonzero`, one-argument `torch.where`, `unique`, `masked_select` and
`repeat_interleave` with tensor repeats because it will not put an output sized by the data in its
graph (`capture_dynamic_output_shape_ops=False`, gb0036/gb0033). An operator whose fake (meta)
implementation gives that dim an *unbacked* size is captured without a break (torch 2.13: the
break before, none after, `tests/source/test_unbacked_ops.py`). So the fix rewrites the expression
into a call of a small `torch.library.custom_op` that it defines once in the user's file, after the
imports (`Fix.definitions`):

- the op's real implementation is the original expression: the same ATen op on the same tensors,
  so its outputs are bit-identical;
- its fake implementation makes the data-sized dim with `_fuselint_unbacked_size()`, which asks the
  fake context's shape env for an unbacked symbol. The public `get_ctx().new_dynamic_size()` does
  the same but raises `DynamicOutputShapeException` unless `capture_dynamic_output_shape_ops` is on
  (torch 2.13, `torch/_library/fake_impl.py`), which is the very break this fix removes; where no
  shape env is there, the helper falls back to it;
- mask selections (`x[mask]`, `x[:, mask]`, `masked_select`) register their exact gradient (the
  grad scattered into zeros); the others register none, and a backward through them raises.

Unsafe: the values are the original's for every input, but the file now carries an op that only
torch >= 2.4 knows, and what follows in the graph must handle the unbacked size: a later `if` on it
breaks there instead (kornia ALIKED's `if len(indices) > n`), but a `.tolist()` (an unbind) of a
tensor sized by it raises GuardOnDataDependentSymNode while compiling (torch 2.13: qwen2-vl's
`lengths.tolist()` of the `cu_seqlens` its `repeat_interleave` sizes), so the fix is one to prove
(`--entry`), and a backend must compile or fall back on such graphs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from fuselint.findings import Applicability, Fix
from fuselint.source.checks._shared import torch_name
from fuselint.source.dataflow import BOOL, FIX_OPS, TENSORS, FunctionFlow, Site
from fuselint.source.hit_loops import every_index
from fuselint.source.module import SourceFile
from fuselint.source.nodes import type_checking_only, walk

PREFIX = FIX_OPS
# (the name the fixed code calls, the module-level blocks that define it, what it runs)
Definition = tuple[str, tuple[str, ...], str]
GRADIENT = "its gradient is the grad scattered back into zeros, registered with the op"
NO_GRADIENT = "assumes no gradient flows through it: the op registers none, and a backward through it raises"


def message(op: str, what: str, gradient: str) -> str:
    return (
        f"run `{what}` as the custom op `{op}` that the fix defines in this file: its real "
        "implementation is the same expression (the same values), and its fake one gives the "
        "data-sized dim an unbacked size, so dynamo keeps it in the graph (assumes torch >= 2.4, and "
        "that later code reads no count of it on the host: a later `if` on it breaks there, but a "
        "`.tolist()` or `unbind` of a data-sized tensor fails to compile, torch 2.13, qwen2-vl; "
        f"{gradient})"
    )


# ---------------------------------------------------------------- the definitions' text

_SIZE = '''def _fuselint_unbacked_size():
    """A size only the data knows: unbacked, so dynamo keeps the op in its graph."""
    ctx = {torch}.library.get_ctx()
    if getattr(ctx, "_shape_env", None) is None:
        return ctx.new_dynamic_size()
    size = ctx._shape_env.create_unbacked_symint()
    {torch}._check(size >= 0)
    return size


def _fuselint_op_name(name):
    """`fuselint_<module>::<name>`, numbered if the module ran before (a reload)."""
    namespace = "fuselint_" + __name__.replace(".", "_")
    ops, suffix = getattr({torch}.ops, namespace), ""
    while hasattr(ops, name + suffix):
        suffix = f"_{{int(suffix[1:] or 0) + 1}}"
    return f"{{namespace}}::{{name}}{{suffix}}"
'''


def _op(torch: str, name: str, params: str, returns: str, doc: str, body: str, fake: str) -> str:
    """A custom op `_fuselint_<name>` in the importing module's own namespace (no clash between
    two fixed files), with its fake implementation."""
    fn = PREFIX + name
    # Contiguous, as the fake implementation says: Inductor checks a custom op's strides against
    # its fake (`nonzero` is column-major on CPU, a mask read may be permuted); the values are the same.
    made = (
        f"{body}.contiguous()" if returns == f"{torch}.Tensor" else f"tuple(t.contiguous() for t in {body})"
    )
    typed = ", ".join(f"{p}: {torch}.Tensor" for p in params.split(", "))
    return (
        f'@{torch}.library.custom_op(_fuselint_op_name("{name}"), mutates_args=())\n'
        f"def {fn}({typed}) -> {returns}:\n"
        f'    """`{doc}`, its output sized by the data (fuselint FL106)."""\n'
        f"    return {made}\n"
        f"\n\n"
        f"@{fn}.register_fake\n"
        f"def {fn}_fake({params}):\n"
        f"{fake}"
    )


def _selection_gradient(torch: str, fn: str, where: str) -> str:
    """The exact gradient of a mask selection: the grad scattered into zeros where `where` (the
    mask broadcast to the input's shape, in terms of `mask` and `shape`) holds."""
    return (
        f"\n\n"
        f"def {fn}_context(ctx, inputs, output):\n"
        f"    ctx.shape = inputs[0].shape\n"
        f"    ctx.save_for_backward(inputs[1])\n"
        f"\n\n"
        f"def {fn}_backward(ctx, grad):\n"
        f"    (mask,) = ctx.saved_tensors\n"
        f"    shape = ctx.shape\n"
        f"    where = {where}\n"
        f"    full = grad.new_zeros({torch}.broadcast_shapes(shape, where.shape))\n"
        f"    return full.masked_scatter(where, grad).sum_to_size(shape), None\n"
        f"\n\n"
        f"{fn}.register_autograd({fn}_backward, setup_context={fn}_context)\n"
    )


def select_definition(torch: str, lead: int | None) -> Definition:
    """(op name, its definition, the expression it runs) for `x[:, ..., mask]` with `lead` full
    slices before the mask, or `x[..., mask]` where `lead` is None."""
    if lead is None:
        name, doc, before = "select_last", "x[..., mask]", "x.dim() - mask.dim()"
        at = "len(shape) - mask.dim()"
    else:
        name, doc, before, at = f"select_{lead}", "x[" + ":, " * lead + "mask]", str(lead), str(lead)
    fake = (
        f"    lead = {before}\n"
        f"    size = _fuselint_unbacked_size()\n"
        f"    return x.new_empty((*x.shape[:lead], size, *x.shape[lead + mask.dim() :]))\n"
    )
    where = f"mask.reshape((1,) * ({at}) + mask.shape + (1,) * (len(shape) - ({at}) - mask.dim()))"
    text = _op(torch, name, "x, mask", f"{torch}.Tensor", doc, doc, fake)
    return PREFIX + name, (text + _selection_gradient(torch, PREFIX + name, where),), doc


def masked_select_definition(torch: str) -> Definition:
    doc = "torch.masked_select(x, mask)"
    fake = "    return x.new_empty((_fuselint_unbacked_size(),))\n"
    where = "mask"
    text = _op(
        torch, "masked_select", "x, mask", f"{torch}.Tensor", doc, f"{torch}.masked_select(x, mask)", fake
    )
    name = PREFIX + "masked_select"
    return name, (text + _selection_gradient(torch, name, where),), doc


def nonzero_definition(torch: str, function: str) -> Definition:
    """`torch.nonzero(x)` / `torch.argwhere(x)`: one row of indices per match."""
    doc = f"torch.{function}(x)"
    fake = f"    return x.new_empty((_fuselint_unbacked_size(), x.dim()), dtype={torch}.long)\n"
    text = _op(torch, function, "x", f"{torch}.Tensor", doc, f"{torch}.{function}(x)", fake)
    return PREFIX + function, (text,), doc


def nonzero_tuple_definition(torch: str) -> Definition:
    """`torch.nonzero(x, as_tuple=True)` (and one-argument `torch.where`): ATen's
    `nonzero_numpy` is `nonzero(x).unbind(1)`, a 0-d `x` taken as one element; the op returns the
    one index matrix (a custom op's outputs may not alias each other) and the wrapper unbinds it."""
    name, text, _ = nonzero_definition(torch, "nonzero")
    wrapper = (
        f"def {PREFIX}nonzero_tuple(x):\n"
        f'    """`torch.nonzero(x, as_tuple=True)` with a data-sized length (fuselint FL106)."""\n'
        f"    return {name}(x.unsqueeze(0) if x.dim() == 0 else x).unbind(1)\n"
    )
    return PREFIX + "nonzero_tuple", (*text, wrapper), "torch.nonzero(x, as_tuple=True)"


def unique_definition(torch: str, sorted_: bool, inverse: bool, counts: bool, dim: int | None) -> Definition:
    tag = "".join(
        (
            "" if sorted_ else "_unsorted",
            "_inverse" if inverse else "",
            "_counts" if counts else "",
            "" if dim is None else f"_dim{dim}".replace("-", "m"),
        )
    )
    name = "unique" + tag
    args = [f"sorted={sorted_}"]
    args += ["return_inverse=True"] if inverse else []
    args += ["return_counts=True"] if counts else []
    args += [] if dim is None else [f"dim={dim}"]
    call = f"{torch}.unique(x, {', '.join(args)})"
    outputs = 1 + inverse + counts
    returns = f"{torch}.Tensor" if outputs == 1 else f"tuple[{', '.join([f'{torch}.Tensor'] * outputs)}]"
    if dim is None:
        values, inverse_shape = "(size,)", "x.shape"
    else:
        values = "(*x.shape[:d], size, *x.shape[d + 1 :])"
        inverse_shape = "(x.shape[d],)"
    lines = ["    size = _fuselint_unbacked_size()\n"]
    if dim is not None:
        lines.append(f"    d = {dim} % x.dim()\n")
    made = [f"x.new_empty({values})"]
    if inverse:
        made.append(f"x.new_empty({inverse_shape}, dtype={torch}.long)")
    if counts:
        made.append(f"x.new_empty((size,), dtype={torch}.long)")
    lines.append(f"    return {', '.join(made)}\n")
    text = _op(torch, name, "x", returns, call.replace(f"{torch}.", "torch.", 1), call, "".join(lines))
    return PREFIX + name, (text,), "torch.unique"


def repeat_definition(torch: str, with_input: bool, dim: int | None) -> Definition:
    """`torch.repeat_interleave(x, repeats[, dim=d])`, or the one-argument `repeat_interleave(repeats)`."""
    if not with_input:
        call = f"{torch}.repeat_interleave(repeats)"
        fake = "    return repeats.new_empty((_fuselint_unbacked_size(),))\n"
        text = _op(
            torch,
            "repeat_counts",
            "repeats",
            f"{torch}.Tensor",
            "torch.repeat_interleave(repeats)",
            call,
            fake,
        )
        return PREFIX + "repeat_counts", (text,), "torch.repeat_interleave(repeats)"
    if dim is None:
        name, call = "repeat_flat", f"{torch}.repeat_interleave(x, repeats)"
        fake = "    return x.new_empty((_fuselint_unbacked_size(),))\n"
    else:
        name = f"repeat_dim{dim}".replace("-", "m")
        call = f"{torch}.repeat_interleave(x, repeats, dim={dim})"
        fake = (
            f"    d = {dim} % x.dim()\n"
            f"    return x.new_empty((*x.shape[:d], _fuselint_unbacked_size(), *x.shape[d + 1 :]))\n"
        )
    doc = call.replace(f"{torch}.", "torch.", 1)
    return PREFIX + name, (_op(torch, name, "x, repeats", f"{torch}.Tensor", doc, call, fake),), doc


# ---------------------------------------------------------------- where the fix applies


def _surely_tensor(node: ast.expr, site: Site, flow: FunctionFlow) -> bool:
    """The code shows `node` to be a tensor, not only a parameter's name (numpy's `a.nonzero()`
    is a tuple, its `a.repeat` another method)."""
    if flow.kind(node, site.env) not in TENSORS:
        return False
    names = [
        n
        for n in walk(node)
        if isinstance(n, (ast.Name, ast.Attribute)) and flow.kind(n, site.env) in TENSORS
    ]
    return not (names and all(isinstance(n, ast.Name) and n.id in flow.guessed for n in names))


def _constant(node: ast.expr | None, kind: type) -> object:
    """The value of a literal of `kind` (`-1` included for ints); `...` where it is not one."""
    if node is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and kind is int:
        inner = _constant(node.operand, int)
        return -inner if type(inner) is int else ...
    if isinstance(node, ast.Constant) and type(node.value) is kind:
        return node.value
    if isinstance(node, ast.Constant) and node.value is None and kind is int:
        return None
    return ...


def imports_torch_when_run(sf: SourceFile, torch: str) -> bool:
    """The module binds `torch` (its local name) when it is imported: at the top, or in an `if` or
    `try` there, but not only under `if TYPE_CHECKING:` or inside a function (transformers'
    `import_utils.py`), where a definition run at import would raise NameError."""

    def binds(body: list[ast.stmt]) -> bool:
        for stmt in body:
            if isinstance(stmt, ast.Import) and any(
                (a.asname or a.name.split(".")[0]) == torch and (a.asname is None or a.name == "torch")
                for a in stmt.names
            ):
                return True
            if isinstance(stmt, ast.If) and binds(stmt.orelse):
                return True
            if isinstance(stmt, ast.If) and not type_checking_only(stmt) and binds(stmt.body):
                return True
            if isinstance(stmt, ast.Try) and (binds(stmt.body) or any(binds(h.body) for h in stmt.handlers)):
                return True
        return False

    return binds(sf.tree.body)


def _fix(
    sf: SourceFile,
    site: Site,
    content: str,
    definition: Definition,
    gradient: str,
    node: ast.AST | None = None,
) -> Fix | None:
    torch, imports = torch_name(sf)
    if not imports and not imports_torch_when_run(sf, torch):
        return None
    name, blocks, what = definition
    edits = (sf.replace(node or site.node, content),)
    return Fix(
        Applicability.UNSAFE,
        message(name, what, gradient) + (AUGMENTED if node is not None else ""),
        edits,
        imports,
        (_SIZE.format(torch=torch), *blocks),
    )


_IN_PLACE = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
AUGMENTED = (
    "; `x[m] += v` reads the rows through the op and adds to them in place, `x[m] = <op>(x, m).add_(v)`, "
    "as `+=` adds to the rows it read before writing them back (`x` and `m` are read twice: names, "
    "indexing and operators, no call)"
)


_READS = (
    ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Constant, ast.Compare, ast.UnaryOp, ast.BinOp,
    ast.BoolOp, ast.Tuple, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
)  # fmt: skip


def _pure_operand(node: ast.expr) -> bool:
    """Names, attributes, indexing and operators, no call (`x`, `~mask`, `x[:, 0] > 0`): evaluated
    twice with nothing written in between, it reads the same."""
    return all(isinstance(n, _READS) for n in ast.walk(node))


_CONVERSIONS = frozenset(
    {"to", "float", "half", "bfloat16", "double", "type_as", "view", "reshape", "contiguous", "detach"}
)


def _keeps_target(value: ast.expr, tensor: ast.expr, mask: ast.expr) -> bool:
    """`x` and `m` of `x[m] += v` read the same after `v` as before it: `+=` evaluates them once, before
    `v`, the rewrite again after it. A call in `v` may write `x` in place (`self.act(x)` with an
    in-place ReLU), so it is let through only when the two are plain names (the same objects then)
    or it only converts a tensor (`v.to(x.device)`, Higgs Audio)."""
    if isinstance(tensor, ast.Name) and isinstance(mask, ast.Name):
        return True
    return all(
        isinstance(n.func, ast.Attribute) and n.func.attr in _CONVERSIONS
        for n in ast.walk(value)
        if isinstance(n, ast.Call)
    )


def unbacked_select(sf: SourceFile, site: Site, flow: FunctionFlow, mask: ast.expr) -> Fix | None:
    """`x[mask]`, `x[:, mask]` (full slices before the mask, any after) or `x[..., mask]`, read (not
    written) -> `_fuselint_select_<k>(x, mask)`; `x[mask] += v` (Higgs Audio's text and audio rows)
    -> `x[mask] = _fuselint_select_<k>(x, mask).add_(v)`."""
    sub = site.node
    augmented = site.stmt if isinstance(site.stmt, ast.AugAssign) and site.stmt.target is sub else None
    if not isinstance(sub, ast.Subscript):
        return None
    if augmented is not None:
        if type(augmented.op) not in _IN_PLACE or not (_pure_operand(sub.value) and _pure_operand(mask)):
            return None
        if not _keeps_target(augmented.value, sub.value, mask):
            return None
    elif not isinstance(sub.ctx, ast.Load):
        return None
    parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    at = next(i for i, p in enumerate(parts) if p is mask)
    if flow.kind(mask, site.env) != BOOL or any(isinstance(n, ast.Starred) for n in parts):
        return None
    if not (_surely_tensor(mask, site, flow) or _surely_tensor(sub.value, site, flow)):
        return None  # a numpy mask on a numpy array, for all the code shows

    def full(part: ast.expr) -> bool:
        return isinstance(part, ast.Slice) and part.lower is None and part.upper is None and part.step is None

    before, after = parts[:at], parts[at + 1 :]
    if not all(full(p) for p in after):
        return None
    if len(before) == 1 and isinstance(before[0], ast.Constant) and before[0].value is Ellipsis:
        lead = None
    elif all(full(p) for p in before):
        lead = len(before)
    else:
        return None
    torch, _ = torch_name(sf)
    definition = select_definition(torch, lead)
    content = f"{definition[0]}({sf.segment(sub.value)}, {sf.segment(mask)})"
    if augmented is None:
        return _fix(sf, site, content, definition, GRADIENT)
    added = f"{content}.{_IN_PLACE[type(augmented.op)]}({sf.segment(augmented.value)})"
    return _fix(sf, site, f"{sf.segment(sub)} = {added}", definition, GRADIENT, augmented)


_NONZERO = {"torch.nonzero": "nonzero", "torch.argwhere": "argwhere"}


def _loop_iterable(loop: ast.For) -> ast.expr:
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" and it.args:
        return it.args[0]
    return it


def _method_chain_of(value: ast.expr, call: ast.AST) -> bool:
    """`value` is `call`, or methods called on it (`<call>.squeeze(-1)`, nemotron_h's hit experts)."""
    while value is not call and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        value = value.func.value
    return value is call


def in_host_loop(site: Site, flow: FunctionFlow, sized: Callable[[ast.expr], int | None]) -> bool:
    """The call's result is walked by a Python `for` loop, or the call runs inside one that walks a
    data-sized result (`sized`: `count_branches.DataSized.sized` of the function; switch_transformers'
    `for expert_idx in expert_hit:` over `nonzero()`, and the loop body's one-argument `torch.where`).
    Dynamo cannot iterate a size only the data knows: the loop breaks the graph wherever the ops stand,
    so keeping them in the graph only moves the break, and the loop's frame, which dynamo skipped
    whole, is then compiled in pieces (Switch under Inductor: 13 -> 14 graphs, 1.39x slower; the outer
    op alone 1.17x, the body's alone 1.33x)."""
    call, stmt = site.node, site.stmt
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _method_chain_of(stmt.value, call):
        target = stmt.targets[0].id if isinstance(stmt.targets[0], ast.Name) else None
    for loop in walk(flow.fn.node):
        if not isinstance(loop, ast.For):
            continue
        it = _loop_iterable(loop)
        if it is call or (target is not None and isinstance(it, ast.Name) and it.id == target):
            return True  # the loop walks this result
        if sized(it) is not None and any(n is call for body in loop.body for n in walk(body)):
            return True  # the call runs inside a loop over a data-sized result
    return False


def unbacked_call(
    sf: SourceFile, site: Site, flow: FunctionFlow, sized: Callable[[ast.expr], int | None]
) -> Fix | None:
    """A data-sized call FL106 flags, rewritten into a call of the op that runs it; where a Python
    loop walks a data-sized result around or from it (`in_host_loop`), only a mixture-of-experts
    loop over the hit experts has a fix (`hit_loops.every_index`)."""
    call = site.node
    if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if in_host_loop(site, flow, sized):
        return every_index(sf, site, flow)
    if any(k.arg is None for k in call.keywords):
        return None
    func = call.func
    qual = sf.imports.qualname(func)
    keywords = {k.arg: k.value for k in call.keywords}
    if qual is not None:
        args = list(call.args)
        name = qual.rsplit(".", 1)[1] if qual.startswith("torch.") else None
    elif isinstance(func, ast.Attribute) and _surely_tensor(func.value, site, flow):
        args, name = [func.value, *call.args], func.attr
    else:
        return None
    torch, _ = torch_name(sf)
    if name == "where" and qual == "torch.where" and len(args) == 1 and not keywords:
        name, keywords = "nonzero", {"as_tuple": ast.Constant(True)}
    if not args or not _surely_tensor(args[0], site, flow):
        return None
    source = [sf.segment(a) for a in args]
    if name in ("nonzero", "argwhere") and len(args) == 1:
        as_tuple = _constant(keywords.pop("as_tuple", None), bool)
        if keywords or as_tuple is ... or (as_tuple and name == "argwhere"):
            return None
        definition = nonzero_tuple_definition(torch) if as_tuple else nonzero_definition(torch, name)
        return _fix(sf, site, f"{definition[0]}({source[0]})", definition, NO_GRADIENT)
    if name == "masked_select" and len(args) == 2 and not keywords:
        if flow.kind(args[1], site.env) != BOOL:
            return None
        definition = masked_select_definition(torch)
        return _fix(sf, site, f"{definition[0]}({source[0]}, {source[1]})", definition, GRADIENT)
    if (
        name == "unique"
        and len(args) == 1
        and set(keywords) <= {"sorted", "return_inverse", "return_counts", "dim"}
    ):
        flags = [_constant(keywords.get(k), bool) for k in ("sorted", "return_inverse", "return_counts")]
        dim = _constant(keywords.get("dim"), int)
        if ... in flags or dim is ...:
            return None
        sorted_ = True if flags[0] is None else flags[0]
        definition = unique_definition(torch, sorted_, bool(flags[1]), bool(flags[2]), dim)
        return _fix(sf, site, f"{definition[0]}({source[0]})", definition, NO_GRADIENT)
    if name == "repeat_interleave" and set(keywords) <= {"repeats", "dim"}:
        repeats = keywords.get("repeats", args[1] if len(args) > 1 else None)
        if len(args) > 2 or ("repeats" in keywords and len(args) > 1):
            return None
        dim = _constant(keywords.get("dim"), int)
        if dim is ...:
            return None
        if repeats is None:  # `torch.repeat_interleave(counts)`
            if qual != "torch.repeat_interleave" or dim is not None:
                return None
            definition = repeat_definition(torch, False, None)
            return _fix(sf, site, f"{definition[0]}({source[0]})", definition, NO_GRADIENT)
        if flow.kind(repeats, site.env) not in TENSORS:
            return None
        definition = repeat_definition(torch, True, dim)
        content = f"{definition[0]}({source[0]}, {sf.segment(repeats)})"
        return _fix(sf, site, content, definition, NO_GRADIENT)
    return None
