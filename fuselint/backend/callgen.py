"""One generated Python function per compiled graph, so a call costs what its launches cost.

The compiled FX graph calls each kernel through :class:`~fuselint.backend.runtime.FusedKernel`,
which checks every input's strides and alignment, allocates its outputs and launches, all
per kernel and per call; ATen ops go through ``OpOverload.__call__``. After the graph's first
call (kernels JIT-compiled, fast launchers built), :class:`GraphRunner` writes the graph out
as straight-line Python: each kernel's launch with its grid, binary handle and constexprs
baked in and its outputs allocated from precomputed (shape, stride, dtype); each ATen op
through torch's generated binding where that binding can only mean the op's overload (as
Inductor's extern calls go), else through the OpOverload's C entry point; each value freed
after its last use, as FX's code does.

What each call still checks, so a call never computes the wrong thing:
- once, at the top: no launch hook is installed (a profiler's hooks see every launch through
  Triton's launcher), cuDNN is still enabled where a convolution goes to it directly, and
  every graph input that a kernel compiled for 16-byte-aligned pointers reads is aligned;
  else the whole call runs the FX graph. Parameters and buffers (AOTAutograd's static
  inputs) aligned when compiled are not checked: they keep their storage between calls, as
  Inductor assumes too;
- per kernel, the strides of inputs that ATen computed in this call (the graph's guards fix
  its inputs' strides, kernels write the strides they were built for, but an extern op may
  lay out its result otherwise than its fake tensor said): a mismatch sends that kernel
  through its FusedKernel, which falls back to ATen.

A 2-d convolution without bias on CUDA tensors, for which ATen would pick cuDNN, calls
``aten.cudnn_convolution`` itself with the call's cuDNN flags: what ``aten.convolution`` ends
in, without its two dispatches and backend selection (3-7 µs of host per convolution on the
H100 machine, a tenth of ResNet-50's call). For float32 the TF32 flag is the convolution's own
(``torch.backends.cudnn.conv.fp32_precision``), resolved per call as ATen resolves it.

``FUSELINT_FAST_LAUNCH=0`` (no fast launchers) leaves every call on the FX graph;
``FUSELINT_REUSE_BUFFERS=0`` gives every kernel output its own allocation;
``FUSELINT_IN_PLACE=0`` stores no kernel output into the storage of an input that dies with it.
"""

from __future__ import annotations

import logging
import math
import operator
import os
from collections.abc import Callable, Iterable

import torch
import torch.fx

from fuselint.backend import runtime
from fuselint.backend.ops import HALF
from fuselint.backend.runtime import FusedKernel
from fuselint.graph.aliasing import aliases_input, storage_root, view_base

log = logging.getLogger("fuselint.backend")

_PLAIN = (bool, int, str, type(None))


