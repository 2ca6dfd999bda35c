"""Compile a graph's kernels in parallel before its first call.

Triton compiles a ``@triton.jit`` function the first time it is launched, and builds the C
launcher of each new argument signature then too (a C compiler run). A graph's kernels,
launched one after another on the first call, compile one after another. Here, once
``compile_graph`` has generated a graph's kernels, each launch they will make is warmed up
with mock arguments of the same dtypes (Triton's ``warmup``) under Triton's
``AsyncCompileMode``, which hands the compiles to a thread pool; then their launchers and
binaries load in the pool too. Triton's passes, LLVM and ptxas, and the C compiler, run
outside the GIL for much of their time.

It is only a head start: a kernel that fails here, or whose real arguments specialize
differently (a pointer not 16-byte aligned), compiles at its first launch as before, and a
compile error there still sends its group to ATen. ``FUSELINT_COMPILE_THREADS`` sets the
pool's size (``0`` or ``1``: no precompiling; default: the CPUs this process may use, at
most 32).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import torch

log = logging.getLogger(__name__)


def threads() -> int:
    raw = os.environ.get("FUSELINT_COMPILE_THREADS")
    if raw is not None:
        try:
            return max(0, int(raw))
        except ValueError:
            log.warning("FUSELINT_COMPILE_THREADS=%r is not a number; compiling one kernel at a time", raw)
            return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return min(32, cpus)


def distinct_launches(kernels: Iterable[object]) -> list[tuple]:
    """(jit function, argument dtypes, grid, num_warps, constexprs, device) of every distinct
    launch the CUDA kernels make, in launch order."""
    seen: set[tuple] = set()
    out: list[tuple] = []
    for k in kernels:
        if k.device.type != "cuda" or k.broken is not None:
            continue
        dtypes = k.argument_dtypes()
        for fn, grid, consts, warps in k.launches():
            key = (id(fn), dtypes, warps, tuple(sorted(consts.items())))
            if key not in seen:
                seen.add(key)
                out.append((fn, dtypes, grid, warps, consts, k.device))
    return out


def precompile(kernels: Iterable[object]) -> int:
    """Compile and load the kernels' binaries on a thread pool; the number of launches warmed."""
    n = threads()
    todo = distinct_launches(kernels)
    if n < 2 or len(todo) < 2:
        return 0
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:  # a Triton without it: every kernel compiles at its first launch
        return 0
    device = todo[0][5]
    futures = []
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="fuselint-compile") as pool:
        with torch.cuda.device(device), AsyncCompileMode(pool, ignore_errors=True):
            for fn, dtypes, grid, warps, consts, where in todo:
                if where != device:  # one graph's kernels share a device; others compile on launch
                    continue
                try:
                    futures.append(fn.warmup(*dtypes, grid=grid, num_warps=warps, **consts))
                except Exception as exc:  # compiles at its first launch, or falls back there
                    log.debug("fuselint: no precompile for %s (%s)", fn, exc)
        compiled = []
        for f in futures:
            kernel = f.result(ignore_errors=True) if hasattr(f, "result") else f
            if kernel is not None:
                compiled.append(kernel)

        def load(kernel: object) -> None:
            with torch.cuda.device(device):
                try:
                    kernel.run  # noqa: B018  (the property builds the launcher and loads the binary)
                except Exception as exc:  # too much shared memory...: the first launch says so
                    log.debug("fuselint: cannot load %s ahead (%s)", kernel, exc)

        list(pool.map(load, compiled))
    return len(compiled)
