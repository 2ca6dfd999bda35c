"""FL108: constructs dynamo does not trace, whatever the values: a graph break no other rule names.

Checked against dynamo (torch 2.13): `with torch.device(...)` in a compiled function sends the
whole frame to eager (no graph); `torch.Generator(...)` ends the graph (gb0055), and so does
handing a generator object to a torch call (`torch.randn(n, generator=g)`, gb0055); a call to a
function of the same file decorated `@torch.compiler.disable` ends the graph at the call. numpy's
random draws (`np.random.randint`, `np.random.SeedSequence(...)`, ...) end the graph (gb0033,
gb0156, gb0294: torchsde's BrownianInterval draws its seeds so), and so do the methods of the
objects they make (`SeedSequence(...).generate_state(3)`, gb0008); `np.random.seed` traces.
`torch.autograd.grad` ends the graph (gb9186) whatever it differentiates. A training step's
`optimizer.step()`, `optimizer.zero_grad()`, lr scheduler `step()` and `loss.backward()` end it too
(`fuselint.source.optimizer_steps`).
`torch.nn.utils.rnn.pack_padded_sequence`, `pad_packed_sequence`, `pack_sequence` and `unpack_sequence` end it too
(gb0007, each alone; `pad_sequence` traces), and so do Python's `random.random`, `choice`,
`choices`, `sample`, `gauss`, `shuffle`, the `*variate`s, `triangular`, `getrandbits` and `randbytes`
(gb0007; `random.randint`, `randrange` and `uniform` trace).

The global generator's state read or seeded (`torch.get_rng_state()`, `torch.manual_seed`,
`torch.initial_seed`) ends the graph (gb0007 "marked as skipped", gb0208 for `initial_seed`):
reformer-pytorch's and performer-pytorch's reversible blocks record the state in every training
step (`Deterministic.record_rng`), transformers' Reformer seeds it in every training step.
`torch.seed()` traces (no break) and is not flagged. Restoring a state (`torch.set_rng_state`,
`with torch.random.fork_rng(...)`) breaks as well (gb0007, gb0208), but it is not flagged: in the
packages judged it sits in the branch of `Deterministic.forward` that only the backward's
recomputation takes (`set_rng=True` from `backward_pass`), and no compiled run reaches it
(bench/results/precision_untuned6.md: 4 findings, none a break in any run).

Calling an `nn.LSTM`, `nn.GRU` or `nn.RNN` submodule (`self.lstm = nn.LSTM(...)` in `__init__`)
ends the graph (gb0014, "Attempted to wrap RNN, GRU, or LSTM"): dynamo cannot resume after it, so
the module and the rest of the function run in eager (encodec's `EncodecLSTM`). The cells
(`nn.LSTMCell`, ...) trace fine.

`if mask is None and not is_torchdynamo_compiling(): mask = torch.ones(...)` leaves `mask` None
in compiled runs only; a later `mask[:, None]` then raises TypeError inside the graph, dynamo
gives up on it (gb0088, "Observed exception") and eager, where the default is made, runs
instead: transformers' switch_transformers and longt5 encoders. Dropping the
`not ...compiling()` test makes the compiled run do what eager does: one graph, the same
outputs for every input (eager never skipped the default). The finding sits on the use, the
line dynamo names (switch_transformers:758), and its fix edits the test above it.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.break_fixes import enter_without_bar, iterate_a_tuple, iterate_without_bar
from fuselint.source.buffer_rebinds import buffer_rebinds, made_buffers
from fuselint.source.checks import check
from fuselint.source.checks._shared import finding, has_comment
from fuselint.source.dataflow import TENSORISH, FunctionFlow, describe, flows, none_defaulted
from fuselint.source.imports import ImportTable, iter_statements
from fuselint.source.module import SourceFile
from fuselint.source.nodes import TRIES, walk
from fuselint.source.optimizer_steps import optimizer_updates
from fuselint.source.scope import ModelFunction, own_nodes

_DISABLE = ("torch.compiler.disable", "torch._dynamo.disable")
# Tests that are True only while dynamo traces (transformers wraps torch.compiler.is_compiling).
_COMPILING = ("torch.compiler.is_compiling", "torch._dynamo.is_compiling")
_COMPILING_WRAPPERS = ("is_torchdynamo_compiling",)
# The global generator's state read or seeded: dynamo skips these functions (gb0007) or cannot put
# their result in a graph (gb0208, `initial_seed`). Restoring a state (`set_rng_state`, `fork_rng`)
# breaks too, but in model code it is what recomputation in the backward does (reversible layers,
# checkpointing): a forward's branch that only the backward takes (module docstring).
_RNG_STATE = frozenset({"torch.get_rng_state", "torch.manual_seed", "torch.initial_seed",
                        "torch.random.get_rng_state", "torch.random.manual_seed",
                        "torch.random.initial_seed"})  # fmt: skip
# numpy's random draws break the graph (torch 2.13: `np.random.rand`, `randint`, `normal`, `choice`,
# `uniform` gb0033 "Data dependent operator"; `permutation`, `default_rng` gb0294; `SeedSequence(...)`
# gb0156; torchsde's BrownianInterval draws its seeds so); seeding does not.
_NUMPY_RANDOM_TRACED = frozenset({"numpy.random.seed"})
# Gradients taken inside the compiled function: gb9186 on torch 2.13, whatever the inputs (zuko's
# monotonic transforms, torchsde's `misc.vjp`).
_AUTOGRAD_GRAD = frozenset({"torch.autograd.grad"})
# tqdm's progress bars: dynamo does not trace them, and a `for` over one sends the frame to eager
# (torch 2.13: no graph at all). diffusers' `DiffusionPipeline.progress_bar` returns one and is
# marked `torch.compiler.disable` (pipeline_utils.py), so a call ends the graph (gb0099).
_BAR_MODULES = frozenset({"tqdm", "tqdm.auto", "tqdm.std", "tqdm.notebook", "tqdm.autonotebook", "tqdm.rich"})
_BAR_METHODS = frozenset({"progress_bar"})
# Packing variable-length batches for an RNN: dynamo skips these functions (gb0007 on torch 2.13,
# each alone, with lengths on the CPU or not; speechbrain's `nnet/RNN.py` helpers, torchaudio's
# Tacotron2). `pad_sequence` traces.
_PACKING = frozenset({"torch.nn.utils.rnn.pack_padded_sequence", "torch.nn.utils.rnn.pad_packed_sequence",
                      "torch.nn.utils.rnn.pack_sequence",
                      "torch.nn.utils.rnn.unpack_sequence"})  # fmt: skip
# Python's own random draws that dynamo skips (gb0007 on torch 2.13, used in a branch or as a
# value: speechbrain's `Augmenter.forward`). `random.randint`, `randrange` and `Random(...)` objects
# trace; `random.uniform` traces as a value and breaks in a branch (gb0170), FL102's case.
# The other draws of the module are skipped alike (torch 2.13, Python 3.11): normalvariate,
# getrandbits, randbytes and the other distributions' `*variate`s, `triangular`.
_PYTHON_RANDOM = frozenset({"random.random", "random.choice", "random.choices", "random.sample",
                            "random.gauss", "random.shuffle", "random.normalvariate",
                            "random.lognormvariate", "random.expovariate", "random.vonmisesvariate",
                            "random.gammavariate", "random.betavariate", "random.paretovariate",
                            "random.weibullvariate", "random.triangular", "random.getrandbits",
                            "random.randbytes"})  # fmt: skip
# Queries of torch's global settings that dynamo calls as torch ops and cannot put in a graph: each
# returns a Python value, not a tensor (gb0208 "torch.* op returned non-Tensor" on torch 2.13, used
# in an `if` or returned; asteroid's `is_tracing()` is `torch._C._is_tracing()`).
# `torch.is_inference_mode_enabled` breaks too (gb: "Encountered ... during tracing"). Others of the
# kind trace (constants to dynamo): `torch.jit.is_tracing`, `torch.jit.is_scripting`,
# `torch._C._get_tracing_state`, `torch.is_grad_enabled`, `torch.get_default_dtype`,
# `torch.is_autocast_enabled`, `torch.are_deterministic_algorithms_enabled`.
_HOST_QUERIES = frozenset({"torch._C._is_tracing", "torch._C._get_cudnn_enabled",
                           "torch._C._get_deterministic_algorithms", "torch.get_num_threads",
                           "torch._C._jit_get_tracer_state_warn", "torch.backends.cudnn.is_available",
                           "torch._C._get_graph_executor_optimize",
                           "torch.is_inference_mode_enabled"})  # fmt: skip
# Functions dynamo marks as skipped (gb0007 on torch 2.13, whatever the arguments): pickling
# (gpytorch's and linear_operator's memoizing decorators key their cache by `pickle.dumps(kwargs)`
# on every call of a decorated method) and building a sparse COO tensor (pykeen's adjacency; the
# sparse tensor then breaks every op it enters, gb0015).
_SKIPPED = frozenset({"pickle.dumps", "pickle.loads", "torch.sparse_coo_tensor"})
_RNNS = frozenset({"torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN", "torch.nn.modules.rnn.LSTM",
                   "torch.nn.modules.rnn.GRU", "torch.nn.modules.rnn.RNN"})  # fmt: skip


def _numpy_random_objects(flow: FunctionFlow, imports: ImportTable) -> dict[str, str]:
    """Names the function binds once to a numpy random object (`g = np.random.SeedSequence(...)`,
    `rng = np.random.default_rng(0)`) -> the call's qualified name."""
    found = {}
    for site in flow.of(ast.Assign):
        stmt = site.node
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        if not (isinstance(target, ast.Name) and isinstance(stmt.value, ast.Call)):
            continue
        qual = imports.qualname(stmt.value.func) or ""
        made = qual.rpartition(".")[2]
        if qual.startswith("numpy.random.") and (made[:1].isupper() or made == "default_rng"):
            if flow.assigned.get(target.id) == 1:
                found[target.id] = qual
    return found


