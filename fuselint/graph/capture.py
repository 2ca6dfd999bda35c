"""Capture a model entry with dynamo: its ATen graphs, their call counts, and its graph breaks.

`torch.compile(backend=<recorder>, dynamic=False)` runs the model once. The recorder lowers
each dynamo graph to ATen (aot_module_simplified with Inductor's decomposition table; forward
and, with train=True, backward graphs) and wraps it to count how often it runs, so launch
counts can be weighted by calls. Breaks come from dynamo's `graph_breaks` artifact log, read by
a handler for the duration of the capture; the user's logging and dynamo state are restored.

On the meta device (no weight memory) a data-dependent break would stop the run: the eager code
between graphs needs real values. Zero-dim meta outputs are handed to the host as one-element
CPU stand-ins (ones), so the run goes on along one branch; breaks fed that way say so.

A run that fails, on any device, is an EntryError: one line with the user's exception and the
user's file:line where it was raised; torch's own log is kept off the console for --verbose.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import logging
import os
import sys
import sysconfig
import time
import traceback
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import torch
import torch._dynamo
import torch._guards
import torch._logging._internal as torch_logs
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch.utils._pytree import tree_flatten, tree_map

from fuselint.findings import display_path
from fuselint.graph.breaks_log import RawBreak, parse_break
from fuselint.graph.eager_probe import EagerSdpa, probe_sdpa
from fuselint.graph.entry import Built, Entry, EntryError, build, load_entry
from fuselint.graph.fusion_graph import FusionGraph
from fuselint.graph.layout import KEPT, gpu_conv_layout, kept_layout_copies
from fuselint.graph.progress import progress

BREAK_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"

Frame = tuple[str, int, str]  # (file, line, function)


@dataclass(frozen=True)
class GraphBreak:
    """A graph break located in the user's code."""

    file: str
    line: int
    reason: str
    explanation: str = ""
    gb_id: str = ""
    hints: tuple[str, ...] = ()
    # Where dynamo itself said it broke, when that is not the user's line (e.g. copy.py:153).
    dynamo_file: str = ""
    dynamo_line: int = 0
    # How many times dynamo hit this break during the run (once per compile of its frame).
    hits: int = 1
    # "one branch" when the run went on past it with a meta stand-in for a host value.
    explored: str = ""
    # The frame fell back to eager entirely (dynamo could not resume after the break).
    skipped_frame: bool = False
    # The captured graph that ends at this break (compiled from the same frame), if any.
    after_graph: str = ""
    # The user's frames from the entry's forward down to the break, outermost first.
    stack: tuple[Frame, ...] = ()

    @property
    def url(self) -> str:
        return BREAK_URL.format(self.gb_id) if self.gb_id else ""


@dataclass(frozen=True)
class GraphLink:
    """A tensor one captured graph returned and a later graph took as input: a value that
    lives across the break between them (found by identity while the model ran)."""

    source: str  # graph name
    output: int  # position among the source graph's outputs
    target: str
    input: int  # position among the target graph's inputs


@dataclass(frozen=True)
class Capture:
    entry: str
    graphs: tuple[FusionGraph, ...]
    breaks: tuple[GraphBreak, ...]
    device: str
    train: bool
    seconds: float
    # What the model printed while it ran (kept off fuselint's own stdout).
    stdout: str = ""
    # Dynamo graphs that could not be lowered to ATen: "graph3: <why>".
    unlowered: tuple[str, ...] = ()
    links: tuple[GraphLink, ...] = ()
    # The mode the factory returned the model in (None: not an nn.Module), beside `train`,
    # the mode that was traced: the two differ when fuselint chose for the user.
    factory_train: bool | None = None

    @property
    def mode_note(self) -> str:
        """One line when the traced mode is not the mode the factory returned, saying why."""
        if self.factory_train is None or self.factory_train == self.train:
            return ""
        if self.train:
            return "the factory returned the model in eval mode; traced in train mode, as --train asks"
        return (
            "the factory returned the model in train mode; traced in eval mode (inference, the default): "
            "pass --train to trace training with backward graphs, or call .eval() in the factory"
        )