class _Writer:
    """Source lines and the objects they name (bound as the function's globals)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, object] = {}
        self._ids: dict[int, str] = {}

    def ref(self, obj: object, hint: str) -> str:
        """A global name for `obj` (one per object)."""
        key = id(obj)
        if key not in self._ids:
            name = f"_{hint}{len(self._ids)}"
            self._ids[key] = name
            self.globals[name] = obj
        return self._ids[key]

    def literal(self, value: object, names: dict[str, str]) -> str:
        if isinstance(value, torch.fx.Node):
            return names[value.name]
        if isinstance(value, _PLAIN):
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if isinstance(value, tuple):
            inner = ", ".join(self.literal(v, names) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.literal(v, names) for v in value) + "]"
        return self.ref(value, "c")


def _last_uses(
    nodes: list[torch.fx.Node], roots: dict[str, torch.fx.Node] | None = None
) -> dict[str, list[str]]:
    """Node name -> the values whose last reader it is (freed right after it). `roots`: views
    made from the root of their view chain (node name -> root), which they read too."""
    roots = roots or {}
    last: dict[str, str] = {}
    for n in nodes:
        for a in n.all_input_nodes:
            last[a.name] = n.name
        if n.name in roots:
            last[roots[n.name].name] = n.name
    freed: dict[str, list[str]] = {}
    for value, reader in last.items():
        freed.setdefault(reader, []).append(value)
    return freed


def _aten_entry(target: object, kwargs: Iterable[str] = ()) -> object:
    """What the call function calls for an op given `kwargs` by name: torch's generated Python
    binding of an ATen op where it can only mean this overload (`_binding`); else the C function
    behind an OpOverload (skips its Python ``__call__``); the Python body of one of fuselint's
    own custom ops (skips the dispatcher and torch.library's wrapper); else the target."""
    if not isinstance(target, torch._ops.OpOverload):
        return target
    if target.namespace == "fuselint" and target.name() in runtime.DIRECT_IMPLS:
        return runtime.DIRECT_IMPLS[target.name()]
    # a binding names the schema's `self` `input`: an op given either by name keeps its entry
    binding = None if {"self", "input"} & set(kwargs) else _binding(target)
    if binding is not None:
        return binding
    op = getattr(target, "_op", None)
    return op if callable(op) else target


_TENSOR_RETURNS = frozenset({"Tensor", "Tensor[]"})


def _misparsed(arg: torch.Argument) -> bool:
    """Whether a binding's parser reads schema argument `arg` otherwise than the OpOverload
    (`_binding`)."""
    return str(arg.real_type) == "List[Optional[Tensor]]" or (
        arg.name == "reduction" and arg.has_default_value()
    )


def _binding(target: torch._ops.OpOverload) -> Callable | None:
    """The binding ``torch._C._VariableFunctions.<name>`` of an ``aten`` op's default overload
    when the op has no overload but its ``out=`` form, so that the binding, called without
    ``out=``, resolves to this overload, and returns only tensors; else None.

    A binding parses its arguments with torch's generated parser, which costs the host less than
    the OpOverload's C entry, which matches them against the schema at run time: 3.3 against
    6.9 µs for a convolution on the CPU machine, a tenth of a ResNet-50 call's host time in its
    53 convolutions. Its results differ where the schema returns a number: the binding wraps an
    int in a tensor (cuDNN attention's `max_q` comes back as a 0-d tensor), so such ops keep the
    OpOverload's entry. Its parser reads two kinds of argument otherwise than the schema: a
    ``Tensor?[]`` as a list of tensors, refusing a None in it (`_unsafe_masked_index`'s indices),
    and the default ``reduction=at::Reduction::Mean`` of the losses as 0, 'none' (an FX node
    leaves the mean out); ops with either keep the OpOverload's entry too
    (tests/backend/test_backend_bindings.py runs every admitted op through both)."""
    if target.namespace != "aten" or target._overloadname != "default":
        return None
    if not all(str(r.type) in _TENSOR_RETURNS for r in target._schema.returns):
        return None
    if any(_misparsed(a) for a in target._schema.arguments):
        return None
    packet = target.overloadpacket
    if not set(packet.overloads()) <= {"default", "out"}:
        return None
    return getattr(torch._C._VariableFunctions, packet.__name__, None)


def _produced_by_aten(node: torch.fx.Node) -> bool:
    """Whether `node`'s value comes from an ATen op run in this call (not a graph input, a
    constant, or a kernel's output)."""
    while node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    if node.op != "call_function":
        return False
    return not isinstance(node.target, FusedKernel)


# ATen ops whose result is always a tensor of its own, at the start of its storage: the caching
# allocator hands out 512-byte aligned blocks, so such a result needs no alignment check.
_NEW_STORAGE = {
    torch.ops.aten.convolution.default,
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten.baddbmm.default,
}


def _new_storage(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in _NEW_STORAGE


# Matmuls called through torch's generated Python bindings (what Inductor's extern calls are): the
# OpOverload's C entry parses its arguments against the schema at run time, about 0.3-0.6 µs more
# per call on the CPU machine. The binding of the same name runs the same ATen op; each one here
# takes the overload's arguments as they are (positional, beta and alpha by keyword) and `out=`,
# through which the matmul writes into a dead buffer of its layout instead of a new allocation.
_MATMUL_BINDINGS = {
    torch.ops.aten.mm.default: torch.mm,
    torch.ops.aten.addmm.default: torch.addmm,
    torch.ops.aten.bmm.default: torch.bmm,
    torch.ops.aten.baddbmm.default: torch.baddbmm,
}


def _new_buffer(w: _Writer, spec: tuple) -> str:
    """An expression allocating a tensor of `spec` (shape, stride, dtype, device), a kernel's
    output or a matmul's: through `runtime.cuda_allocator` on a CUDA device where there is one,
    else through torch.empty_strided."""
    shape, stride, dtype, device = (tuple(spec[0]), tuple(spec[1]), *spec[2:])
    alloc = runtime.cuda_allocator() if device.type == "cuda" else None
    if alloc is not None:
        return f"{w.ref(alloc, 'alloc')}({shape!r}, {stride!r}, {w.ref(dtype, 'dt')})"
    empty = w.ref(torch.empty_strided, "empty")
    return f"{empty}({shape!r}, {stride!r}, dtype={w.ref(dtype, 'dt')}, device={w.ref(device, 'dev')})"


def _matmul_spec(node: torch.fx.Node) -> tuple | None:
    """(shape, stride, dtype, device) of a matmul's result, when it is one of `_MATMUL_BINDINGS`
    with a static contiguous result (what ATen allocates for it), else None."""
    if node.op != "call_function" or node.target not in _MATMUL_BINDINGS:
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(type(d) is int for d in (*val.shape, *val.stride())):
        return None
    if not val.is_contiguous() or val.storage_offset() != 0:
        return None
    return tuple(val.shape), tuple(val.stride()), val.dtype, val.device


def _known_strides(node: torch.fx.Node) -> tuple | None:
    """The strides `node`'s value has on every call, known before running it: a graph input's
    (dynamo guards them), a constant's, a kernel output's (allocated so); None for values
    ATen computes."""
    if node.op in ("placeholder", "get_attr"):
        val = node.meta.get("val")
        return tuple(val.stride()) if isinstance(val, torch.Tensor) else None
    if node.op == "call_function" and node.target is operator.getitem:
        src, index = node.args
        if isinstance(src, torch.fx.Node) and isinstance(src.target, FusedKernel):
            return tuple(src.target.out_specs[index][1])
    return None


def _same_layout(shape: tuple, got: tuple, want: tuple) -> bool:
    """Strides that index a tensor of `shape` the same way (size-1 dims may differ)."""
    return all(n == 1 or a == b for n, a, b in zip(shape, got, want, strict=True))


# FUSELINT_REUSE_BUFFERS=0 gives every kernel output its own allocation (for comparison);
# FUSELINT_IN_PLACE=0 keeps the pool of dead buffers but stores no output into its input.
REUSE_BUFFERS = os.environ.get("FUSELINT_REUSE_BUFFERS", "1") != "0"
IN_PLACE = os.environ.get("FUSELINT_IN_PLACE", "1") != "0"


def _lifetimes(nodes: list[torch.fx.Node]) -> tuple[dict[str, str], dict[str, int], set[str]] | None:
    """(root, last, escaping) of the graph's values: the value whose storage each one shares
    (views and ops that may hand their input back lead to it), the position of the last node
    that reads each root's storage, and the roots the graph returns. None when the graph
    mutates anything (no storage is then handed on)."""
    position = {n.name: i for i, n in enumerate(nodes)}
    for n in nodes:
        target = n.target if n.op == "call_function" else None
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            return None
    root: dict[str, str] = {}
    for n in nodes:
        a = aliases_input(n)
        root[n.name] = root.get(a.name, a.name) if a is not None else n.name
    last: dict[str, int] = {}
    escaping: set[str] = set()
    for n in nodes:
        for a in n.all_input_nodes:
            r = root.get(a.name, a.name)
            if n.op == "output":
                escaping.add(r)
            last[r] = max(last.get(r, -1), position[n.name])
    return root, last, escaping


def _single_items(nodes: list[torch.fx.Node]) -> set[str]:
    """Kernel output items (getitem nodes) that are the only item node of their output."""
    items: dict[tuple[str, object], list[str]] = {}
    for n in nodes:
        if (
            n.op == "call_function"
            and n.target is operator.getitem
            and isinstance(n.args[0], torch.fx.Node)
            and isinstance(n.args[0].target, FusedKernel)
        ):
            items.setdefault((n.args[0].name, n.args[1]), []).append(n.name)
    return {names[0] for names in items.values() if len(names) == 1}


def _reuse_plan(nodes: list[torch.fx.Node]) -> dict[str, int]:
    """Kernel outputs (getitem nodes) whose storage can be handed to a later kernel's output:
    name -> the position after which nothing reads that storage any more (no view of it, no
    alias, no graph output). Empty when the graph mutates anything."""
    lives = _lifetimes(nodes)
    if lives is None:
        return {}
    root, last, escaping = lives
    single = _single_items(nodes)
    return {
        n.name: last[n.name]
        for n in nodes
        if (n.name in single or _matmul_spec(n) is not None)
        and root[n.name] == n.name
        and n.name not in escaping
        and n.name in last
    }


def _in_place_plan(nodes: list[torch.fx.Node]) -> dict[str, dict[int, int]]:
    """Kernels that store an output into the storage of an input that dies with them:
    kernel node name -> {output index: input index}. As Inductor's in-place buffers do, this
    saves an allocation and keeps the store in the lines the load just brought into cache.

    An input qualifies when its storage was made in this call (a kernel's output, or a new
    tensor from a matmul or convolution), nothing reads that storage after the kernel (no
    later reader, view or graph output), no other input of the kernel reads it, and the
    kernel is pointwise and reads it element for element where it stores the output: the
    same strides over the kernel's space, no shift, no gather or window over it, one program
    per element (no broadcast store), and the same dtype. Every program then loads each
    element before it stores to it, and no program reads an element another one writes."""
    lives = _lifetimes(nodes)
    if lives is None:
        return {}
    root, last, escaping = lives
    position = {n.name: i for i, n in enumerate(nodes)}
    by_name = {n.name: n for n in nodes}
    single = _single_items(nodes)
    plan: dict[str, dict[int, int]] = {}
    for n in nodes:
        if n.op != "call_function" or not isinstance(n.target, FusedKernel):
            continue
        k: FusedKernel = n.target
        ir = k.ir
        if ir.rdims or k.more or k.workspace or k.writes_inputs:
            continue
        roots = [root.get(a.name, a.name) if isinstance(a, torch.fx.Node) else None for a in n.args]
        taken: dict[int, int] = {}
        for i, r in enumerate(roots):
            if r is None or roots.count(r) != 1 or r in escaping or last.get(r) != position[n.name]:
                continue
            made = by_name[r]
            if not (r in single or _new_storage(made)):
                continue
            j = _stored_in_place(ir, i, taken)
            if j is not None:
                taken[j] = i
        if taken:
            plan[n.name] = taken
    return plan


def _stored_in_place(ir, i: int, taken: dict[int, int]) -> int | None:
    """The output of kernel `ir` that may be stored where input `i` is read, else None."""
    loads = [v for v in _all_values(ir) if v.input_index == i and v.kind in ("load", "gather")]
    if not loads or any(v.kind != "load" or v.shifts for v in loads):
        return None
    strides = {tuple(v.strides) for v in loads}
    dtypes = {v.dtype for v in loads}
    if len(strides) != 1 or len(dtypes) != 1:
        return None
    (stride,) = strides
    (dtype,) = dtypes
    if ir.input_meta[i].dtype != dtype:
        return None
    for s in ir.stores:
        j = s.output_index
        if j < 0 or j in taken or tuple(s.strides) != stride or s.dtype != dtype:
            continue
        if ir.output_meta[j].dtype != dtype:
            continue
        if any(size > 1 and st == 0 for size, st in zip(ir.space, s.strides, strict=True)):
            continue  # a broadcast store: several programs write one element
        if sum(1 for t in ir.stores if t.output_index == j) != 1:
            continue
        return j
    return None


def _all_values(ir) -> list:
    """The kernel's values, with those of its max-pool windows' source programs."""
    values = list(ir.values)
    for v in ir.values:
        if v.kind == "window" and v.window is not None:
            values.extend(v.window.values)
    return values


_CONV = torch.ops.aten.convolution.default
_CUDNN_CONV = torch.ops.aten.cudnn_convolution.default


def _plain_ints(seq: object) -> bool:
    return isinstance(seq, (list, tuple)) and all(type(i) is int for i in seq)


def _direct_cudnn(n: torch.fx.Node) -> tuple | None:
    """(input, weight, padding, stride, dilation, groups) of a convolution ``aten.convolution``
    would run as ``aten.cudnn_convolution`` of the same tensors and nothing more, else None:
    2-d, not transposed, no bias (``_convolution`` adds it after cuDNN), 16- or 32-bit floats on
    CUDA, shapes fixed, and ATen's own backend choice for these operands is cuDNN (made with the
    flags of compile time; the call checks cuDNN is still enabled)."""
    if n.op != "call_function" or n.target is not _CONV or n.kwargs or len(n.args) != 9:
        return None
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = n.args
    if bias is not None or transposed or not isinstance(x, torch.fx.Node) or not isinstance(w, torch.fx.Node):
        return None
    xv, wv = x.meta.get("val"), w.meta.get("val")
    for v in (xv, wv):
        if not isinstance(v, torch.Tensor) or v.dim() != 4 or v.device.type != "cuda":
            return None
        if v.dtype not in _CUDNN_FLOATS or v.dtype != xv.dtype or not _plain_ints(v.shape):
            return None
    if (
        not all(_plain_ints(a) for a in (stride, padding, dilation, output_padding))
        or type(groups) is not int
    ):
        return None
    try:
        backend = torch._C._select_conv_backend(
            xv, wv, None, list(stride), list(padding), list(dilation), False, list(output_padding), groups
        )
    except Exception:  # an operand ATen cannot reason about here: keep its own path
        return None
    if backend != torch._C._ConvBackend.Cudnn:
        return None
    return x, w, list(padding), list(stride), list(dilation), groups


_CUDNN_FLOATS = (*HALF, torch.float32)
_PRECISION = getattr(torch._C, "_get_fp32_precision_getter", None)


def conv_allow_tf32() -> bool:
    """Whether ``aten.convolution`` lets cuDNN use TF32 for float32: the convolution's own
    precision on CUDA, where unset ("none") CUDA's, then the generic one (ATen's order of
    fallback). ``torch._C._get_cudnn_allow_tf32()`` is not it: it raises once a user sets the
    convolution's precision apart from the RNN's."""
    if _PRECISION is None:  # a torch before the per-op precision settings
        return torch._C._get_cudnn_allow_tf32()
    for backend, op in (("cuda", "conv"), ("cuda", "all"), ("generic", "all")):
        precision = _PRECISION(backend, op)
        if precision != "none":
            return precision == "tf32"
    return False


def _cudnn_flags() -> tuple[bool, bool, bool]:
    """(benchmark, deterministic, allow_tf32): what ``aten.convolution`` hands cuDNN, read per call."""
    c = torch._C
    return (
        c._get_cudnn_benchmark(),
        c._get_cudnn_deterministic() or c._get_deterministic_algorithms(),
        conv_allow_tf32(),
    )


def generate(gm: torch.fx.GraphModule, static: frozenset[int] = frozenset()) -> tuple[Callable, str] | None:
    """(the call function, its source) for `gm`, or None when some kernel has no fast
    launcher yet (it has not run, it fell back, or fast launch is off). `static`: positions
    of the graph inputs that keep their storage between calls (parameters, buffers). A graph
    without kernels (ATen ops only: matmuls between two breaks) gets one too, so that its ops
    skip ``OpOverload.__call__`` as a graph's with kernels do."""
    nodes = list(gm.graph.nodes)
    kernels = [n for n in nodes if n.op == "call_function" and isinstance(n.target, FusedKernel)]
    if not runtime.FAST_LAUNCH:
        return None
    if any(k.target._fast is None or k.target.broken is not None for k in kernels):
        return None
    if any(len(k.target._fast_more) != len(k.target.more) for k in kernels):
        return None
    w = _Writer()
    names: dict[str, str] = {}
    kernel_vars: dict[str, str] = {}
    params = [n for n in nodes if n.op == "placeholder"]
    for i, p in enumerate(params):
        names[p.name] = f"a{i}"
    reinterpret = _REINTERPRET and w.ref(_REINTERPRET, "view")
    # each view is made from the root of its view chain, which stays alive until the last of them
    roots = {n.name: _view_root(n) for n in nodes if reinterpret is not None and _static_view(n) is not None}
    freed = _last_uses(nodes, roots)
    made_checks: dict[str, str] = {}  # the layout checks of ATen-made view roots -> their variables
    slow = w.ref(gm.forward, "slow")
    hooks = w.ref(runtime._hooks_active, "hooks")
    body: list[str] = []
    # Buffers handed on: a dead kernel output's storage becomes a later kernel's output of the
    # same shape, strides and dtype (as Inductor's code reuses its buffers), saving an
    # allocation per reuse.
    reusable = _reuse_plan(nodes) if REUSE_BUFFERS else {}
    # Outputs stored where a dying input was read (pointwise kernels only, see _in_place_plan).
    in_place = _in_place_plan(nodes) if REUSE_BUFFERS and IN_PLACE and reinterpret is not None else {}
    release_at: dict[int, list[str]] = {}
    pool: dict[tuple, list[str]] = {}
    pooled_vars: set[str] = set()
    position = {n.name: i for i, n in enumerate(nodes)}
    release_line: dict[str, int] = {}  # pooled buffer -> its line in body: `del` unless taken

    def take(spec: tuple) -> str | None:
        free = pool.get(spec)
        if not free:
            return None
        held = free.pop(0)
        body[release_line.pop(held)] = ""
        return held

    # Graph inputs that a kernel compiled for aligned pointers reads directly.
    aligned_inputs: set[str] = set()
    position_of = {p.name: i for i, p in enumerate(params)}
    for k in kernels:
        fast = k.target._fast
        for a, aligned in zip(k.args, fast.aligned, strict=True):
            if aligned and isinstance(a, torch.fx.Node) and a.op == "placeholder":
                if position_of[a.name] not in static:
                    aligned_inputs.add(names[a.name])
    if kernels:  # every kernel launches on the current stream of the graph's one device
        device_index = kernels[0].target._fast.device_index
        stream_of = w.ref(kernels[0].target._fast.stream_of, "stream")
        body.append(f"s = {stream_of}({device_index})")
    direct_cudnn = False

    for n in nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            body.append(f"return {w.literal(n.args[0], names)}")
            break
        var = f"v_{n.name}"
        if n.op == "get_attr":
            obj = operator.attrgetter(n.target)(gm)
            names[n.name] = w.ref(obj, "attr")
            continue
        if n.op != "call_function":
            return None
        if (
            n.target is operator.getitem
            and n.args[0].op == "call_function"
            and isinstance(n.args[0].target, FusedKernel)
        ):
            names[n.name] = f"{kernel_vars[n.args[0].name]}_{n.args[1]}"
            continue
        if reinterpret is not None and _only_viewed(n):
            continue  # its items are made as views; its input stays alive for their fallback
        view = _static_view(n)
        if view is not None and reinterpret is not None:
            lines = _view_lines(w, n, roots[n.name], names, var, reinterpret, made_checks)
            body.extend(lines)
            names[n.name] = var if lines else "_"  # "_": never made (no variable to free)
        elif isinstance(n.target, FusedKernel):
            into = in_place.get(n.name, {})
            for i in into.values():  # the input's storage goes on as the output, not to the pool
                held = names.get(storage_root(n.args[i]).name)
                if held in pooled_vars:
                    pooled_vars.discard(held)
                    for waiting in release_at.values():
                        waiting[:] = [(spec, v) for spec, v in waiting if v != held]
            body.extend(_kernel_lines(w, n, names, var, take, into, reinterpret, made_checks))
            kernel_vars[n.name] = var
            names[n.name] = "_"  # no variable: its outputs are named one by one
            for u in n.users:
                if u.name in reusable:
                    spec = (*n.target.out_specs[u.args[1]], n.target.device)
                    release_at.setdefault(reusable[u.name], []).append((spec, f"{var}_{u.args[1]}"))
                    pooled_vars.add(f"{var}_{u.args[1]}")
        elif (spec := _matmul_spec(n)) is not None:
            fn = w.ref(_MATMUL_BINDINGS[n.target], "mm")
            args = [w.literal(a, names) for a in n.args]
            args += [f"{k}={w.literal(v, names)}" for k, v in n.kwargs.items()]
            held = take(_spec_key(spec))
            if held is not None:  # the dead buffer goes on as this result
                body.append(f"{var} = {fn}({', '.join(args)}, out={held})")
                body.append(f"del {held}")
            elif n.name in reusable:
                # pooled once dead, for a kernel that writes it as laid out by the spec: a new
                # buffer in that layout (ATen's own result may be laid out otherwise than its
                # fake tensor says, and a kernel taking it would store across its strides)
                body.append(f"{var} = {fn}({', '.join(args)}, out={_new_buffer(w, spec)})")
            else:
                body.append(f"{var} = {fn}({', '.join(args)})")
            names[n.name] = var
            if n.name in reusable:
                release_at.setdefault(reusable[n.name], []).append((spec, var))
                pooled_vars.add(var)
        elif (direct := _direct_cudnn(n)) is not None:
            direct_cudnn = True
            fn = w.ref(_aten_entry(_CUDNN_CONV), "cudnn")
            args = ", ".join(w.literal(a, names) for a in direct)
            body.append(f"{var} = {fn}({args}, cudnn_benchmark, cudnn_deterministic, cudnn_tf32)")
            names[n.name] = var
        else:
            body.append(f"{var} = {_call_text(w, n, names)}")
            names[n.name] = var
        dead = [
            names[d]
            for d in freed.get(n.name, ())
            if names.get(d, "_")[0] != "_" and names[d] not in pooled_vars
        ]
        if dead:
            body.append(f"del {', '.join(sorted(set(dead)))}")
        for spec, held in release_at.pop(position[n.name], ()):
            pool.setdefault(_spec_key(spec), []).append(held)
            release_line[held] = len(body)
            body.append(f"del {held}")

    body = [line for line in body if line]
    head = [f"def call({', '.join(names[p.name] for p in params)}):"]
    checks = [f"{hooks}()"]
    if direct_cudnn:
        checks.append(f"not {w.ref(torch._C._get_cudnn_enabled, 'cudnn_on')}()")
    checks += [f"{a}.data_ptr() & 15" for a in sorted(aligned_inputs)]
    head.append(f"    if {' or '.join(checks)}:")
    head.append(f"        return {slow}({', '.join(names[p.name] for p in params)})")
    if direct_cudnn:
        head.append(
            f"    cudnn_benchmark, cudnn_deterministic, cudnn_tf32 = {w.ref(_cudnn_flags, 'flags')}()"
        )
    source = "\n".join(head + ["    " + line for line in body]) + "\n"
    scope: dict[str, object] = dict(w.globals)
    exec(compile(source, f"<fuselint call {id(gm):x}>", "exec"), scope)  # noqa: S102 (our own generated code)
    return scope["call"], source


# Inductor's generated code makes its views with this C function: no dispatcher, no autograd.
_REINTERPRET = getattr(getattr(torch._C._dynamo, "guards", None), "_reinterpret_tensor", None)
_AS_STRIDED = torch.ops.aten.as_strided.default


def _static_view(n: torch.fx.Node) -> tuple | None:
    """(base, size, stride, offset from the base's storage offset) of a view with static
    metadata; None for anything else."""
    base = view_base(n)
    if base is None:
        return None
    val = n.meta.get("val")
    bval = base.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(bval, torch.Tensor):
        return None
    sizes = (*val.shape, *val.stride(), val.storage_offset(), bval.storage_offset(), *bval.stride())
    if not all(isinstance(x, int) for x in sizes) or (val.device, val.dtype) != (bval.device, bval.dtype):
        return None
    if n.target is _AS_STRIDED and storage_root(base).op == "placeholder":
        # its offset counts from the storage's start, not the base's: a graph input may come at
        # another offset than the one compiled for (dynamo does not guard it), so the op runs
        return None
    return base, tuple(val.shape), tuple(val.stride()), val.storage_offset() - bval.storage_offset()


def _only_viewed(n: torch.fx.Node) -> bool:
    """A multi-view op (split) all of whose items are made as views: the op itself never runs."""
    return (
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and n.target.is_view
        and not isinstance(n.meta.get("val"), torch.Tensor)
        and bool(n.users)
        and all(_static_view(u) is not None for u in n.users)
    )


def _view_root(n: torch.fx.Node) -> torch.fx.Node:
    """The node `n`'s chain of static views starts from (`n` itself when it is no such view)."""
    while _static_view(n) is not None:
        n = view_base(n)
    return n


def _feeds_views_only(n: torch.fx.Node) -> bool:
    """A view read only by views (a step of a chain such as view, view, permute, slice): each of
    them is made from the chain's root, so this one need not be made on the fast path."""
    return bool(n.users) and all(_static_view(u) is not None for u in n.users)


def _view_lines(
    w: _Writer,
    n: torch.fx.Node,
    root: torch.fx.Node,
    names: dict[str, str],
    var: str,
    reinterpret: str,
    made_checks: dict[str, str],
) -> list[str]:
    """A view made by reinterpreting the storage of its view chain's root (one call, as
    Inductor's reinterpret_tensor of a buffer; a step of the chain that only views read is not
    made). Its layout is right when the root's strides are what the graph says: true of graph
    inputs (guarded) and kernel outputs (allocated so); a root computed by ATen is checked once
    per call, and every view of a root laid out otherwise goes through its view op, step by step."""
    val = n.meta["val"]
    r = names[root.name]
    delta = val.storage_offset() - root.meta["val"].storage_offset()  # from the root's own
    made = f"{reinterpret}({r}, {tuple(val.shape)!r}, {tuple(val.stride())!r}, {delta})"
    skip = _feeds_views_only(n)
    root_strides = tuple(root.meta["val"].stride())
    known = _known_strides(root)
    if known is not None and _same_layout(tuple(root.meta["val"].shape), known, root_strides):
        return [] if skip else [f"{var} = {made}"]
    lines = []
    check = f"{r}.stride() == {root_strides!r}"
    ok = made_checks.get(check)
    if ok is None:  # the root's first view: its check, made once a call
        ok = made_checks[check] = f"ok_{root.name}"
        lines.append(f"{ok} = {check}")
    fast = "None" if skip else made  # a skipped step exists only where its readers run their view ops
    lines.append(f"{var} = {fast} if {ok} else {_call_text(w, n, names)}")
    return lines


def _call_text(w: _Writer, n: torch.fx.Node, names: dict[str, str]) -> str:
    """`n` as a call of its op; an item of a split node that was never run runs the split."""
    if n.target is operator.getitem and names.get(n.args[0].name) is None:
        src = n.args[0]
        return f"{_call_text(w, src, names)}[{n.args[1]!r}]"
    op = w.ref(_aten_entry(n.target, n.kwargs), "op")
    args = ", ".join(w.literal(a, names) for a in n.args)
    kwargs = ", ".join(f"{k}={w.literal(v, names)}" for k, v in n.kwargs.items())
    return f"{op}({', '.join(x for x in (args, kwargs) if x)})"


def _spec_key(spec: tuple) -> tuple:
    shape, stride, dtype, device = spec
    return (tuple(shape), tuple(stride), dtype, device)


def _kernel_lines(
    w: _Writer,
    n: torch.fx.Node,
    names: dict[str, str],
    var: str,
    take: Callable[[tuple], str | None],
    into: dict[int, int] | None = None,
    reinterpret: str | None = None,
    made_checks: dict[str, str] | None = None,
) -> list[str]:
    """One kernel: launch it directly when the ATen-made inputs have the strides it was built
    for, else call its FusedKernel (which falls back to ATen). Its outputs are stored where
    `into` says (output index -> the index of a dying input it reads element for element),
    else take dead buffers of their layout from `take` where there are any. `made_checks`: layout
    checks this call has already made (the check's text -> the variable holding its answer)."""
    into = into or {}
    made_checks = made_checks or {}
    k: FusedKernel = n.target
    fast = k._fast
    args = [w.literal(a, names) for a in n.args]
    outs = [f"{var}_{i}" for i in range(len(k.out_specs))]
    checks = []
    for a, arg, stride, shape, aligned in zip(
        n.args, args, k.in_strides, k._in_sizes, fast.aligned, strict=True
    ):
        if not isinstance(a, torch.fx.Node):
            continue
        known = _known_strides(a)
        if known is None or not _same_layout(shape, known, stride):
            check = f"{arg}.stride() == {tuple(stride)!r}"
            checks.append(made_checks.get(check, check))  # a root's layout check, made once a call
        if aligned and _produced_by_aten(a) and not _new_storage(a):  # inputs: checked on entry
            checks.append(f"not {arg}.data_ptr() & 15")
    checks = list(dict.fromkeys(checks))  # an input read twice is checked once
    lines = []
    indent = ""
    if checks:
        lines.append(f"if {' and '.join(checks)}:")
        indent = "    "
    for j, (o, (shape, stride, dtype)) in enumerate(zip(outs, k.out_specs, strict=True)):
        if j in into:
            i = into[j]
            if (tuple(k._in_sizes[i]), tuple(k.in_strides[i])) == (tuple(shape), tuple(stride)):
                lines.append(f"{indent}{o} = {args[i]}  # in place of a dying input")
            else:  # the input is a view's base: the output views its storage as the kernel writes it
                made = f"{reinterpret}({args[i]}, {tuple(shape)!r}, {tuple(stride)!r}, 0)"
                lines.append(f"{indent}{o} = {made}  # in place of a dying input")
            continue
        held = take(_spec_key((shape, stride, dtype, k.device)))
        if held is not None:
            lines.append(f"{indent}{o} = {held}  # a dead buffer of this layout")
            lines.append(f"{indent}del {held}")
        else:
            lines.append(f"{indent}{o} = {_new_buffer(w, (shape, stride, dtype, k.device))}")
    launches = [fast]
    if k.workspace:  # a split reduction: chunks into the workspace, their combination...
        ws = f"{var}_ws"
        lines.append(f"{indent}{ws} = {_new_buffer(w, ((k.workspace,), (1,), torch.float32, k.device))}")
        outs = [*outs, ws]
        launches.extend(k._fast_more)
    for step in launches:
        consts = ", ".join(repr(c) for c in step.consts)
        call_args = ", ".join(args + outs + ([consts] if consts else []))
        g0, g1, g2 = step.grid
        run, function, packed = (
            w.ref(step.run, "run"),
            w.ref(step.function, "fn"),
            w.ref(step.packed, "packed"),
        )
        lines.append(
            f"{indent}{run}({g0}, {g1}, {g2}, s, {function}, {packed}, None, None, None, {call_args})"
        )
    if k.workspace:
        lines.append(f"{indent}del {outs.pop()}")
    if checks:
        kernel = w.ref(k, "k")
        target = ", ".join(outs) + ("," if len(outs) == 1 else "")
        own = w.ref(_owned, "own")
        lines.append("else:")
        lines.append(f"    {target} = {kernel}({', '.join(args)})")
        # ATen's result may alias an input or have other strides: a copy in the layout the
        # fast path gives, so that a later kernel may take the buffer either way
        for o, (shape, stride, _dtype) in zip(outs, k.out_specs, strict=True):
            lines.append(f"    {o} = {own}({o}, {tuple(shape)!r}, {tuple(stride)!r})")
    return lines


def _owned(t: torch.Tensor, shape: tuple, stride: tuple) -> torch.Tensor:
    """A copy of `t` in new storage laid out as (shape, stride)."""
    return torch.empty_strided(shape, stride, dtype=t.dtype, device=t.device).copy_(t)


class GraphRunner:
    """Run a compiled graph: through its FX code until its kernels are built, then through
    the generated call function (see the module docstring)."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, static: frozenset[int] = frozenset()) -> None:
        self.gm = gm
        self.name = name
        self.static = static  # positions of inputs that keep their storage (parameters, buffers)
        self.call: Callable | None = None
        self.source: str | None = None
        self.calls = 0
        self.why_not: str | None = None  # why no call function was generated, when none was

    def __call__(self, *args: object) -> object:
        call = self.call
        if call is not None:
            return call(*args)
        out = self.gm.forward(*args)
        self.calls += 1
        if self.calls == 1 and self.why_not is None:
            self._generate()
        return out

    def _generate(self) -> None:
        try:
            made = generate(self.gm, self.static)
        except Exception as exc:  # the FX graph keeps running the calls
            self.why_not = f"{type(exc).__name__}: {exc}"
            log.warning(
                "fuselint: no call function for %s (%s); running its FX graph", self.name, self.why_not
            )
            return
        if made is None:
            self.why_not = "some kernel has no fast launcher"
            return
        self.call, self.source = made