def _on(func: ast.expr, names: dict[str, str]) -> bool:
    """`func` is a method of one of `names` (`seq.generate_state`)."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names


def _handed_generator(call: ast.Call, flow: FunctionFlow) -> bool:
    """`torch.randn(size, generator=g)` with a generator object: not a literal None, and not a
    parameter that defaults to None (`generator=None` in the signature: a compiled call passes
    one only when its caller does, and None traces)."""
    value = next((k.value for k in call.keywords if k.arg == "generator"), None)
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return False
    if isinstance(value, ast.Name) and flow.assigned.get(value.id, 0) == 1:  # the parameter only
        return value.id not in none_defaulted(flow.fn.node)
    return True


_RNN_NAMES = frozenset({"LSTM", "GRU", "RNN"})


def _string_values(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> set[str] | None:
    """Every string `name` can hold in `fn` by what the function says of it: the parameter's string
    default and the literals it is checked against (`name in ["LSTM", "GRU"]`, `name.upper() ==
    "GRU"`; upper-cased). None when some use says nothing (no check at all, a non-string default)."""
    values: set[str] = set()
    defaults = fn.args.defaults
    positional = fn.args.posonlyargs + fn.args.args
    for arg, default in zip(positional[len(positional) - len(defaults) :], defaults, strict=True):
        if arg.arg == name:
            if not (isinstance(default, ast.Constant) and isinstance(default.value, str)):
                return None
            values.add(default.value.upper())
    for node in walk(fn):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                values.add(value.value.upper())
            elif not (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("upper", "lower")
                and isinstance(value.func.value, ast.Name)
                and value.func.value.id == name
            ):
                return None  # bound to something else: what it holds is not said here
            continue
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            continue
        left = node.left
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and not left.args:
            left = left.func.value if left.func.attr in ("upper", "lower") else left
        if not (isinstance(left, ast.Name) and left.id == name):
            continue
        right = node.comparators[0]
        if isinstance(node.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
            items = right.elts
        elif isinstance(node.ops[0], ast.Eq):
            items = [right]
        else:
            continue
        if not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            return None
        values.update(i.value.upper() for i in items)
    return values or None


def _rnn_by_name(call: ast.Call, fn, imports: ImportTable) -> str | None:
    """`getattr(nn, rnn_type)(...)` where every string `rnn_type` can hold names an RNN module
    (`assert rnn_type.upper() in ["RNN", "LSTM", "GRU"]`) -> "LSTM" (or the one name it can be)."""
    built = call.func
    if not (
        isinstance(built, ast.Call)
        and isinstance(built.func, ast.Name)
        and built.func.id == "getattr"
        and len(built.args) == 2
        and imports.qualname(built.args[0]) in ("torch.nn", "torch.nn.modules.rnn")
    ):
        return None
    chosen = built.args[1]
    if isinstance(chosen, ast.Call) and isinstance(chosen.func, ast.Attribute) and not chosen.args:
        chosen = chosen.func.value if chosen.func.attr in ("upper", "lower") else chosen
    if isinstance(chosen, ast.Constant) and isinstance(chosen.value, str):
        values = {chosen.value}
    elif isinstance(chosen, ast.Name) and fn is not None:
        values = _string_values(fn, chosen.id)
    else:
        return None
    if not values or not values <= _RNN_NAMES:
        return None
    return next(iter(values)) if len(values) == 1 else "/".join(sorted(values))


def rnn_attributes(cls: ast.ClassDef | None, imports: ImportTable) -> dict[str, str]:
    """`self.X` set to an `nn.LSTM`/`nn.GRU`/`nn.RNN` anywhere in the class -> the module's name;
    also one built by name from `nn` when every name it can be is an RNN (`_rnn_by_name`)."""
    found: dict[str, str] = {}
    methods = [n for n in walk(cls) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] if cls else []
    owner = {id(node): fn for fn in methods for node in walk(fn)}
    for node in walk(cls) if cls is not None else ():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            qual = imports.qualname(node.value.func)
            by_name = _rnn_by_name(node.value, owner.get(id(node)), imports)
            if by_name is not None:
                qual = f"torch.nn.{by_name}"
            if qual in _RNNS or by_name is not None:
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                        if target.value.id == "self":
                            found[target.attr] = qual.rsplit(".", 1)[-1]
    return found


def _disabled(tree: ast.Module, imports: ImportTable) -> set[tuple[str | None, str]]:
    """(class or None, name) of the file's functions and methods decorated with
    torch.compiler.disable (with or without arguments)."""
    found = set()
    scopes: list[tuple[str | None, list[ast.stmt]]] = [(None, tree.body)]
    scopes += [(n.name, n.body) for n in iter_statements(tree) if isinstance(n, ast.ClassDef)]
    for owner, body in scopes:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in stmt.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if imports.qualname(target) in _DISABLE:
                        found.add((owner, stmt.name))
    return found


def _callee(func: ast.expr, cls: ast.ClassDef | None) -> tuple[str | None, str] | None:
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return (cls.name if cls is not None else None), func.attr
    return None


@check("FL108")
def untraceable_construct(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    disabled = _disabled(sf.tree, sf.imports)
    rnns: dict[int, dict[str, str]] = {}
    barred: set[int] = set()
    mentions_rnn = any(word in sf.text for word in ("LSTM", "GRU", "RNN"))
    retries = "TypeError" in sf.text  # each check below walks every function: skip it when it cannot fire
    draws = "random" in sf.text
    compiling = "compiling" in sf.text  # every test `_is_compiling_call` knows spells the word
    updates = any(word in sf.text for word in (".step(", ".zero_grad(", ".backward("))
    buffers: dict[int, dict] = {}  # the `nn.Buffer` attributes of each class
    for flow in flows(functions, sf.imports):
        if compiling:
            yield from compile_only_defaults(sf, flow.fn.node, rule)
        yield from comprehension_frames(sf, flow, rule)
        cls = flow.fn.cls
        if id(cls) not in rnns:
            rnns[id(cls)] = rnn_attributes(cls, sf.imports) if mentions_rnn else {}
        yield from _rnn_calls(sf, flow, rnns[id(cls)], rule)
        if cls is not None and "Buffer(" in sf.text:
            if id(cls) not in buffers:
                buffers[id(cls)] = made_buffers(sf, cls)
            yield from buffer_rebinds(sf, flow, buffers[id(cls)], rule)
        if retries:
            yield from type_error_retries(sf, flow, rule)
        if draws:
            yield from python_random_tensor_bounds(sf, flow, rule)
        if updates:
            yield from optimizer_updates(sf, flow, rule)
        for site in flow.of(ast.With, ast.AsyncWith):
            for item in site.node.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and sf.imports.qualname(expr.func) == "torch.device":
                    message = (
                        "`with torch.device(...)` in compiled code: the whole frame runs in eager; "
                        "pass `device=` to the factory calls instead"
                    )
                    yield finding(sf, rule, expr, message, path=site.path)
        yield from _loops_over_bars(sf, flow, disabled, rule, barred)
        yield from _bars_entered(sf, flow, disabled, rule, barred)
        numpy_random = _numpy_random_objects(flow, sf.imports)
        for site in flow.of(ast.Call):
            func = site.node.func
            qual = sf.imports.qualname(func)
            if id(site.node) in barred:
                continue
            if qual == "torch.Generator":
                message = f"`torch.Generator(...)` in compiled code: {rule.message} (gb0055)"
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual is not None and qual.startswith("numpy.random.") and qual not in _NUMPY_RANDOM_TRACED:
                message = (
                    f"`{qual}` in compiled code: dynamo does not trace numpy's random draws and breaks the "
                    "graph here (gb0033; gb0156, gb0294 for its generator objects); draw with torch "
                    "(`torch.rand`, `torch.randint`) or outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual is not None and qual.startswith("torch.") and _handed_generator(site.node, flow):
                message = (
                    f"`{qual}(..., generator=...)` in compiled code: dynamo cannot put a "
                    "`torch.Generator` object in the graph and breaks here (gb0055); draw from the "
                    "global generator, or outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _AUTOGRAD_GRAD:
                message = (
                    "`torch.autograd.grad` in compiled code: dynamo does not trace it and breaks the graph "
                    "here (gb9186); take the gradient outside the compiled function, or compile the "
                    "function it differentiates"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _PYTHON_RANDOM:
                message = (
                    f"`{qual}` in compiled code: dynamo skips Python's random draws and breaks the graph "
                    "here (gb0007); draw with torch (`torch.rand`, `torch.randint`, `torch.randperm`) or "
                    "outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _SKIPPED:
                message = (
                    f"`{qual}` in compiled code: dynamo skips it and breaks the graph here (gb0007); "
                    "call it outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _PACKING:
                message = (
                    f"`{qual.rpartition('.')[2]}` in compiled code: dynamo does not trace packed sequences "
                    "and breaks the graph here (gb0007); run the RNN on the padded batch with a mask, "
                    "or pack outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif _on(func, numpy_random):
                message = (
                    f"`{func.value.id}` is numpy's random object (`{numpy_random[func.value.id]}`): dynamo "
                    "skips its methods and breaks the graph here (gb0008)"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _HOST_QUERIES:
                message = (
                    f"`{qual}()` in compiled code: dynamo calls it as a torch op that returns a Python "
                    "value, not a tensor, and breaks the graph here (gb0208); read it once outside the "
                    "compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual in _RNG_STATE:
                message = (
                    f"`{qual}` in compiled code: dynamo does not trace the global generator's state and "
                    "breaks the graph here; record or restore it outside the compiled function"
                )
                yield finding(sf, rule, site.node, message, path=site.path)
            elif qual is None and _callee(func, flow.fn.cls) in disabled:
                name = _callee(func, flow.fn.cls)[1]
                message = f"`{name}` is marked torch.compiler.disable: {rule.message} at the call"
                yield finding(sf, rule, site.node, message, path=site.path)


def _is_bar(call: ast.Call, sf: SourceFile, cls: ast.ClassDef | None, disabled: set) -> bool:
    """`tqdm(...)`, or a `progress_bar(...)` method: one of this file's must be marked disabled,
    one inherited from another file (diffusers' pipelines) is taken by its name."""
    module, _, name = (sf.imports.qualname(call.func) or "").rpartition(".")
    if module in _BAR_MODULES and name == "tqdm":
        return True
    callee = _callee(call.func, cls)
    if not (isinstance(call.func, ast.Attribute) and callee is not None and callee[1] in _BAR_METHODS):
        return False
    own = cls is not None and any(
        isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == callee[1] for s in cls.body
    )
    return not own or callee in disabled


def _bars_entered(
    sf: SourceFile, flow: FunctionFlow, disabled: set, rule: Rule, barred: set[int]
) -> Iterable[Finding]:
    """FL108 for `with <bar>(total=n) as bar:` whose body calls `bar.update()`: dynamo skips the
    disabled call (gb0099) and, in a `with` header, cannot resume in the block. Fixed where every
    read of `bar` in the function is a statement `bar.m(...)` of the block (each is guarded)."""
    for site in flow.of(ast.With):
        for item in site.node.items:
            call, target = item.context_expr, item.optional_vars
            if not isinstance(call, ast.Call) or not _is_bar(call, sf, flow.fn.cls, disabled):
                continue
            barred.add(id(call))
            message = (
                f"`{sf.segment(call.func)}(...)` enters a progress bar, which dynamo does not trace: the "
                "graph ends here (gb0099 for a `torch.compiler.disable`d bar), and a `with` block it "
                "cannot resume in runs the frame in eager"
            )
            fix = None
            if len(site.node.items) == 1 and isinstance(target, ast.Name):
                uses = _bar_statements(site.node, target.id, flow)
                fix = enter_without_bar(sf, call, uses) if uses is not None else None
            yield finding(sf, rule, call, message, fix, path=site.path)


def _bar_statements(block: ast.With, name: str, flow: FunctionFlow) -> list[ast.Expr] | None:
    """The statements `name.m(...)` of the block, when they are every read of `name` in the
    function and the block's target is its only binding; else None."""
    if flow.assigned.get(name) != 1:
        return None
    uses: list[ast.Expr] = []
    for node in ast.walk(block):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id == name
        ):
            uses.append(node)
    if flow.loaded.get(name, 0) != len(uses):
        return None  # read elsewhere too (`bar.update(bar.n)`, `return bar`, after the block)
    if not all(_only_reads(node.value, flow) for node in uses):
        return None  # the guard would skip work of its arguments (`bar.set_postfix(loss=self.step(x))`)
    return sorted(uses, key=lambda n: (n.lineno, n.col_offset))


