"""Load and launch generated kernels.

Kernel modules are written once under a cache directory named by the hash of their
source (``~/.cache/fuselint/kernels/<hash>.py``, or ``$FUSELINT_CACHE_DIR``) and imported
from there, because ``@triton.jit`` reads a function's source from its file; a second
process finds the file and reuses it (Triton caches the compiled binary by the same
source). ``FUSELINT_CACHE=0`` writes to a fresh temporary directory instead, for cold
timings. ``FUSELINT_DUMP_DIR`` also receives a readable copy named after the kernel.

A :class:`FusedKernel` runs one group. It checks that its inputs have the strides it was
generated for and otherwise (or when Triton fails to compile it) runs the group's ATen
nodes instead, so a call never computes the wrong thing. Its first launch goes through
Triton's JIT launcher (``kernel[grid](...)``), later ones straight to the compiled binary's C
launcher (:class:`FastLaunch`), which skips Triton's per-call argument binding;
``FUSELINT_FAST_LAUNCH=0`` keeps every call on the JIT launcher. A split reduction is one
FusedKernel that launches two or three kernels (chunks, their combination, then the
full-size stores that need it) around an fp32 workspace it allocates per call.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from fuselint.backend.heuristics import LaunchConfig
from fuselint.backend.lowering import KernelIR

_MODULES: dict[tuple[str, bool], object] = {}
_TEMP_DIR: Path | None = None


def interpreter_ready() -> bool:
    """TRITON_INTERPRET=1 was set before triton was imported, as the interpreter needs: triton
    decides at import whether its own library (tl.sum, tl.max) is interpreted or compiled."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    import triton.language as tl

    return type(tl.max).__name__ == "InterpretedFunction"


def interpreting(device: torch.device) -> bool:
    """Kernels on CPU tensors run in Triton's interpreter, only when the user asked for it."""
    return device.type == "cpu" and interpreter_ready()


def can_generate_for(device: torch.device) -> bool:
    return device.type == "cuda" or interpreting(device)


# fuselint's own custom ops (`fuselint::...`) -> the Python function behind each. A graph's
# generated call function calls it directly: a call through the op goes through the dispatcher
# and torch.library's Python wrapper (its aliasing check walks every tensor's storage), which
# cost GPT-2's training step ~1 ms of host per call for two embedding gradients (H100).
DIRECT_IMPLS: dict[str, Callable] = {}


def direct_impl(qualname: str) -> Callable[[Callable], Callable]:
    """Record `fn` as the body of custom op `qualname`; put it under ``@custom_op(qualname)``."""

    def record(fn: Callable) -> Callable:
        DIRECT_IMPLS[qualname] = fn
        return fn

    return record


class HandKernel:
    """A hand-written `@triton.jit` kernel behind a custom op (the embedding scatter-add, the
    max-pool gradient): `launch` runs it until a launch fails to compile or run; from then on it
    returns False at once and the op computes its result through ATen, the reason logged once at
    WARNING on `fuselint.backend` (the backend is never wrong where it cannot generate).

    A launch whose arguments Triton would specialize the same way as an earlier one's (each
    tensor's dtype and 16-byte alignment, every int and constexpr by value: see `_same_binary`)
    goes straight to that launch's compiled binary through its C launcher, as
    :class:`FastLaunch` does for generated kernels; Triton's binding and cache lookup cost
    ~50 µs of host per launch here (H100 machine)."""

    def __init__(self, kernel: object, what: str) -> None:
        self.kernel = kernel
        self.what = what  # "embedding gradients": what runs through ATen when it fails
        self.failed: str | None = None
        self._binaries: dict[tuple, tuple] = {}  # `_same_binary` key -> (run, function, packed)
        self.fast_launches = 0

    def launch(self, grid: tuple, *args: object, **kwargs: object) -> bool:
        if self.failed is not None:
            return False
        key = _same_binary(args, kwargs) if FAST_LAUNCH and not _hooks_active() else None
        binary = self._binaries.get(key) if key is not None else None
        if binary is not None:
            run, function, packed = binary
            g0, g1, g2 = (*grid, 1, 1)[:3]
            order = self.kernel.arg_names[len(args) :]
            run(g0, g1, g2, _current_stream(), function, packed, None, None, None,
                *args, *(kwargs[name] for name in order))  # fmt: skip
            self.fast_launches += 1
            return True
        try:
            compiled = self.kernel[grid](*args, **kwargs)
        except Exception as exc:  # no binary for this device, or the launch itself failed
            self.failed = f"{type(exc).__name__}: {exc}".splitlines()[0]
            logging.getLogger("fuselint.backend").warning(
                "fuselint: %s run through ATen: %s", self.what, self.failed
            )
            return False
        if key is not None and self._fast_ready(compiled, args, kwargs):
            self._binaries[key] = (compiled.run, compiled.function, compiled.packed_metadata)
        return True

    def _fast_ready(self, compiled: object, args: tuple, kwargs: dict) -> bool:
        """Whether later launches may go to `compiled` directly: a CUDA launch whose keyword
        arguments are exactly the kernel's parameters after the positional ones."""
        names = getattr(self.kernel, "arg_names", None)
        if names is None or list(names[len(args) :]) != list(kwargs):
            return False
        if not any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            return False
        return (
            _launchable(compiled)
            and compiled.function is not None
            and hasattr(torch._C, "_cuda_getCurrentRawStream")
        )


