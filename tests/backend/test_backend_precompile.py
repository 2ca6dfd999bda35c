"""Which launches the compile pool warms, and how many threads it takes (no GPU needed)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fuselint.backend import precompile as pc
from fuselint.backend.runtime import FusedKernel


def _kernel(fn, device="cuda", dtypes=(torch.bfloat16,), out=torch.bfloat16, more=(), workspace=0, warps=4):
    ir = SimpleNamespace(input_meta=[SimpleNamespace(dtype=d) for d in dtypes])
    kernel = SimpleNamespace(
        device=torch.device(device),
        broken=None,
        ir=ir,
        out_specs=(((4,), (1,), out),),
        workspace=workspace,
        fn=fn,
        grid=(1,),
        consts={"XBLOCK": 64},
        num_warps=warps,
        more=list(more),
    )
    # FusedKernel's own accounts of its launches and their arguments, on this stand-in
    kernel.launches = lambda: FusedKernel.launches(kernel)
    kernel.argument_dtypes = lambda: FusedKernel.argument_dtypes(kernel)
    return kernel


def test_each_distinct_launch_once_in_launch_order_and_cpu_kernels_left_out():
    a, b, c = object(), object(), object()
    kernels = [
        _kernel(a),
        _kernel(a),  # the same function with the same arguments: one compile
        _kernel(a, dtypes=(torch.float32,)),  # another specialization of it
        _kernel(b, device="cpu"),  # interpreted: nothing to compile
        _kernel(c, workspace=8, more=[(b, (2,), {"XBLOCK": 8, "RBLOCK": 16}, 2)]),
    ]
    got = pc.distinct_launches(kernels)
    assert [(fn, dtypes) for fn, dtypes, *_ in got] == [
        (a, (torch.bfloat16, torch.bfloat16)),
        (a, (torch.float32, torch.bfloat16)),
        (c, (torch.bfloat16, torch.bfloat16, torch.float32)),  # the split's workspace is fp32
        (b, (torch.bfloat16, torch.bfloat16, torch.float32)),  # its combine kernel
    ]
    assert got[3][3] == 2 and got[3][4] == {"XBLOCK": 8, "RBLOCK": 16}


def test_broken_kernels_are_not_warmed():
    k = _kernel(object())
    k.broken = "CompilationError"
    assert pc.distinct_launches([k]) == []


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUSELINT_COMPILE_THREADS", "0")
    assert pc.threads() == 0
    assert pc.precompile([_kernel(object()), _kernel(object())]) == (0, 0)
    monkeypatch.setenv("FUSELINT_COMPILE_THREADS", "six")
    assert pc.threads() == 0
    monkeypatch.delenv("FUSELINT_COMPILE_THREADS")
    assert 1 <= pc.threads() <= 32


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUSELINT_COMPILE_WORKERS", "3")
    assert pc.worker_count() == 3
    monkeypatch.setenv("FUSELINT_COMPILE_WORKERS", "many")
    assert pc.worker_count() == 0


def test_no_workers_for_cpu_graphs():
    assert pc.start_workers(torch.device("cpu")) is None


def _nvidia_compiler() -> bool:
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return Path(get_ptxas(90).path).exists()
    except Exception:
        return False


ADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, N: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
"""


