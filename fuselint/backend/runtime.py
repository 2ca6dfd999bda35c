"""Load and launch generated kernels.

Kernel modules are written once under a cache directory named by the hash of their
source (``~/.cache/fuselint/kernels/<hash>.py``, or ``$FUSELINT_CACHE_DIR``) and imported
from there, because ``@triton.jit`` reads a function's source from its file; a second
process finds the file and reuses it (Triton caches the compiled binary by the same
source). ``FUSELINT_CACHE=0`` writes to a fresh temporary directory instead, for cold
timings. ``FUSELINT_DUMP_DIR`` also receives a readable copy named after the kernel.

A :class:`FusedKernel` runs one group. It checks that its inputs have the strides it was
generated for and otherwise (or when Triton fails to compile it) runs the group's ATen
nodes instead, so a call never computes the wrong thing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
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


def cache_dir() -> Path:
    global _TEMP_DIR
    if os.environ.get("FUSELINT_CACHE", "1") == "0":
        if _TEMP_DIR is None:
            _TEMP_DIR = Path(tempfile.mkdtemp(prefix="fuselint-kernels-"))
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
        if ir.rdims:
            self.consts["RBLOCK"] = cfg.rblock
        self.num_warps = cfg.num_warps
        self.in_strides = tuple(m.stride for m in ir.input_meta)
        self._in_sizes = tuple(m.shape for m in ir.input_meta)
        self.out_specs = tuple((m.shape, m.stride, m.dtype) for m in ir.output_meta)
        self.device = ir.device
        # Triton reads TRITON_INTERPRET while it compiles, too: a GPU kernel launched in a
        # process that interprets CPU kernels (the test suite) compiles with it switched off.
        self._hide_interpret = not interpreting(ir.device) and os.environ.get("TRITON_INTERPRET") == "1"
        self.calls = 0
        self.fallback_calls = 0
        self.broken: str | None = None

    def _layout_matches(self, args: tuple) -> bool:
        for t, stride, shape in zip(args, self.in_strides, self._in_sizes, strict=True):
            got = t.stride()
            if got != stride and any(n != 1 and a != b for n, a, b in zip(shape, got, stride, strict=True)):
                return False
        return True

    def _run_fallback(self, args: tuple) -> tuple:
        self.fallback_calls += 1
        return tuple(self.fallback(*args))

    def __call__(self, *args: torch.Tensor) -> tuple:
        if self.broken is not None or not self._layout_matches(args):
            return self._run_fallback(args)
        device = args[0].device if args else self.device
        outs = tuple(torch.empty_strided(s, st, dtype=dt, device=device) for s, st, dt in self.out_specs)
        try:
            if self._hide_interpret:
                with interpret_env(False):
                    self.fn[self.grid](*args, *outs, num_warps=self.num_warps, **self.consts)
            else:
                self.fn[self.grid](*args, *outs, num_warps=self.num_warps, **self.consts)
        except Exception as exc:  # a Triton compile error: this group runs through ATen from now on
            self.broken = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"fuselint: kernel {self.__name__} failed ({self.broken}); using ATen", stacklevel=2
            )
            return self._run_fallback(args)
        self.calls += 1
        return outs