# ---------------------------------------------------------------- whose frame is it


def _library_roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    paths = sysconfig.get_paths()
    stdlib = tuple({str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib")})
    site = tuple({str(Path(p).resolve()) for p in sys.path if p.endswith(("site-packages", "dist-packages"))})
    return stdlib, site


def _package_root(name: str) -> str:
    """The folder of an installed package, found without importing it ("" when absent)."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return str(Path(locations[0]).resolve()) if locations else ""


_TORCH_ROOT = str(Path(torch.__file__).resolve().parent)
_FUSELINT_ROOT = str(Path(__file__).resolve().parent.parent)
# The harness around the model: torch, fuselint itself and the command line it runs under.
_HARNESS = tuple(r for r in (_TORCH_ROOT, _FUSELINT_ROOT, _package_root("click")) if r)
_STDLIB, _SITE = _library_roots()


def _under(path: str, roots: Sequence[str]) -> bool:
    # With the separator: torchvision/ is not under torch/.
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _resolved(file: str) -> str:
    return "" if not file or file.startswith("<") else str(Path(file).resolve())


def is_harness_file(file: str) -> bool:
    """Frames of torch, fuselint, click, or no file at all: never where a break is reported."""
    path = _resolved(file)
    return not path or _under(path, _HARNESS)


def is_user_file(file: str) -> bool:
    """Frames in torch, fuselint, click or the standard library are not the user's code.

    Packages beside torch (torchvision, torchaudio, transformers) are the user's: their
    breaks are reported in their own files."""
    if is_harness_file(file):
        return False
    path = _resolved(file)
    return not (_under(path, _STDLIB) and not _under(path, _SITE))


def model_frames(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """The frames inside the model call: those below fuselint's own last frame, when it is
    on the stack (what lies above it is the command line or the test runner)."""
    ours = [i for i, (file, _line, _func) in enumerate(frames) if _under(_resolved(file), (_FUSELINT_ROOT,))]
    return tuple(frames[ours[-1] + 1 :] if ours else frames)


def user_stack(raw: RawBreak) -> tuple[Frame, ...]:
    """The user's frames of the break, outermost first, ending at the break's own line."""
    frames = [f for f in model_frames(raw.frames) if is_user_file(f[0])]
    if is_user_file(raw.file) and (not frames or frames[-1][:2] != (raw.file, raw.line)):
        func = next((fn for file, line, fn in raw.frames if (file, line) == (raw.file, raw.line)), "")
        frames.append((raw.file, raw.line, func))
    return tuple(frames)


def user_location(raw: RawBreak) -> tuple[str, int]:
    """Where to report a break: the innermost user frame; with none, the innermost frame of the
    model call outside torch and fuselint (copy.py, say); with none, where dynamo broke."""
    stack = user_stack(raw)
    if stack:
        return stack[-1][0], stack[-1][1]
    inside = [(f, n) for f, n, _fn in model_frames(raw.frames) if not is_harness_file(f)]
    if inside:
        return inside[-1]
    return raw.file, raw.line


# ---------------------------------------------------------------- logging and dynamo state


_GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)


class _BreakHandler(logging.Handler):
    """Collects graph-break records, each with the dynamo compile (frame) it came from."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += "\nTraceback (most recent call last):\n" + str(record.exc_info[1])
        compile_id = torch._guards.CompileContext.current_compile_id()
        self.records.append((text, str(compile_id) if compile_id is not None else ""))


@contextlib.contextmanager
def _listening_to_breaks():
    """Enable the graph_breaks artifact into our handler only; put everything back after."""
    names = set(_GRAPH_BREAK_LOGGERS)
    names.update(n for n in logging.root.manager.loggerDict if n.endswith("__graph_breaks"))
    names.add("torch._dynamo")  # its warnings ("Graph break from Tensor.item()") duplicate ours
    saved_loggers = {
        n: (lg.level, lg.propagate, list(lg.handlers), lg.disabled)
        for n in names
        for lg in [logging.getLogger(n)]
    }
    saved_state = torch_logs._get_log_state()
    handler = _BreakHandler()
    try:
        torch_logs._set_log_state(type(saved_state)())
        for n in names - {"torch._dynamo"}:
            lg = logging.getLogger(n)
            lg.setLevel(logging.DEBUG)
            lg.propagate = False  # nothing on the console: the findings report the breaks
            lg.disabled = False
            lg.addHandler(handler)
        logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
        torch_logs._get_log_state().enable_artifact("graph_breaks")
        yield handler
    finally:
        torch_logs._set_log_state(saved_state)
        for n, (level, propagate, handlers, disabled) in saved_loggers.items():
            lg = logging.getLogger(n)
            lg.setLevel(level)
            lg.propagate = propagate
            lg.disabled = disabled
            lg.handlers[:] = handlers


# ---------------------------------------------------------------- recording backend


def fw_metadata() -> object | None:
    """AOTAutograd's view of the graph being compiled (its inputs and outputs), when tracing."""
    context = torch._guards.TracingContext.try_get()
    return getattr(context, "fw_metadata", None) if context is not None else None


def static_input_indices() -> frozenset[int]:
    """Positions of the graph's inputs that AOTAutograd calls static: parameters and buffers,
    which keep their storage from call to call (Inductor skips their alignment checks too)."""
    return frozenset(getattr(fw_metadata(), "static_input_indices", None) or ())


def _written_inputs() -> frozenset[int]:
    """Positions of the graph's inputs whose data it writes. The backend compiles that write into
    the graph (keep_inference_input_mutations) and copies a written weight every call; capture's
    graph returns the new value instead, so its inputs show no write."""
    info = getattr(fw_metadata(), "input_info", None) or ()
    return frozenset(i for i, a in enumerate(info) if getattr(a, "mutates_data", False))


@dataclass
class _Recorded:
    index: int
    compile_id: str
    forward: torch.fx.GraphModule | None = None
    backward: torch.fx.GraphModule | None = None
    forward_calls: int = 0
    backward_calls: int = 0
    fed_standin: bool = False
    lowering_error: str = ""
    static: frozenset[int] = frozenset()  # the parameters and buffers among its inputs it does not write
    inference: bool = True  # AOT compiled the forward for inference (no grad): no activations saved


@dataclass
class _Recorder:
    """The torch.compile backend: lowers each dynamo graph to ATen and counts its runs."""

    meta: bool
    prefix: str = ""
    graphs: list[_Recorded] = field(default_factory=list)
    links: list[GraphLink] = field(default_factory=list)
    # id of each tensor a graph returned -> (a weak reference to it, graph name, output position)
    returned: dict[int, tuple[weakref.ref, str, int]] = field(default_factory=dict)
    # whether a graph calls scaled_dot_product_attention (then eager's calls are probed)
    saw_sdpa: bool = False

    def graph_name(self, rec: _Recorded) -> str:
        return f"{self.prefix}graph{rec.index}"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        from torch._inductor.decomposition import select_decomp_table

        if _uses_max_pool(gm):
            # Inductor's max-pool decomposition consults its lowering module, which
            # decomposition.py does not import; importing it costs ~2 s, so only when needed.
            importlib.import_module("torch._inductor.lowering")

        self.saw_sdpa |= any(
            n.op == "call_function" and n.target is torch.nn.functional.scaled_dot_product_attention
            for n in gm.graph.nodes
        )
        if self.meta:
            _attention_as_on_cpu(gm)
        compile_id = torch._guards.CompileContext.current_compile_id()
        rec = _Recorded(index=len(self.graphs), compile_id=str(compile_id) if compile_id else "")
        self.graphs.append(rec)

        def fw_compiler(aten: torch.fx.GraphModule, _inputs: list, inference: bool = False) -> Any:
            rec.forward = aten
            rec.inference = inference
            rec.static = static_input_indices() - _written_inputs()
            return make_boxed_func(aten.forward)

        def bw_compiler(aten: torch.fx.GraphModule, _inputs: list) -> Any:
            rec.backward = aten

            def run_backward(*args: Any) -> Any:
                rec.backward_calls += 1
                return aten.forward(*args)

            return make_boxed_func(run_backward)

        try:
            compiled = aot_module_simplified(
                gm,
                example_inputs,
                fw_compiler=fw_compiler,
                bw_compiler=bw_compiler,
                # A training forward whose backward never runs in the capture (its outputs feed no
                # loss) is still a training forward: AOT says which it compiles, not the backward.
                inference_compiler=functools.partial(fw_compiler, inference=True),
                decompositions=select_decomp_table(),
            )
        except Exception as exc:
            # A graph AOT cannot lower still runs (eagerly), so the capture goes on and finds
            # the breaks after it; the capture lists it as not lowered.
            rec.lowering_error = _brief(exc)
            compiled = gm.forward

        def run(*args: Any) -> Any:
            rec.forward_calls += 1
            self._link_inputs(rec, args)
            out = compiled(*args)
            out = self._standins(out, rec) if self.meta else out
            self._remember_outputs(rec, out)
            return out

        return run

    def _link_inputs(self, rec: _Recorded, args: tuple) -> None:
        for position, arg in enumerate(args):
            known = self.returned.get(id(arg)) if isinstance(arg, torch.Tensor) else None
            if known is not None and known[0]() is arg:
                link = GraphLink(known[1], known[2], self.graph_name(rec), position)
                if link not in self.links:
                    self.links.append(link)

    def _remember_outputs(self, rec: _Recorded, out: Any) -> None:
        for position, value in enumerate(out if isinstance(out, (list, tuple)) else [out]):
            if isinstance(value, torch.Tensor):
                self.returned[id(value)] = (weakref.ref(value), self.graph_name(rec), position)

    @staticmethod
    def _standins(out: Any, rec: _Recorded) -> Any:
        """Hand zero-dim meta outputs to the host as CPU ones, so eager glue can read them."""

        def swap(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and t.is_meta and t.dim() == 0:
                rec.fed_standin = True
                return torch.ones((), dtype=t.dtype, device="cpu")
            return t

        return tree_map(swap, out)


_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_SDP_FLASH = 1  # sdp::SDPBackend::flash_attention, as _fused_sdp_choice numbers it


def _sdpa_as_on_cpu(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """scaled_dot_product_attention lowered as on CPU tensors of the same sizes.

    SDPA picks its kernel by the device of its inputs, and meta has no fused kernel: on meta
    it decomposes into the math path (bmm, softmax, a materialized causal mask: +92 nodes in a
    2-layer LLaMA), a graph no real device runs. The CPU kernel's choice reads only sizes,
    strides and dtypes, so it is asked directly, and the fused op it picks has a meta kernel.
    """
    # The choice asked with a dense mask of the same sizes: on a meta tensor the CPU rules still
    # check the mask's last stride (as CUDA does), which a CPU tensor is excused from.
    shaped = None if attn_mask is None else torch.empty(attn_mask.shape, dtype=attn_mask.dtype, device="meta")
    choice = torch.ops.aten._fused_sdp_choice.default.redispatch(
        _CPU_KEYS, query, key, value, shaped, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
    )
    if choice != _SDP_FLASH:
        return torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # As the CPU path turns a boolean mask into an additive one: where(mask, 0, -inf).
        zero = torch.scalar_tensor(0.0, dtype=query.dtype, device=attn_mask.device)
        minus_inf = torch.scalar_tensor(-float("inf"), dtype=query.dtype, device=attn_mask.device)
        attn_mask = torch.where(attn_mask, zero, minus_inf)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )[0]


def _attention_as_on_cpu(gm: torch.fx.GraphModule) -> None:
    """Point the graph's SDPA calls at `_sdpa_as_on_cpu` (meta runs only)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.nn.functional.scaled_dot_product_attention:
            node.target = _sdpa_as_on_cpu
            changed = True
    if changed:
        gm.recompile()


def _uses_max_pool(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op == "call_module":
            name = type(gm.get_submodule(node.target)).__name__
        else:
            name = getattr(node.target, "__name__", str(node.target))
        if "max_pool" in name.lower() or "maxpool" in name.lower():
            return True
    return False


# ---------------------------------------------------------------- capture


def _build(entry: Entry, device: str | None) -> Built:
    if device is None:
        return build(entry)
    with torch.device(device):
        return build(entry).on(device)


@contextlib.contextmanager
def _device_scope(device: str):
    """What a meta run needs to go on where a real one would.

    Eager `nonzero` between graphs gets a stand-in size (every element non-zero) instead of
    raising (one branch explored). `torch.tensor(data, device="meta")` (a KV cache's empty
    start, `torch.tensor([])`) is made as a plain meta tensor even while dynamo traces with fake
    tensors, and the fake mode refuses it as a real input: a meta tensor holds no values, so
    letting the fake mode take it as a constant is exact.
    """
    if device != "meta":
        yield
        return
    import torch.fx.experimental._config as fx_config
    from torch._subclasses.fake_tensor import fake_tensor_tls

    saved = fake_tensor_tls.allow_non_fake_inputs_override
    fake_tensor_tls.allow_non_fake_inputs_override = True
    try:
        # Not a torch.device("meta") context: dynamo would trace through its __torch_function__,
        # which is ten times slower and reports breaks inside torch/utils/_device.py.
        with fx_config.patch(meta_nonzero_assume_all_nonzero=True):
            yield
    finally:
        fake_tensor_tls.allow_non_fake_inputs_override = saved


def _run(compiled: Any, built: Built, train: bool) -> None:
    if not train:
        with torch.no_grad():
            compiled(*built.args, **built.kwargs)
        return
    out = compiled(*built.args, **built.kwargs)
    leaves = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if leaves:
        torch.stack([t.sum().to(leaves[0].dtype) for t in leaves]).sum().backward()


def capture(entry: Entry, *, device: str | None = None, train: bool = False, prefix: str = "") -> Capture:
    """Build the entry, run it once under torch.compile with the recorder, and collect.

    device: "meta" builds the model without weight memory; None keeps what the factory made
    (or the factory's own `fuselint_device`). train: run in train mode and backward on the sum
    of the outputs, which adds backward graphs. prefix: put before every graph name
    ("item_branch:graph0"), so graphs of several entries keep distinct names.

    Same entry, same report: the factory's random weights and inputs (and so the branch a
    data-dependent `if` takes) come from one fixed seed, and the caller's RNG state is put back.
    """
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(0)
        return _capture(entry, device=device, train=train, prefix=prefix)


def _capture(entry: Entry, *, device: str | None, train: bool, prefix: str) -> Capture:
    device = device or entry.device
    start = time.perf_counter()
    built = _build(entry, device)
    model = built.model
    factory_train = model.training if isinstance(model, torch.nn.Module) else None
    if isinstance(model, torch.nn.Module):
        model.train(train)
    device = device or _device_of(built)
    recorder = _Recorder(meta=device == "meta", prefix=prefix)
    printed = io.StringIO()
    torch_log = io.StringIO()
    torch._dynamo.reset()  # fresh caches, and dynamo's duplicate-break suppression forgotten
    try:
        with (
            _torch_log_kept(torch_log),
            _listening_to_breaks() as handler,
            contextlib.redirect_stdout(printed),
            _device_scope(device),
        ):
            compiled = torch.compile(model, backend=recorder, dynamic=False)
            try:
                _run(compiled, built, train)
            except Exception as exc:
                # A run that did not complete is never a pass, on any device: one line says
                # why and where, the full story waits for --verbose.
                detail = torch_log.getvalue() + "".join(traceback.format_exception(exc))
                raise EntryError(f"entry {entry.spec!r}: {run_failure(exc, device)}", detail) from exc
            # what eager code passes to SDPA, which the graph may not show (graph/eager_probe.py)
            eager_sdpa = probe_sdpa(entry, train=train) if recorder.saw_sdpa else None
    finally:
        torch._dynamo.reset()  # drop the compiled code: it holds the model's graphs alive
    graphs = _fusion_graphs(recorder, eager_sdpa)
    breaks = _locate_breaks(handler.records, recorder)
    return Capture(
        entry=entry.spec,
        graphs=graphs,
        breaks=breaks,
        device=device,
        train=train,
        seconds=time.perf_counter() - start,
        stdout=printed.getvalue(),
        unlowered=tuple(
            f"{recorder.graph_name(r)}: {r.lowering_error}" for r in recorder.graphs if r.lowering_error
        ),
        links=tuple(recorder.links),
        factory_train=factory_train,
    )


def capture_entries(
    specs: Sequence[str], *, device: str | None = None, train: bool = False, stream: TextIO | None = None
) -> list[Capture]:
    """Load and capture each entry spec in turn, with a progress bar on a terminal (stderr).

    With several entries every graph name carries its entry's prefix (see `entry_prefixes`), so
    drawings and "graph/node" keys do not mix one model's graph0 with another's.
    Raises EntryError (one line) for the first entry that cannot be loaded, built or run.
    """
    prefixes = entry_prefixes(specs)
    return [
        capture(load_entry(spec), device=device, train=train, prefix=prefixes[i])
        for i, spec in enumerate(progress(specs, stream=stream))
    ]


def entry_prefixes(specs: Sequence[str]) -> list[str]:
    """Short distinct graph-name prefixes for several entries ("item_branch:"); none for one."""
    if len(specs) < 2:
        return [""] * len(specs)
    labels = []
    for spec in specs:
        target, _, factory = spec.rpartition(":")
        stem = Path(target).stem if target.endswith(".py") else target.rpartition(".")[2]
        labels.append(stem if factory == "entry" else f"{stem}.{factory}")
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(f"{label}:" if labels.count(label) == 1 else f"{label}#{seen[label]}:")
    return out


def root_cause(exc: BaseException) -> BaseException:
    """The exception the model raised, under torch's wrappers around it (dynamo's
    TorchRuntimeError wraps the fake-tensor RuntimeError that holds the real message)."""
    seen = {id(exc)}
    while type(exc).__module__.startswith("torch.") and (exc.__cause__ or exc.__context__):
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    return exc


def failure_frame(exc: BaseException) -> Frame | None:
    """The innermost frame of the user's code where the run failed: dynamo's record of the user
    stack it was tracing, else the traceback below fuselint's own frames."""
    chain = [exc]
    while chain[-1].__cause__ or chain[-1].__context__:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    for candidate in chain:
        real_stack = getattr(candidate, "real_stack", None) or ()
        frames = [(f.filename, f.lineno or 0, f.name) for f in real_stack]
        user = [f for f in frames if is_user_file(f[0])]
        if user:
            return user[-1]
    for candidate in reversed(chain):
        frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(candidate.__traceback__)]
        user = [f for f in model_frames(frames) if is_user_file(f[0])]
        if user:
            return user[-1]
    return None


def run_failure(exc: BaseException, device: str) -> str:
    """One line: where the user's code failed and the exception it raised."""
    cause = _brief(root_cause(exc))
    frame = failure_frame(exc)
    where = f" at {display_path(frame[0])}:{frame[1]} in {frame[2]}" if frame else ""
    hint = "; meta tensors hold no values: try --device cpu" if device == "meta" and "meta" in cause else ""
    return f"running the model failed{where}: {cause}{hint} (--verbose shows the full log)"


@contextlib.contextmanager
def _torch_log_kept(buffer: io.StringIO):
    """torch's own log (a fake-tensor traceback, dynamo's warnings) goes to `buffer`, not the
    console: the one-line error says what matters; --verbose shows the buffer."""
    handler = logging.StreamHandler(buffer)
    # INFO and up: torch's structured-trace artifacts (torch.__trace) log empty DEBUG records.
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    loggers = [
        lg
        for name, lg in list(logging.root.manager.loggerDict.items())
        if isinstance(lg, logging.Logger) and lg.handlers and (name == "torch" or name.startswith("torch."))
    ]
    saved = [(lg, list(lg.handlers)) for lg in loggers]
    try:
        for lg in loggers:
            lg.handlers[:] = [handler]
        yield buffer
    finally:
        for lg, handlers in saved:
            lg.handlers[:] = handlers


def _brief(exc: BaseException) -> str:
    """One line: the exception's first line, and the next one when the first only introduces it."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if not lines[0].endswith(":") or len(lines) == 1 else f"{lines[0]} {lines[1]}"
    return f"{type(exc).__name__}: {text}"


def _device_of(built: Built) -> str:
    for t in tree_flatten((built.args, built.kwargs))[0]:
        if isinstance(t, torch.Tensor):
            return t.device.type
    return "cpu"


def _fusion_graphs(recorder: _Recorder, eager_sdpa: tuple[EagerSdpa, ...] | None) -> tuple[FusionGraph, ...]:
    out = []
    for rec in recorder.graphs:
        if rec.forward is not None:
            # Planned as a GPU runs it: convolutions in the layout Inductor gives them, and at
            # inference the weights' copies in that layout made once, as the backend keeps them.
            forward = gpu_conv_layout(rec.forward, inference=rec.inference)
            if rec.inference:
                for copy, _, _ in kept_layout_copies(forward, rec.static):
                    copy.meta[KEPT] = True
            fg = FusionGraph.from_fx(forward, name=recorder.graph_name(rec), calls=rec.forward_calls)
            fg.eager_sdpa = eager_sdpa
            out.append(fg)
        if rec.backward is not None:
            out.append(
                FusionGraph.from_fx(
                    rec.backward, name=f"{recorder.graph_name(rec)}_bw", calls=rec.backward_calls
                )
            )
    return tuple(out)


def _locate_breaks(records: list[tuple[str, str]], recorder: _Recorder) -> tuple[GraphBreak, ...]:
    """Map each logged break to the user's line; merge repeats of one break into hits."""
    # A frame compile that breaks logs the break, then compiles the graph before it: the same
    # compile id ties a break to the graph whose outputs the eager code after the break reads.
    fed = {rec.compile_id for rec in recorder.graphs if rec.fed_standin and rec.compile_id}
    ending = {rec.compile_id: recorder.graph_name(rec) for rec in recorder.graphs if rec.compile_id}
    merged: dict[tuple[str, int, str], GraphBreak] = {}
    for text, compile_id in records:
        raw = parse_break(text)
        if raw is None:
            continue
        file, line = user_location(raw)
        stack = user_stack(raw)
        if not is_user_file(file):
            # A repeat that dynamo logged without its user stack: count it on the break with
            # the same id that was located, rather than report a line inside torch.
            same = [k for k, b in merged.items() if (b.gb_id, b.reason) == (raw.gb_id, raw.reason)]
            if same:
                file, line = same[0][0], same[0][1]
        key = (file, line, raw.gb_id or raw.reason)
        explored = "one branch" if compile_id and compile_id in fed else ""
        after = "" if raw.skipped_frame else ending.get(compile_id, "")
        if key in merged:
            # The same break seen again: from another compile of its frame, or once for the
            # frame that broke and once for the outer frame that gave up (a break in a loop).
            old = merged[key]
            merged[key] = replace(
                old,
                hits=old.hits + 1,
                explored=old.explored or explored,
                skipped_frame=old.skipped_frame or raw.skipped_frame,
                after_graph=old.after_graph or after,
                # A frame that gave up logs a shorter stack than the compile that broke.
                stack=stack if len(stack) > len(old.stack) else old.stack,
            )
            continue
        moved = (file, line) != (raw.file, raw.line)
        merged[key] = GraphBreak(
            file=file,
            line=line,
            reason=raw.reason,
            explanation=raw.explanation,
            gb_id=raw.gb_id,
            hints=raw.hints,
            dynamo_file=raw.file if moved else "",
            dynamo_line=raw.line if moved else 0,
            explored=explored,
            skipped_frame=raw.skipped_frame,
            after_graph=after,
            stack=stack,
        )
    return tuple(merged.values())