def _same_binary(args: tuple, kwargs: dict) -> tuple | None:
    """A key equal for two launches exactly when Triton would pick the same binary for them:
    each tensor's device, dtype and pointer alignment, every int, bool and constexpr by value
    (Triton specializes ints equal to 1 and divisible by 16). None for any other argument."""
    key: list = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.device, a.dtype, a.data_ptr() % 16 == 0))
        elif type(a) in (int, bool):
            key.append((type(a), a))
        else:
            return None
    for name, value in kwargs.items():
        if type(value) not in (int, bool):
            return None
        key.append((name, type(value), value))
    return tuple(key)


def _current_stream() -> int:
    """The current CUDA stream's handle, as Triton's own launcher asks for it."""
    return torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())


def cache_dir() -> Path:
    global _TEMP_DIR
    if os.environ.get("FUSELINT_CACHE", "1") == "0":
        if _TEMP_DIR is None:
            _TEMP_DIR = Path(tempfile.mkdtemp(prefix="fuselint-kernels-"))
            # Nothing else will read it: a process with caching off leaves no folder behind.
            atexit.register(shutil.rmtree, _TEMP_DIR, ignore_errors=True)
        return _TEMP_DIR
    root = os.environ.get("FUSELINT_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "fuselint" / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def interpret_env(interpret: bool) -> Iterator[None]:
    # @triton.jit decides interpreter-or-compiler when it decorates, from this variable.
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


def source_path(source: str) -> Path:
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    return cache_dir() / f"k{digest}.py"


def load_kernel(source: str, fn_name: str, interpret: bool) -> Callable:
    """The @triton.jit function `fn_name` of `source`, written to the cache and imported."""
    path = source_path(source)
    if not path.exists():
        _write_atomic(path, source)
    dump = os.environ.get("FUSELINT_DUMP_DIR")
    if dump:
        Path(dump).mkdir(parents=True, exist_ok=True)
        target = Path(dump) / f"{fn_name}_{path.stem}.py"
        if not target.exists():
            _write_atomic(target, source)
    key = (path.stem, interpret)
    if key not in _MODULES:
        modname = f"fuselint_kernels.{path.stem}{'_interp' if interpret else ''}"
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        with interpret_env(interpret):
            spec.loader.exec_module(module)
        sys.modules[modname] = module
        _MODULES[key] = module
    return getattr(_MODULES[key], fn_name)


class FusedKernel:
    """Callable that runs one fused group: inputs in, a tuple of new outputs out."""

    def __init__(
        self,
        ir: KernelIR,
        cfg: LaunchConfig,
        source: str,
        fn_name: str,
        fallback: Callable[..., tuple],
    ) -> None:
        self.ir = ir
        self.cfg = cfg
        self.source = source
        self.path = source_path(source)
        # torch.fx names call targets after these when it writes the graph's code.
        self.__name__ = fn_name
        self.__qualname__ = fn_name
        self.__module__ = "fuselint.backend.runtime"
        self.fallback = fallback
        self.fn = load_kernel(source, fn_name, interpreting(ir.device))
        self.grid = (cfg.grid,)
        self.consts = {"XBLOCK": cfg.xblock}
        if ir.ydims:
            self.consts["RBLOCK"] = cfg.rblock
        self.num_warps = cfg.num_warps
        # A split reduction: the launches after the first, (kernel, grid, constexprs, warps)
        # each, and the workspace's element count.
        self.more: list[tuple[Callable, tuple, dict, int]] = []
        self.workspace = 0
        if cfg.combine is not None:
            c = cfg.combine
            self.grid = (cfg.grid, cfg.split)
            interpret = interpreting(ir.device)
            fn = load_kernel(source, fn_name + "_combine", interpret)
            self.more.append((fn, (c.grid,), {"XBLOCK": c.xblock, "RBLOCK": c.rblock}, c.num_warps))
            if ir.late_stores:
                fn = load_kernel(source, fn_name + "_store", interpret)
                self.more.append((fn, self.grid, self.consts, self.num_warps))
            self.workspace = split_workspace(ir, cfg)
        self.in_strides = tuple(m.stride for m in ir.input_meta)
        self._in_sizes = tuple(m.shape for m in ir.input_meta)
        # Inputs passed as the base of the view the kernel reads: index -> the view ops, for the fallback.
        self.views: dict[int, Callable] = {}
        self.out_specs = tuple((m.shape, m.stride, m.dtype) for m in ir.output_meta)
        # it stores into some of its inputs (copy_ into a graph input): its call is never dead code
        self.writes_inputs = any(s.input_index >= 0 for s in ir.stores)
        # Those inputs, when the kernel launches several times: Triton compiles each launch as it
        # first runs it, so one that fails to compile may follow one that stored into them, and
        # the ATen fallback must then start from their old values.
        self._restore = sorted({s.input_index for s in ir.stores if s.input_index >= 0}) if self.more else []
        self.device = ir.device
        # Triton reads TRITON_INTERPRET while it compiles, too: a GPU kernel launched in a
        # process that interprets CPU kernels (the test suite) compiles with it switched off.
        self._hide_interpret = not interpreting(ir.device) and os.environ.get("TRITON_INTERPRET") == "1"
        self.calls = 0
        self.fallback_calls = 0
        self.broken: str | None = None
        self._fast: FastLaunch | None = None
        self._fast_more: tuple[FastLaunch, ...] = ()
        self._fast_tried = False  # build the fast launcher once, after the first JIT launch

    def _layout_matches(self, args: tuple) -> bool:
        for t, stride, shape in zip(args, self.in_strides, self._in_sizes, strict=True):
            got = t.stride()
            if got != stride and any(n != 1 and a != b for n, a, b in zip(shape, got, stride, strict=True)):
                return False
        return True

    def read_through_view(self, index: int, base_shape: tuple, base_stride: tuple, view: Callable) -> None:
        """Take input `index` as the base tensor of the view the kernel was generated for (a view
        at the base's own storage offset): the kernel's baked strides already index the view, so
        only the base's layout is checked per call, and no view op runs. `view` redoes the view
        on the base, for the ATen fallback."""
        self.views[index] = view
        strides, sizes = list(self.in_strides), list(self._in_sizes)
        strides[index], sizes[index] = tuple(base_stride), tuple(base_shape)
        self.in_strides, self._in_sizes = tuple(strides), tuple(sizes)

    def _run_fallback(self, args: tuple) -> tuple:
        self.fallback_calls += 1
        if self.views:
            args = tuple(self.views[i](a) if i in self.views else a for i, a in enumerate(args))
        return tuple(self.fallback(*args))

    def launches(self) -> list[tuple[Callable, tuple, dict, int]]:
        """(jit function, grid, constexprs, warps) of each launch a call makes, in order."""
        return [(self.fn, self.grid, self.consts, self.num_warps), *self.more]

    def argument_dtypes(self) -> tuple[torch.dtype, ...]:
        """The dtypes of the tensors each launch takes: inputs, outputs, then the split's fp32
        workspace."""
        dtypes = tuple(m.dtype for m in self.ir.input_meta) + tuple(spec[2] for spec in self.out_specs)
        return dtypes + ((torch.float32,) if self.workspace else ())

    def _launch_jit(self, args: tuple, outs: tuple) -> list:
        """Triton's ordinary launch: binds and specializes the arguments on every call. The
        compiled kernels, in launch order."""
        with interpret_env(False) if self._hide_interpret else contextlib.nullcontext():
            return [
                fn[grid](*args, *outs, num_warps=warps, **consts)
                for fn, grid, consts, warps in self.launches()
            ]

    def _workspace(self, device: torch.device) -> tuple:
        """() or the split reduction's fp32 workspace, passed after the outputs."""
        if not self.workspace:
            return ()
        return (torch.empty((self.workspace,), dtype=torch.float32, device=device),)

    def __call__(self, *args: torch.Tensor) -> tuple:
        fast = self._fast
        if fast is not None and FAST_LAUNCH and fast.matches(args, self.in_strides):
            alloc = fast.alloc
            if alloc is not None:
                outs = tuple(alloc(s, st, dt) for s, st, dt in self.out_specs)
            else:
                outs = tuple(
                    torch.empty_strided(s, st, dtype=dt, device=self.device) for s, st, dt in self.out_specs
                )
            try:
                if self._fast_more:
                    with_ws = outs + self._workspace(self.device)
                    fast.launch(args, with_ws)
                    for step in self._fast_more:
                        step.launch(args, with_ws)
                else:
                    fast.launch(args, outs)
            except Exception as exc:  # the launcher refused the arguments before launching
                warnings.warn(f"fuselint: fast launch of {self.__name__} failed ({exc})", stacklevel=2)
                self._fast = None
            else:
                self.calls += 1
                return outs
        if self.broken is not None or not self._layout_matches(args):
            return self._run_fallback(args)
        device = args[0].device if args else self.device
        outs = tuple(torch.empty_strided(s, st, dtype=dt, device=device) for s, st, dt in self.out_specs)
        saved = [(args[i], args[i].clone()) for i in self._restore]
        try:
            compiled = self._launch_jit(args, outs + self._workspace(device))
        except Exception as exc:  # a Triton compile error: this group runs through ATen from now on
            for arg, old in saved:
                arg.copy_(old)
            self.broken = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"fuselint: kernel {self.__name__} failed ({self.broken}); using ATen", stacklevel=2
            )
            return self._run_fallback(args)
        self.calls += 1
        if not self._fast_tried and self.device.type == "cuda" and FAST_LAUNCH:
            self._fast_tried = True
            fast = FastLaunch.build(compiled[0], self.grid, self.consts, args, outs)
            more = [
                FastLaunch.build(c, grid, consts, args, outs)
                for c, (_, grid, consts, _) in zip(compiled[1:], self.more, strict=True)
            ]
            if fast is not None and None not in more:
                self._fast, self._fast_more = fast, tuple(more)
        return outs