# What a guarded `bar.m(...)`'s arguments may hold: reads of values, which skipping changes nothing
# of the model's (a call, a walrus, an `await` may do work or bind a name that the rest reads).
_READS = (
    ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.BinOp, ast.UnaryOp,
    ast.BoolOp, ast.Compare, ast.IfExp, ast.JoinedStr, ast.FormattedValue, ast.Tuple, ast.List,
    ast.Dict, ast.Set, ast.Starred, ast.keyword, ast.expr_context, ast.operator, ast.unaryop,
    ast.boolop, ast.cmpop,
)  # fmt: skip
# Calls that only read: a tensor's value on the host, and builtins that convert or measure.
_READING_METHODS = frozenset({"item", "tolist"})
_READING_BUILTINS = frozenset({"len", "int", "float", "str", "round", "abs", "min", "max"})


def _only_reads(call: ast.Call, flow: FunctionFlow) -> bool:
    """Whether the arguments of `call` (a statement `bar.m(...)`) only read values."""
    for arg in (*call.args, *call.keywords):
        for node in walk(arg):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in _READING_METHODS and not node.args:
                    continue
                if (
                    isinstance(func, ast.Name)
                    and func.id in _READING_BUILTINS
                    and func.id not in flow.assigned
                    and func.id not in flow.imports.aliases
                    and func.id not in flow.imports.functions
                ):
                    continue
                return False
            if not isinstance(node, _READS):
                return False
    return True


