"""Compile a graph's kernels in parallel before its first call.

Triton compiles a ``@triton.jit`` function the first time it is launched, and builds the C
launcher of each new argument signature then too (a C compiler run). A graph's kernels,
launched one after another on the first call, compile one after another. Here, once
``compile_graph`` has generated a graph's kernels, each launch they will make is warmed up
with mock arguments of the same dtypes (Triton's ``warmup``) under Triton's
``AsyncCompileMode``, which hands the compiles to a thread pool; then their launchers and
binaries load in the pool too. Triton's passes, LLVM and ptxas, and the C compiler, run
outside the GIL for much of their time.

Triton's code generator itself is Python and holds the GIL, so threads alone compile about
one kernel at a time. Worker processes (``compile_worker.py``, started when the backend is
first called and kept for the process's later graphs) add processes: once one has loaded,
the workers and this process's pool share the launches, each worker taking the next one when
free and this process keeping ``HERE_IN_FLIGHT`` of them on its pool. A worker compiles into
Triton's on-disk cache, so the pool's compile of its launches finds them there and only loads
them, and builds their launchers. While every worker is still loading (a process's first
graph), the pool compiles them all.

It is only a head start: a kernel that fails here, or whose real arguments specialize
differently (a pointer not 16-byte aligned), compiles at its first launch as before, and a
compile error there still sends its group to ATen. ``FUSELINT_COMPILE_THREADS`` sets the
pool's size (``0`` or ``1``: no precompiling; default: the CPUs this process may use, at
most 32); ``FUSELINT_COMPILE_WORKERS`` the number of worker processes (``0``: none;
default: the CPUs, at most 8).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import torch

log = logging.getLogger(__name__)

WORKER = Path(__file__).with_name("compile_worker.py")
# Runs the worker file without putting its folder (or the working directory) on sys.path, where
# this package's modules would shadow the standard library's (random.py).
_BOOT = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; import runpy; "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)
WORKER_WAIT_S = 300.0  # a graph's kernels that the workers have not compiled by then compile here


def _count(variable: str, most: int) -> int:
    raw = os.environ.get(variable)
    if raw is not None:
        try:
            return max(0, int(raw))
        except ValueError:
            log.warning("%s=%r is not a number; compiling one kernel at a time", variable, raw)
            return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return min(most, cpus)


def threads() -> int:
    return _count("FUSELINT_COMPILE_THREADS", 32)


def worker_count() -> int:
    return _count("FUSELINT_COMPILE_WORKERS", 8)


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


def _job(index: int, fn: object, dtypes: tuple, grid: tuple, warps: int, consts: dict) -> dict | None:
    """A launch as a worker's job, or None where it cannot be told in JSON."""
    jit = getattr(fn, "fn", None)
    module = sys.modules.get(getattr(jit, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if path is None:
        return None
    job = {
        "id": index,
        "path": path,
        "module": jit.__module__,
        "fn": jit.__name__,
        "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
        "grid": list(grid),
        "warps": warps,
        "consts": consts,
    }
    try:
        json.dumps(job)
    except (TypeError, ValueError):
        return None
    return job


def _triton_cache_dir() -> str | None:
    try:
        from triton import knobs

        return str(knobs.cache.dir)
    except Exception:  # an older Triton: its variable, if set
        return os.environ.get("TRITON_CACHE_DIR")


class _Worker:
    """One compile process; a thread reads its lines: "ready" once it has loaded, then answers."""

    def __init__(self, target: list, env: dict) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.ready = threading.Event()
        self.answers: queue.Queue = queue.Queue()
        self.proc.stdin.write(json.dumps({"target": target}) + "\n")
        self.proc.stdin.flush()
        threading.Thread(target=self._read, daemon=True, name="fuselint-compile-worker").start()

    def _read(self) -> None:
        try:
            for line in self.proc.stdout:
                message = json.loads(line)
                if message.get("ready"):
                    self.ready.set()
                else:
                    self.answers.put(message)
        except (OSError, ValueError):  # closed, or not ours: the worker is treated as gone
            pass
        self.answers.put(None)

    def ask(self, job: dict, wait_s: float) -> dict | None:
        """The worker's answer to `job`, or None if it has gone or did not answer in time."""
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            return self.answers.get(timeout=max(wait_s, 0.1))
        except (OSError, ValueError, queue.Empty):
            self.close()
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


class CompileWorkers:
    """Processes that compile launches into Triton's cache (compile_worker.py), kept between graphs."""

    def __init__(self, count: int, target: list) -> None:
        env = dict(os.environ)
        cache = _triton_cache_dir()
        if cache:
            env["TRITON_CACHE_DIR"] = cache
        self.target = target
        self.workers = [_Worker(target, env) for _ in range(count)]

    def alive(self) -> list[_Worker]:
        return [w for w in self.workers if w.proc.poll() is None]

    def share(
        self, jobs: list[dict], compile_here: Callable[[dict], None], wait_s: float = WORKER_WAIT_S
    ) -> int:
        """Compile the jobs: each ready worker and this thread take the next one until none is
        left (workers that are still loading take none). The number the workers compiled."""
        todo: queue.Queue = queue.Queue()
        for job in jobs:
            todo.put(job)
        deadline = time.monotonic() + wait_s
        done: list[int] = []

        def serve(worker: _Worker) -> None:
            while not worker.ready.wait(0.01):
                if todo.empty() or worker.proc.poll() is not None:
                    return
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                answer = worker.ask(job, deadline - time.monotonic())
                if answer is None:
                    return
                if answer.get("ok"):
                    done.append(job["id"])
                else:
                    log.debug("fuselint: worker could not compile %s (%s)", job["fn"], answer.get("error"))

        servers = [threading.Thread(target=serve, args=(w,), daemon=True) for w in self.alive()]
        for t in servers:
            t.start()
        try:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    break
                compile_here(job)
        except BaseException:
            # Its servers would go on answering this share's jobs into a later share's: the workers
            # go, and the next graph starts new ones.
            self.close()
            raise
        for t in servers:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in servers):
            log.warning(
                "fuselint: compile workers did not finish within %.0f s; the rest compile here", wait_s
            )
            self.close()
        return len(done)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


_workers: CompileWorkers | None = None
_workers_lock = threading.Lock()


def _target(device: torch.device) -> list:
    from triton.runtime.driver import driver

    with torch.cuda.device(device):
        t = driver.active.get_current_target()
    return [t.backend, t.arch, t.warp_size]


def start_workers(device: torch.device) -> CompileWorkers | None:
    """The compile workers for `device`'s target: started on a graph's first compile, so that
    they load while the graph is planned, and kept for later graphs."""
    global _workers
    count = worker_count()
    if count < 1 or device.type != "cuda":
        return None
    with _workers_lock:
        target = _target(device)
        if _workers is not None and _workers.target == target and _workers.alive():
            return _workers
        if _workers is not None:
            _workers.close()
        _workers = CompileWorkers(count, target)
        return _workers


def start_workers_for(example_inputs: list) -> None:
    """Start the compile workers if a graph's inputs are on a CUDA device (a head start only:
    without them the threads compile everything)."""
    from fuselint.backend.runtime import interpreting

    device = next((v.device for v in example_inputs if isinstance(v, torch.Tensor) and v.is_cuda), None)
    if device is None or interpreting(device):
        return
    try:
        start_workers(device)
    except Exception as exc:
        log.warning("fuselint: compile workers not started (%s: %s)", type(exc).__name__, exc)


@atexit.register
def _stop_workers() -> None:
    if _workers is not None:
        _workers.close()


def _warm(launch: tuple) -> object | None:
    """Triton's `warmup` of one launch (`distinct_launches`): its compiled kernel, or a future of
    it under `AsyncCompileMode`; None where it fails (it compiles at its first launch, or falls
    back there, which says why)."""
    fn, dtypes, grid, warps, consts, _ = launch
    try:
        return fn.warmup(*dtypes, grid=grid, num_warps=warps, **consts)
    except Exception as exc:
        log.debug("fuselint: no precompile for %s (%s)", fn, exc)
        return None


# Launches this process keeps compiling on its thread pool at once while worker processes take the
# rest: Triton's code generator holds the GIL, so more only queue here what a worker could take.
HERE_IN_FLIGHT = 2


def _share(device: torch.device, todo: list[tuple], warmed: dict[int, object]) -> int:
    """Hand the launches to the compile workers, if one has loaded, with this process taking its
    share on the thread pool (under the caller's `AsyncCompileMode`; what it starts goes into
    `warmed`, by index into `todo`). The number the workers compiled.

    Workers that are all still loading (a process's first graph) take nothing: waiting for
    them, or compiling here one launch at a time meanwhile, was slower than the pool alone
    (a fresh ViT: 8.0 s against 6.2 s without workers, bench/results/h100-s14)."""
    workers = start_workers(device)
    if workers is None or not any(w.ready.is_set() for w in workers.alive()):
        return 0
    jobs = [j for j in (_job(i, *launch[:5]) for i, launch in enumerate(todo)) if j is not None]
    if len(jobs) < 2:
        return 0

    def compile_here(job: dict) -> None:
        warmed[job["id"]] = _warm(todo[job["id"]])
        running = [f.future for f in warmed.values() if getattr(f, "future", None) is not None]
        running = [f for f in running if not f.done()]
        if len(running) >= HERE_IN_FLIGHT:
            wait(running, return_when=FIRST_COMPLETED)

    return workers.share(jobs, compile_here)


def precompile(kernels: Iterable[object]) -> tuple[int, int]:
    """Compile and load the kernels' binaries ahead of the first call: (launches warmed on the
    thread pool, of them compiled by the worker processes)."""
    n = threads()
    todo = distinct_launches(kernels)
    if n < 2 or len(todo) < 2:
        return 0, 0
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:  # a Triton without it: every kernel compiles at its first launch
        return 0, 0
    device = todo[0][5]
    todo = [launch for launch in todo if launch[5] == device]  # others compile at their launch
    by_workers = 0
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="fuselint-compile") as pool:
        with torch.cuda.device(device), AsyncCompileMode(pool, ignore_errors=True):
            warmed: dict[int, object] = {}
            try:
                by_workers = _share(device, todo, warmed)
            except Exception as exc:  # the threads compile them all, as without workers
                log.warning("fuselint: compile workers skipped (%s: %s)", type(exc).__name__, exc)
            # A worker's launch compiles here again, finding its binary in Triton's cache.
            futures = [warmed[i] if i in warmed else _warm(launch) for i, launch in enumerate(todo)]
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
    return len(compiled), by_workers