def split_workspace(ir: KernelIR, cfg: LaunchConfig) -> int:
    """fp32 elements of a split reduction's workspace: each reduction's result per chunk and
    row, then (when full-size stores need them) each reduction's total per row."""
    n = len(ir.reductions)
    return n * cfg.split * ir.xnumel + (n * ir.xnumel if ir.late_stores else 0)


# FUSELINT_FAST_LAUNCH=0 keeps every call on Triton's JIT launcher (for comparison and as an escape hatch).
FAST_LAUNCH = os.environ.get("FUSELINT_FAST_LAUNCH", "1") != "0"


def cuda_allocator() -> Callable | None:
    """The C allocator Inductor's own generated code calls for CUDA tensors, which skips
    torch.empty_strided's argument parsing: ``alloc(shape, stride, dtype)``. It allocates on the
    current device, so only where there is one device (else None: torch.empty_strided with the
    tensor's device)."""
    fast_empty = getattr(torch._C._dynamo.guards, "_empty_strided_cuda", None)
    return fast_empty if fast_empty is not None and torch.cuda.device_count() == 1 else None


class FastLaunch:
    """Launch a kernel Triton has already compiled, without its per-call binding.

    Triton's ``kernel[grid](...)`` binds the arguments, computes a specialization key
    (dtypes, 16-byte alignment of each pointer), looks the binary up and then calls
    ``CompiledKernel.run`` (the C launcher) with the grid, the stream, the binary's handle and
    metadata, the launch hooks and every argument in signature order, constexprs included.
    That is the same on triton 3.6 and 3.9. Our kernels take only tensors and constexprs,
    and the graph's guards fix shapes and dtypes, so the key can change only with a pointer's
    alignment or the strides: both are checked per call (anything else goes back to the JIT
    path, which recompiles as needed). Launch hooks (profilers) also send calls back to it.
    """

    __slots__ = (
        "run",
        "grid",
        "function",
        "packed",
        "consts",
        "stream_of",
        "device_index",
        "aligned",
        "alloc",
    )

    def __init__(self, compiled: object, grid: tuple, consts: tuple, device_index: int, aligned: tuple):
        self.run = compiled.run  # the launcher (loads the binary's handles on first access)
        self.function = compiled.function
        self.packed = compiled.packed_metadata
        g = tuple(grid) + (1, 1)
        self.grid = g[:3]
        self.consts = consts
        self.device_index = device_index
        # What triton's driver itself calls for the current stream when torch is loaded.
        self.stream_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.aligned = aligned  # per input: was its pointer 16-byte aligned when compiled?
        self.alloc = cuda_allocator()  # the outputs'

    @staticmethod
    def build(compiled: object, grid: tuple, consts: dict, args: tuple, outs: tuple) -> FastLaunch | None:
        if not _launchable(compiled):
            return None
        try:
            fast = FastLaunch(
                compiled,
                grid,
                tuple(consts.values()),
                torch.cuda.current_device(),
                tuple(t.data_ptr() % 16 == 0 for t in args),
            )
        except Exception:  # another triton layout: stay on the JIT path
            return None
        if fast.function is None or fast.stream_of is None or any(o.data_ptr() % 16 for o in outs):
            return None
        return fast

    def matches(self, args: tuple, strides: tuple) -> bool:
        if _hooks_active():
            return False
        for t, stride, aligned in zip(args, strides, self.aligned, strict=True):
            if t.stride() != stride or (aligned and t.data_ptr() % 16):
                return False
        return True

    def launch(self, args: tuple, outs: tuple) -> None:
        g0, g1, g2 = self.grid
        self.run(
            g0,
            g1,
            g2,
            self.stream_of(self.device_index),
            self.function,
            self.packed,
            None,
            None,
            None,
            *args,
            *outs,
            *self.consts,
        )