def _bar_iterable(call: ast.Call, sf: SourceFile, cls: ast.ClassDef | None, disabled: set) -> str | None:
    """The source of the iterable a progress-bar call wraps (`tqdm(ts, desc=...)` -> "ts",
    `trange(n)` -> "range(n)"), or None when `call` is not a bar over an iterable."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    module, _, name = (sf.imports.qualname(call.func) or "").rpartition(".")
    if module in _BAR_MODULES and name == "trange":
        return f"range({', '.join(sf.segment(a) for a in call.args)})" if call.args else None
    callee = _callee(call.func, cls)
    if module in _BAR_MODULES and name == "tqdm":
        pass
    elif isinstance(call.func, ast.Attribute) and callee is not None and callee[1] in _BAR_METHODS:
        # A `progress_bar` of this file must be marked disabled; one inherited from another file
        # (diffusers' pipelines) is taken by its name.
        own = cls is not None and any(
            isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == callee[1] for s in cls.body
        )
        if own and callee not in disabled:
            return None
    else:
        return None
    given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "iterable"), None)
    return None if given is None else sf.segment(given)


def _loops_over_bars(
    sf: SourceFile, flow: FunctionFlow, disabled: set, rule: Rule, barred: set[int]
) -> Iterable[Finding]:
    """FL108 for `for t in <bar>(ts):` (or `enumerate(<bar>(ts))`), with a fix that iterates `ts`
    while compiling; the calls found go into `barred` (one finding per call)."""
    for site in flow.of(ast.For):
        call = site.node.iter
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "enumerate":
            if "enumerate" in sf.imports.aliases or not call.args:
                continue
            call = call.args[0]
        if not isinstance(call, ast.Call):
            continue
        iterable = _bar_iterable(call, sf, flow.fn.cls, disabled)
        if iterable is None:
            continue
        barred.add(id(call))
        message = (
            f"`{sf.segment(call.func)}(...)` wraps the loop's iterable in a progress bar, which dynamo does not "
            "trace: the graph ends at the loop (gb0099 for a `torch.compiler.disable`d bar), or the whole "
            "frame runs in eager"
        )
        yield finding(sf, rule, call, message, iterate_without_bar(sf, call, iterable), path=site.path)


def _rnn_calls(sf: SourceFile, flow: FunctionFlow, rnns: dict[str, str], rule: Rule) -> Iterable[Finding]:
    """FL108 for the first touch of `self.lstm` in a function whose class set `self.lstm = nn.LSTM(...)`.

    dynamo fails on wrapping the module itself, so the break is where the function first reads the
    attribute (`assert self.lstm is not None` in torch_geometric's JumpingKnowledge), usually the
    call; one finding per function, as the rest of the function runs in eager anyway."""
    if not rnns:
        return
    touches = [
        site
        for site in flow.of(ast.Attribute)
        if isinstance(site.node.value, ast.Name)
        and site.node.value.id == "self"
        and site.node.attr in rnns
        and isinstance(site.node.ctx, ast.Load)
    ]
    if not touches:
        return
    site = min(touches, key=lambda s: (s.node.lineno, s.node.col_offset))
    attr = site.node.attr
    message = (
        f"`self.{attr}` is an `nn.{rnns[attr]}`: dynamo does not trace RNN, GRU or LSTM modules (gb0014); "
        "the graph ends where the function first touches it, and the module and the rest of the function "
        "run outside the graph, in eager"
    )
    yield finding(sf, rule, site.node, message, path=site.path)


def _is_compiling_call(expr: ast.expr, imports: ImportTable) -> bool:
    if not (isinstance(expr, ast.Call) and not expr.args and not expr.keywords):
        return False
    qual = imports.qualname(expr.func) or ""
    name = expr.func.id if isinstance(expr.func, ast.Name) else qual.rsplit(".", 1)[-1]
    return qual in _COMPILING or name in _COMPILING_WRAPPERS


def _compile_only_default(stmt: ast.If, imports: ImportTable) -> tuple[str, ast.expr] | None:
    """(`x`, the `not ...compiling()` operand) of `if x is None and not ...compiling(): x = ...`."""
    test = stmt.test
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)) or stmt.orelse:
        return None
    names = [
        v.left.id
        for v in test.values
        if isinstance(v, ast.Compare)
        and isinstance(v.left, ast.Name)
        and len(v.ops) == 1
        and isinstance(v.ops[0], ast.Is)
        and isinstance(v.comparators[0], ast.Constant)
        and v.comparators[0].value is None
    ]
    skips = [
        v
        for v in test.values
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) and _is_compiling_call(v.operand, imports)
    ]
    if len(names) != 1 or len(skips) != 1:
        return None
    assigns = any(
        isinstance(t, ast.Name) and t.id == names[0]
        for s in stmt.body
        if isinstance(s, ast.Assign)
        for t in s.targets
    )
    return (names[0], skips[0]) if assigns else None


def _checks_none(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Compare) and any(
        isinstance(side, ast.Name) and side.id == name for side in (node.left, *node.comparators)
    )


def _tested(nodes: list[ast.AST], name: str) -> bool:
    """A comparison with `name`, or `if name`: the code may expect it to be None."""
    return any(_checks_none(n, name) for n in nodes) or any(
        isinstance(n, (ast.If, ast.IfExp, ast.While)) and isinstance(n.test, ast.Name) and n.test.id == name
        for n in nodes
    )


Helpers = dict[str, ast.FunctionDef]  # the file's module-level functions by name


def _unguarded_use(later: list[ast.stmt], name: str, helpers: Helpers, depth: int = 0) -> ast.AST | None:
    """The first `name[...]` or `name.attr` in the statements after the default, or the call that
    hands `name` to a module-level function of the file that uses it so (up to three calls deep);
    None when a test on `name` or a new value for it comes first (then None may be meant)."""
    for stmt in later:
        if isinstance(stmt, (ast.If, ast.While)):
            # The test runs first: a use there comes before any new value in the body.
            found = _unguarded_use([ast.Expr(stmt.test)], name, helpers, depth)
            if found is not None:
                return found
        nodes = list(walk(stmt))
        if _tested(nodes, name):
            return None
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in nodes):
            return None
        for n in nodes:
            if (
                isinstance(n, (ast.Subscript, ast.Attribute))
                and isinstance(n.value, ast.Name)
                and n.value.id == name
            ):
                return n
            if depth < 3 and isinstance(n, ast.Call) and _hands_on(n, name, helpers, depth):
                return n
    return None


def _hands_on(call: ast.Call, name: str, helpers: Helpers, depth: int) -> bool:
    """`call` passes `name` positionally to a helper of the file whose parameter is then used unguarded."""
    helper = helpers.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if helper is None:
        return False
    params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
    for param, arg in zip(params, call.args, strict=False):
        if isinstance(arg, ast.Name) and arg.id == name:
            return _unguarded_use(helper.body, param, helpers, depth + 1) is not None
    return False


def _blocks(fn: ast.AST) -> Iterable[list[ast.stmt]]:
    for node in walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def compile_only_defaults(sf: SourceFile, flow_fn: ast.AST, rule: Rule) -> Iterable[Finding]:
    """FL108 findings for a default skipped only while compiling and then used as a tensor."""
    helpers = {n.name: n for n in sf.tree.body if isinstance(n, ast.FunctionDef)}
    for block in _blocks(flow_fn):
        for i, stmt in enumerate(block):
            if not isinstance(stmt, ast.If):
                continue
            found = _compile_only_default(stmt, sf.imports)
            if found is None:
                continue
            name, skip = found
            use = _unguarded_use(block[i + 1 :], name, helpers)
            if use is None:
                continue
            # The finding sits on the use, where dynamo reports the break; the fix edits the test.
            message = (
                f"`{name}` keeps its None default only while compiling (line {stmt.lineno}: "
                f"`{sf.segment(skip)}`), and this line uses it: the compiled run raises TypeError here, "
                "dynamo gives up on the graph (gb0088) and eager runs instead"
            )
            fix = None
            if not has_comment(sf, stmt.test):
                kept = [v for v in stmt.test.values if v is not skip]
                text = " and ".join(sf.segment(v) for v in kept)
                fix = Fix(
                    Applicability.SAFE,
                    f"make the default in compiled runs too: drop `{sf.segment(skip)}`",
                    (sf.replace(stmt.test, text),),
                )
            yield finding(sf, rule, use, message, fix)


# ---------------------------------------------------------------- comprehensions as frames of their own

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp)
# Iterators dynamo accepts as a frame's input (measured, torch 2.13): a tuple's and a range's.
_FRAME_SAFE_ITERABLES = ("tuple", "range")
_BUILTINS = frozenset(dir(builtins))


def _top_names(stmt: ast.stmt) -> set[str]:
    """Names a module-level statement binds (defs, classes, imports, assignments)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {n.id for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _bound_names(fn: ast.AST, nodes: list[ast.AST]) -> set[str]:
    """Parameters and names the function assigns: what a nested frame can see through a cell."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _calls_what_it_is_handed(try_node: ast.AST, handed: set[str]) -> bool:
    """The `try` body calls a parameter of the function or of a def around it (`func(*args)` in a
    decorator's wrapper): whatever that callable runs may break the graph inside the `try`."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in handed
        for stmt in try_node.body
        for n in walk(stmt)
    )


def _frame_safe(iterable: ast.expr, shadowed: set[str]) -> bool:
    if isinstance(iterable, ast.Tuple):
        return True
    func = iterable.func if isinstance(iterable, ast.Call) else None
    return isinstance(func, ast.Name) and func.id in _FRAME_SAFE_ITERABLES and func.id not in shadowed


def comprehension_frames(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """A list/set/dict comprehension in a function with a `try` around calls (a decorator's
    wrapper: `try: out = func(*args) finally: ...`). A graph break inside that `try` cannot be
    resumed, so dynamo runs the whole frame in eager (torch 2.13, `should_compile_partial_graph`).
    Up to Python 3.11 a comprehension is a frame of its own, called with an iterator over its
    first iterable; when it can see a module or a tensor (through `self`, an argument, a local,
    or `torch`), dynamo tries to start that frame and breaks again (gb4347, "Missing
    tp_iternext"): it takes no iterator as a frame's input but a tuple's or a range's."""
    comprehensions = flow.of(*_COMPREHENSIONS)
    if not comprehensions:
        return
    fn = flow.fn.node
    nodes = own_nodes(fn)  # a nested def is a frame of its own, with its own `try`s
    tries = [t for t in nodes if isinstance(t, TRIES)]
    if not tries:
        return
    bound = _bound_names(fn, nodes)
    module_level = {name for stmt in sf.tree.body for name in _top_names(stmt)}
    loaded = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    handed = params | {n for n in loaded - bound - module_level if n not in _BUILTINS}
    if not any(_calls_what_it_is_handed(t, handed) for t in tries):
        return
    visible = bound | {sf.imports.local_name_for("torch") or "torch"}
    own = {id(n) for n in nodes}
    for site in comprehensions:
        comp = site.node
        if id(comp) not in own:
            continue
        if _frame_safe(comp.generators[0].iter, bound):
            continue
        targets = {n.id for g in comp.generators for n in walk(g.target) if isinstance(n, ast.Name)}
        # The first iterable is read in the enclosing frame: the comprehension's frame gets its iterator.
        outside = {id(n) for n in walk(comp.generators[0].iter)}
        reads = {
            n.id
            for n in walk(comp)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in outside
        }
        seen = sorted((reads - targets) & visible, key=lambda name: (name != "self", name))
        if not seen:
            continue
        message = (
            f"this comprehension is a frame of its own (Python 3.11 and older) that sees `{seen[0]}`: "
            f"when a graph break inside `{fn.name}`'s `try` sends the frame to eager, dynamo starts "
            "the comprehension's frame and cannot iterate its input (gb4347, Missing tp_iternext)"
        )
        fix = None if has_comment(sf, comp.generators[0].iter) else iterate_a_tuple(sf, comp, bound)
        yield finding(sf, rule, comp, message, fix, path=site.path)


def _catches_type_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id == "TypeError" for n in names)


def type_error_retries(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """`try: x = layer(x, lengths=lens)` / `except TypeError: x = layer(x)`: a call retried with other
    arguments when the first ones do not bind. dynamo cannot raise the TypeError of a failed binding
    inside the graph: where the callee does not take the arguments it breaks the graph at the call
    (gb7312, "failed to bind arguments when attempting to inline"; a torch op sends the whole frame
    to eager). A TypeError that the callee itself raises traces (torch 2.13)."""
    tries = [n for n in walk(flow.fn.node) if isinstance(n, TRIES)]
    if not tries:
        return
    calls = {id(site.node): site for site in flow.of(ast.Call)}  # the live calls, with their paths
    for node in tries:
        handlers = [h for h in node.handlers if h.type is not None and _catches_type_error(h)]
        retried = {ast.dump(n.func) for h in handlers for n in walk(h) if isinstance(n, ast.Call)}
        if not retried:
            continue
        for stmt in node.body:
            site = next(
                (
                    calls[id(n)]
                    for n in walk(stmt)
                    if isinstance(n, ast.Call) and id(n) in calls and ast.dump(n.func) in retried
                ),
                None,
            )
            if site is not None:
                call = site.node
                message = (
                    f"`{describe(call.func, 40)}(...)` retried under `except TypeError`: where its arguments "
                    "do not bind, dynamo cannot raise the TypeError inside the graph and breaks here "
                    "(gb7312); give the callees one signature (`forward(self, x, lengths=None)`), or choose "
                    "the call once in `__init__` from `inspect.signature`"
                )
                yield finding(sf, rule, call, message, path=site.path)
                break


# Python's draws that dynamo traces while their bounds are Python numbers (`_PYTHON_RANDOM` holds
# those it never traces).
_PYTHON_RANDOM_BOUNDED = frozenset({"random.randint", "random.randrange", "random.uniform"})


def python_random_tensor_bounds(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """`random.randint(0, n)` with `n` a tensor (`n = torch.randint(...)`): dynamo traces
    `randint`, `randrange` and `uniform` on Python numbers, and skips them (gb0007) when a bound is
    a tensor (torch 2.13)."""
    for site in flow.of(ast.Call):
        call = site.node
        if sf.imports.qualname(call.func) not in _PYTHON_RANDOM_BOUNDED:
            continue
        bound = next(
            (
                a
                for a in (*call.args, *(k.value for k in call.keywords))
                if flow.kind(a, site.env) in TENSORISH
            ),
            None,
        )
        if bound is not None:
            message = (
                f"`{describe(call, 50)}` draws with a tensor bound (`{describe(bound, 30)}`): dynamo "
                "traces Python's `random` only on Python numbers and breaks the graph here (gb0007); "
                "keep the bound a Python int, or draw with torch from the tensor "
                "(`(torch.rand(()) * (n + 1)).long()` for `randint(0, n)`)"
            )
            yield finding(sf, rule, call, message, path=site.path)