@pytest.mark.skipif(not _nvidia_compiler(), reason="Triton's NVIDIA compiler (ptxas) is not installed")
def test_workers_compile_into_tritons_cache_and_the_parent_only_loads(tmp_path, monkeypatch):
    """Two worker processes and this one share the jobs; the workers compile theirs for an H100
    without a GPU, and compiling the same launch here afterwards finds each one in Triton's
    cache (its code generator never runs); a job that cannot compile is answered, not fatal."""
    import triton.compiler.compiler as tc
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    from fuselint.backend.compile_worker import TargetOnly
    from fuselint.backend.runtime import load_kernel

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("FUSELINT_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("FUSELINT_CACHE", "1")
    fn = load_kernel(ADD, "add_kernel", interpret=False)
    launches = [
        (fn, (torch.float32,) * 3, (1,), 4, {"N": 100, "BLOCK": 128}),
        (fn, (torch.bfloat16,) * 3, (1,), 4, {"N": 100, "BLOCK": 256}),
    ]
    jobs = [pc._job(i, *launch) for i, launch in enumerate(launches)]
    jobs.append(dict(jobs[0], id=9, fn="no_such_kernel"))
    workers = pc.CompileWorkers(2, ["cuda", 90, 32])
    taken_here = []

    def compile_here(job):  # this process takes its share too; here it only notes which
        taken_here.append(job["id"])
        time.sleep(0.5)

    try:
        assert all(w.ready.wait(240) for w in workers.workers)
        by_workers = workers.share(jobs, compile_here, wait_s=240)
        assert len(workers.alive()) == 2  # the failed job left its worker serving
    finally:
        workers.close()
    assert workers.alive() == []
    by_them = {0, 1, 9} - set(taken_here)
    assert len(taken_here) == len(set(taken_here)) and by_them  # each job taken once; workers took some
    assert by_workers == len(by_them - {9})

    def no_codegen(*args, **kwargs):
        raise AssertionError("compiled again instead of loading from Triton's cache")

    monkeypatch.setattr(tc.ASTSource, "make_ir", no_codegen)
    monkeypatch.setattr(driver, "_active", TargetOnly(GPUTarget("cuda", 90, 32)))  # what was there comes back
    for fn_, dtypes, grid, warps, consts in (launches[i] for i in sorted(by_them - {9})):
        kernel = fn_.warmup(*dtypes, grid=grid, num_warps=warps, **consts)
        assert kernel.metadata.name == "add_kernel"


class _LoadingWorker:
    def __init__(self, ready: bool) -> None:
        import threading

        self.ready = threading.Event()
        if ready:
            self.ready.set()


class _FakeWorkers:
    """Stands in for CompileWorkers: its share hands every job to this process, as when the
    workers are busy, so that what `_share` keeps running here can be watched."""

    def __init__(self, ready: bool) -> None:
        self.workers = [_LoadingWorker(ready)]
        self.shared: list[int] = []

    def alive(self):
        return self.workers

    def share(self, jobs, compile_here, wait_s=pc.WORKER_WAIT_S):
        for job in jobs:
            self.shared.append(job["id"])
            compile_here(job)
        return 0


def _launches(n: int) -> list[tuple]:
    return [(object(), (torch.float32,), (1,), 4, {"N": i}, torch.device("cuda")) for i in range(n)]


def test_workers_still_loading_take_no_launches_and_nothing_is_compiled_here_one_by_one(monkeypatch):
    """A process's first graph, its workers still importing torch: `_share` gives them nothing
    and starts nothing, so that the pool compiles every launch (the caller's path without workers)."""
    workers = _FakeWorkers(ready=False)
    monkeypatch.setattr(pc, "start_workers", lambda device: workers)
    monkeypatch.setattr(pc, "_job", lambda i, *launch: {"id": i, "fn": "k"})
    monkeypatch.setattr(pc, "_warm", lambda launch: pytest.fail("compiled here while the workers load"))
    warmed: dict[int, object] = {}
    assert pc._share(torch.device("cuda"), _launches(5), warmed) == 0
    assert warmed == {} and workers.shared == []


def test_this_process_keeps_a_bounded_number_of_launches_on_its_pool_while_workers_serve(monkeypatch):
    """With a worker loaded, each launch this process takes goes to its pool (a future), and it
    takes the next only once fewer than HERE_IN_FLIGHT of its own are still compiling: the rest
    stay queued for the workers instead of all landing on this process's GIL."""
    import threading
    from concurrent.futures import Future

    workers = _FakeWorkers(ready=True)
    monkeypatch.setattr(pc, "start_workers", lambda device: workers)
    monkeypatch.setattr(pc, "_job", lambda i, *launch: {"id": i, "fn": "k"})
    started: list[Future] = []
    most_running = []

    def warm(launch):
        future = Future()
        started.append(future)
        most_running.append(sum(not f.done() for f in started))
        threading.Timer(0.05, future.set_result, args=(launch,)).start()
        return SimpleNamespace(future=future)

    monkeypatch.setattr(pc, "_warm", warm)
    launches = _launches(7)
    warmed: dict[int, object] = {}
    assert pc._share(torch.device("cuda"), launches, warmed) == 0
    assert sorted(warmed) == list(range(7)) and workers.shared == list(range(7))
    assert max(most_running) == pc.HERE_IN_FLIGHT  # never more of its own at once
    for f in started:
        f.result(timeout=5)


def test_a_share_that_this_process_abandons_closes_its_workers(monkeypatch):
    """If compiling here raises (an interrupt), the share's servers must not go on feeding the
    workers' answers into the next graph's share: the workers are closed, the error passes on."""
    workers = pc.CompileWorkers.__new__(pc.CompileWorkers)
    workers.workers = []
    closed = []
    monkeypatch.setattr(workers, "close", lambda: closed.append(True))

    def interrupted(job):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        workers.share([{"id": 0, "fn": "k"}, {"id": 1, "fn": "k"}], interrupted)
    assert closed == [True]