def _launchable(compiled: object) -> bool:
    """Whether `compiled` (what Triton's JIT launch returned) exposes its C launcher, binary handle
    and metadata; the first such kernel also reads where Triton keeps its launch hooks."""
    global _KNOBS_RUNTIME
    if not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
        return False
    if _KNOBS_RUNTIME is None:
        _KNOBS_RUNTIME = _knobs_runtime()
    return True


def _hooks_active() -> bool:
    """Whether a launch hook is installed (None on older triton, an empty HookChain on 3.9)."""
    runtime = _KNOBS_RUNTIME
    if runtime is None:
        return False
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return True
    return False


def _knobs_runtime() -> object | None:
    try:
        from triton import knobs
    except ImportError:
        return None
    return getattr(knobs, "runtime", None)


# Set when the first fast launcher is built (importing triton here would fix TRITON_INTERPRET too early).
_KNOBS_RUNTIME: object | None = None


def keeps_effects(node: torch.fx.Node) -> bool:
    """Dead-code elimination must keep `node`: an impure op, a kernel that writes its inputs, or
    an op that returns nothing (``aten._assert_async``, which fx does not count as impure)."""
    if isinstance(node.target, torch._ops.OpOverload) and not node.target._schema.returns:
        return True
    return node.is_impure() or bool(getattr(node.target, "writes_inputs", False))
