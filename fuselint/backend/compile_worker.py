"""A process that compiles generated Triton kernels into Triton's cache, for precompile.py.

Triton's code generator is Python: in one process, threads compile one kernel at a time. A few
of these processes compile a graph's kernels side by side. Each writes what it compiles to
Triton's on-disk cache (the parent's ``TRITON_CACHE_DIR``), so that the parent's own compile of
the same launch finds it there and only loads it.

The worker never touches the GPU: it is told the parent's target (``["cuda", 90, 32]``) and
answers Triton's driver questions from it; nothing is launched or loaded here. Protocol, one JSON
object per line: the first line from the parent is ``{"target": [...]}``; each later one a job
``{"id", "path", "module", "fn", "dtypes", "grid", "warps", "consts"}``. The worker says
``{"ready": true}`` once it has loaded, then answers each job on the protocol stream with
``{"id", "ok": true}`` or ``{"id", "error": "..."}``. End of input ends
the worker. Anything Triton prints goes to stderr, never into the answers.

Run as a script, by precompile.py, so that the package's imports stay out of it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


class TargetOnly:
    """Triton's driver as a compile needs it: the current device, stream and target, no GPU."""

    def __init__(self, target: object) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> object:
        return self.target


def load_function(path: str, module: str, fn: str) -> object:
    """The @triton.jit function `fn` of the kernel file `path`, imported under the module name
    the parent gave it (so that its cache key is the parent's)."""
    mod = sys.modules.get(module)
    if mod is None:
        spec = importlib.util.spec_from_file_location(module, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[module] = mod
    return getattr(mod, fn)


def compile_job(job: dict) -> None:
    """Compile one launch (Triton's `warmup`, without a GPU) into Triton's cache."""
    import torch

    fn = load_function(job["path"], job["module"], job["fn"])
    dtypes = [getattr(torch, name) for name in job["dtypes"]]
    fn.warmup(*dtypes, grid=tuple(job["grid"]), num_warps=job["warps"], **job["consts"])


def serve(requests, answers) -> None:
    """Answer jobs until the requests end."""
    first = json.loads(requests.readline() or "{}")
    import torch  # noqa: F401  (the jobs' dtypes; loaded before the worker says it is ready)
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    from triton.runtime.driver import driver

    target = GPUTarget(*first["target"])
    driver.set_active(TargetOnly(target))
    make_backend(target).hash()  # the compiler's version check, once, before the first job
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        job = json.loads(line)
        try:
            compile_job(job)
            answer = {"id": job["id"], "ok": True}
        except Exception as exc:  # the parent compiles this one itself, at its first launch
            answer = {"id": job["id"], "error": f"{type(exc).__name__}: {exc}"[:300]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    os.environ["TRITON_INTERPRET"] = "0"
    # Answers go on a private copy of stdout; whatever Triton or a kernel file prints, to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()
