"""FL106: operators whose output shape depends on tensor values.

`torch.nonzero`, `x[mask]` with a boolean mask, `torch.unique`, `bincount`, `masked_select`,
one-argument `torch.where` and `repeat_interleave` with tensor repeats all return as many
elements as the data says. dynamo cannot size the result without running it, so by
default it breaks the graph there (detection heads, MoE routers); with
`capture_dynamic_output_shape_ops` it keeps an unbacked size that blocks most fusions
and static shapes (CUDA graphs) downstream.

The CTC loss is one too: `aten._ctc_loss` returns the alignment table `log_alpha`, sized by the
longest target length's value, so dynamo (torch 2.13) breaks at `F.ctc_loss` and at a call of an
`nn.CTCLoss` module (gb0036), whatever the lengths are (tensors or tuples of ints).

Where only the first match is read (`x.nonzero()[0]`, `x.nonzero(as_tuple=True)[d][0]`), the fix
reads it from `torch.nonzero_static(x, size=1)` (`break_fixes.first_nonzero`); where the second
match is read when there are several, else the first (diffusers' schedulers' `index_for_timestep`),
from `torch.nonzero_static(x, size=2, fill_value=-1)` and `torch.where` (`break_fixes.second_match`,
also the DPM-Solvers' form that falls back to the last index when nothing matches). A constant
written through masked indices (`x[i[m], j[m]] = c`) is written through every index with the old
value kept where the mask is False (`masked_writes.masked_write`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.break_fixes import first_nonzero, second_match
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding
from fuselint.source.count_branches import DataSized
from fuselint.source.dataflow import BOOL, TENSORISH, TENSORS, FunctionFlow, Site, describe, flows
from fuselint.source.masked_writes import masked_write
from fuselint.source.module import SourceFile
from fuselint.source.nodes import TRIES, made_once, walk
from fuselint.source.nodes import self_attribute as _self_attribute
from fuselint.source.scope import ModelFunction
from fuselint.source.unbacked_ops import unbacked_call, unbacked_select

_DYNAMIC_FUNCTIONS = frozenset(
    {"torch.nonzero", "torch.argwhere", "torch.unique", "torch.unique_consecutive", "torch.bincount",
     "torch.masked_select"}
)  # fmt: skip
_CTC_FUNCTIONS = frozenset({"torch.nn.functional.ctc_loss", "torch.ctc_loss"})
_CTC_MODULES = frozenset({"torch.nn.CTCLoss", "torch.nn.modules.loss.CTCLoss"})
_DYNAMIC_METHODS = frozenset(
    {"nonzero", "argwhere", "unique", "unique_consecutive", "bincount", "masked_select"}
)


def ctc_attributes(cls: ast.ClassDef | None, sf: SourceFile) -> frozenset[str]:
    """`self.X` the class sets to an `nn.CTCLoss(...)` anywhere."""
    if cls is None or not made_once("mentions CTCLoss", sf.tree, lambda _tree: "CTCLoss" in sf.text):
        return frozenset()
    return made_once("ctc attributes", cls, lambda cls: _ctc_attributes(cls, sf))


def _ctc_attributes(cls: ast.ClassDef, sf: SourceFile) -> frozenset[str]:
    return frozenset(
        name
        for node in walk(cls)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and sf.imports.qualname(node.value.func) in _CTC_MODULES
        for target in node.targets
        if (name := _self_attribute(target)) is not None
    )  # fmt: skip


def _dynamic_call(site: Site, flow: FunctionFlow, sf: SourceFile, ctc_modules: frozenset[str]) -> str | None:
    call = site.node
    func = call.func
    qual = sf.imports.qualname(func)
    if qual is not None:
        if qual in _DYNAMIC_FUNCTIONS:
            return f"`{qual}`"
        if qual in _CTC_FUNCTIONS:
            return f"`{qual}` (its alignment table is sized by the target lengths' values)"
        if qual == "torch.where" and len(call.args) == 1 and not call.keywords:
            return "one-argument `torch.where` (a nonzero)"
        if qual == "torch.repeat_interleave":
            repeats = (
                call.args[1]
                if len(call.args) > 1
                else next(
                    (k.value for k in call.keywords if k.arg == "repeats"),
                    call.args[0] if len(call.args) == 1 else None,
                )
            )
            if flow.kind(repeats, site.env) in TENSORS and not _sized(call, flow):
                return "`torch.repeat_interleave` with tensor repeats"
        return None
    if isinstance(func, ast.Call) and sf.imports.qualname(func.func) in _CTC_MODULES:
        return "an `nn.CTCLoss` (its alignment table is sized by the target lengths' values)"
    if not isinstance(func, ast.Attribute):
        return None
    if _self_attribute(func) in ctc_modules:
        return f"`self.{func.attr}`, an `nn.CTCLoss` (its alignment table is sized by the target lengths' values)"
    receiver_kind = flow.kind(func.value, site.env)
    if func.attr in _DYNAMIC_METHODS and receiver_kind in TENSORISH:
        return f"`.{func.attr}()`"
    if func.attr == "nonzero" and receiver_kind is None and not sf.imports.qualname(func.value):
        return "`.nonzero()`"
    if func.attr == "repeat_interleave" and receiver_kind in TENSORISH and call.args:
        if flow.kind(call.args[0], site.env) in TENSORS and not _sized(call, flow):
            return "`.repeat_interleave()` with tensor repeats"
    return None


def _sized(call: ast.Call, flow: FunctionFlow) -> bool:
    """`repeat_interleave(..., output_size=n)`: the caller states the output's length, so the shape
    is static and dynamo traces it without a break (torch 2.13: one graph). Not when `n` is a
    parameter that defaults to None (torch_geometric's `ptr2index(ptr, output_size=None)`)."""
    value = next((k.value for k in call.keywords if k.arg == "output_size"), None)
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return False
    if isinstance(value, ast.Name):
        args = flow.fn.node.args
        positional = [*args.posonlyargs, *args.args]
        named = [a.arg for a in positional[len(positional) - len(args.defaults) :]]
        defaults = dict(zip(named, args.defaults, strict=True))
        defaults.update(
            {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
        )
        default = defaults.get(value.id)
        if isinstance(default, ast.Constant) and default.value is None:
            return False
    return True


def _read(site: Site) -> bool:
    """The subscript is read: a load, or the target of an augmented assignment (`x[m] += v` reads
    `x[m]` before it writes it back; `x[m] = v` alone is an index_put, which keeps shapes)."""
    sub = site.node
    return isinstance(sub.ctx, ast.Load) or (isinstance(site.stmt, ast.AugAssign) and site.stmt.target is sub)


def _boolean_index(site: Site, flow: FunctionFlow) -> ast.expr | None:
    """The boolean mask a read subscript indexes a tensor with. The indexed value may be of unknown
    kind (`x = self.pe.forward_with_coords(p)`, `a, p, n = lmu.get_all_triplets_indices(labels)`
    then `a[mask]`): a boolean tensor indexes only a tensor (a list refuses it), so a mask that is
    surely a boolean tensor says what the value is."""
    sub = site.node
    kind = flow.kind(sub.value, site.env)
    if not _read(site) or not (kind in TENSORISH or kind is None):
        return None
    parts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    for part in parts:
        if not isinstance(part, ast.Slice) and flow.kind(part, site.env) == BOOL:
            return part
    return None


# Methods of `torch.Tensor` written in Python (torch/_tensor.py, torch 2.13): dynamo inlines them
# after a resume, so a break in their arguments does not repeat at their call (`x.split(n)`).
_PYTHON_TENSOR_METHODS = frozenset(
    {"backward", "dim_order", "eig", "index", "is_shared", "istft", "lstsq", "lu", "module_load", "norm",
     "register_hook", "register_post_accumulate_grad_hook", "reinforce", "resize", "resize_as",
     "share_memory_", "solve", "split", "stft", "storage", "storage_type", "symeig", "to_sparse_coo",
     "unflatten", "unique", "unique_consecutive"}
)  # fmt: skip
_FRAME_SKIPPING = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    *TRIES,
    # a comprehension is a loop too (its own frame on Python 3.11): torch 2.13 logs no second
    # break at a method called in one
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_OWN_FRAMES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


# Context managers dynamo carries across a graph break (grad modes, autocast): a frame resumes
# inside their block. Under any other (a user's class with `__enter__`/`__exit__`), torch 2.13
# runs the rest of the frame in eager after a break, as in a loop.
_RESUMABLE_CONTEXTS = frozenset({"no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "autocast"})


def _resumable_with(block: ast.With | ast.AsyncWith) -> bool:
    for item in block.items:
        ctx = item.context_expr
        func = ctx.func if isinstance(ctx, ast.Call) else ctx
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in _RESUMABLE_CONTEXTS:
            return False
    return True


def _in_skipping_blocks(fn: ast.AST) -> set[int]:
    """Nodes of `fn` inside a loop (a comprehension too), a `try` or a `with` of a context manager
    dynamo cannot resume in: a graph break there sends the whole frame to eager (torch 2.13:
    "graph breaks in loops are not supported"; a `try` cannot be resumed), so nothing after the
    break is traced and no second break is logged."""
    inside: set[int] = set()
    for block in walk(fn):
        if isinstance(block, _FRAME_SKIPPING) or (
            isinstance(block, (ast.With, ast.AsyncWith)) and not _resumable_with(block)
        ):
            inside.update(id(n) for n in walk(block) if n is not block)
    return inside


def _argument_breaks(call: ast.Call, dynamic: dict[int, ast.AST]) -> list[ast.AST]:
    """The data-dependent ops among the call's arguments (not its receiver), outside lambdas and
    comprehensions (frames of their own)."""
    stack: list[ast.AST] = [*call.args, *(k.value for k in call.keywords)]
    found = []
    while stack:
        node = stack.pop()
        if isinstance(node, _OWN_FRAMES):
            continue
        if id(node) in dynamic:
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def resumed_method_calls(
    sf: SourceFile, flow: FunctionFlow, dynamic: dict[int, ast.AST], rule: Rule
) -> Iterable[Finding]:
    """A tensor's method called with a data-dependent op in its arguments, on a later line
    (`h = h.masked_scatter(` with `norm(h[m])` on a line below it). Python loads the bound method
    before it evaluates the arguments; dynamo breaks at the op, and the resumed frame finds that
    builtin method on its stack and cannot call it: a second break at the method's line (gb0007,
    "Attempted to call function marked as skipped"; torch 2.13, transformers' higgs_audio_v2
    decoder layer). A call on the op's own line is the same site; a method written in Python is
    inlined; a call in a loop, a `try` or a `with` of a user's context manager is never resumed
    (the frame falls back to eager at the first break)."""
    skipping: set[int] | None = None
    for site in flow.of(ast.Call):
        call = site.node
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr in _PYTHON_TENSOR_METHODS:
            continue
        if not (call.args or call.keywords) or flow.kind(func.value, site.env) not in TENSORS:
            continue
        later = [n for n in _argument_breaks(call, dynamic) if n.lineno > func.end_lineno]
        if not later:
            continue
        if skipping is None:
            skipping = _in_skipping_blocks(flow.fn.node)
        if id(call) in skipping:
            continue
        first = min(later, key=lambda n: (n.lineno, n.col_offset))
        message = (
            f"`.{func.attr}()` is called after the data-dependent op in its arguments "
            f"(line {first.lineno}, `{describe(first, 30)}`): dynamo breaks there and the resumed graph "
            f"cannot call the tensor method it loaded before the break, so it breaks again here: {rule.message}"
        )
        at = ast.Name(
            id=func.attr,
            lineno=func.end_lineno,
            col_offset=func.end_col_offset - len(func.attr),
            end_lineno=func.end_lineno,
            end_col_offset=func.end_col_offset,
        )
        yield finding(sf, rule, at, message, path=site.path)


def data_sized_roots(sf: SourceFile, flow: FunctionFlow) -> set[int]:
    """Ids of the ops of `flow` whose output FL106 flags as sized by the data (its mask reads and
    calls): where a count the data decides starts (`count_branches.DataSized`). Made once per file
    analysis: FL102 and `sized_calls` ask for every function."""
    # Beside the flows (`dataflow.flows`), which a later round of a kept file makes anew.
    made = made_once("flows", None, lambda _: {})
    found = made.get(("data_sized_roots", id(flow)))
    if found is None:
        found = made["data_sized_roots", id(flow)] = (flow, _data_sized_roots(sf, flow))
    return found[1]


def _data_sized_roots(sf: SourceFile, flow: FunctionFlow) -> set[int]:
    ctc_modules = ctc_attributes(flow.fn.cls, sf)
    roots = {id(s.node) for s in flow.of(ast.Call) if _dynamic_call(s, flow, sf, ctc_modules) is not None}
    return roots | {id(s.node) for s in flow.of(ast.Subscript) if _boolean_index(s, flow) is not None}


@check("FL106")
def data_dependent_shapes(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        ctc_modules = ctc_attributes(flow.fn.cls, sf)
        dynamic: dict[int, ast.AST] = {}
        sized: DataSized | None = None  # what the data sizes in this function, made when first needed
        for site in flow.of(ast.Call):
            what = _dynamic_call(site, flow, sf, ctc_modules)
            if what is not None:
                dynamic[id(site.node)] = site.node
                message = f"{what} has a data-dependent output shape: {rule.message}"
                fix = first_nonzero(sf, site, flow) or second_match(sf, site, flow)
                if fix is None:
                    sized = sized or DataSized(flow.fn.node, data_sized_roots(sf, flow), sf)
                    fix = unbacked_call(sf, site, flow, sized.sized)
                yield finding(sf, rule, site.node, message, fix, path=site.path)
        for site in flow.of(ast.Subscript):
            mask = _boolean_index(site, flow)
            if mask is not None:
                dynamic[id(site.node)] = site.node
                augmented = (
                    " (`+=` and the like read it first)" if isinstance(site.node.ctx, ast.Store) else ""
                )
                message = (
                    f"indexing `{describe(site.node.value, 30)}` with boolean mask `{describe(mask, 30)}`"
                    f"{augmented} has a data-dependent output shape: {rule.message}"
                )
                fix = masked_write(sf, site, flow) or unbacked_select(sf, site, flow, mask)
                yield finding(sf, rule, site.node, message, fix, path=site.path)
        if dynamic:
            yield from resumed_method_calls(sf, flow, dynamic, rule)
