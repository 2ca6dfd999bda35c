"""Why one model's rows under `fuselint verify` differ from the suite's (bench/models.py): the same
entry timed four ways in one process, on a GPU.

    python bench/verify_vs_suite.py bench/suite_entries/suite.py:resnet50 [--backends eager,fuselint,inductor]

Session 26 found ResNet-50's rows under verify 1.5x (eager, fuselint) and 2.1x (Inductor) the
suite's, while GPT-2's, LLaMA's and T5's agreed within about 10%. The ways differ in one thing each:

  suite       a fresh copy of the model per backend; bench/models.py's rounds (do_bench, pinned)
  suite-one   one model for every backend, compiled one after another; the same rounds
  verify      verify's own path (verify.run._run_backends: one model, every backend compiled first,
              verify.timing's pinned rounds)
  verify-own  verify's path with a fresh copy of the model per backend

A row that moves between `suite` and `suite-one` is the shared model; between `suite-one` and
`verify`, the timing; between `verify` and `verify-own`, the shared model under verify's timing.
Also prints each backend's host µs per call and kernels per call (bench/models.py's measures) for
the `suite` and `suite-one` models.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import models as M  # noqa: E402
import torch  # noqa: E402

from fuselint.graph.entry import Built, build, load_entry  # noqa: E402
from fuselint.verify import run as verify_run  # noqa: E402


def _compiled(backend: str, model):
    return M.compile_with(backend, model)


def _suite_way(built: Built, backends: list[str], fresh: bool, rounds: int) -> dict[str, dict]:
    """bench/models.py's way: compile (each backend its own copy when `fresh`), warm, rounds."""
    torch._dynamo.reset()
    calls = {}
    for backend in backends:
        model = copy.deepcopy(built.model) if fresh else built.model
        compiled = _compiled(backend, model)

        def call(compiled=compiled):
            with torch.no_grad():
                return compiled(*built.args, **built.kwargs)

        for _ in range(3):
            call()
        torch.cuda.synchronize()
        calls[backend] = call
    times = M.time_rounds(calls, rounds, rep_ms=10.0)
    for backend, call in calls.items():
        times[backend]["kernels"], times[backend]["gpu_us"], _ = M.gpu_profile(call)
    torch._dynamo.reset()
    return times


def _verify_way(built: Built, backends: list[str], fresh: bool) -> dict[str, float]:
    with torch.no_grad():
        reference = built.model(*built.args, **built.kwargs)
    if not fresh:
        rows = verify_run._run_backends([("original", built)], tuple(backends), "cuda", reference)
        return {r.backend: r.ms for r in rows}
    out = {}
    for backend in backends:  # each backend on its own copy, still verify's compile and timing
        own = Built(copy.deepcopy(built.model), built.args, built.kwargs)
        (row,) = verify_run._run_backends([("original", own)], (backend,), "cuda", reference)
        out[backend] = row.ms
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("entry")
    p.add_argument("--backends", default="eager,fuselint,inductor")
    p.add_argument("--rounds", type=int, default=8)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("verify_vs_suite: needs a CUDA GPU")
    import fuselint.backend  # noqa: F401  (registers the backend)

    backends = [b for b in a.backends.split(",") if b]
    M.PIN = sorted(os.sched_getaffinity(0))[-1]
    built = build(load_entry(a.entry)).on("cuda")
    if isinstance(built.model, torch.nn.Module):
        built.model.eval()
    ways = {
        "suite": _suite_way(built, backends, fresh=True, rounds=a.rounds),
        "suite-one": _suite_way(built, backends, fresh=False, rounds=a.rounds),
    }
    verify = {
        "verify": _verify_way(built, backends, fresh=False),
        "verify-own": _verify_way(built, backends, True),
    }
    print(f"{a.entry} on {torch.cuda.get_device_name()}, torch {torch.__version__}; wall ms per call")
    print(
        f"{'backend':<12}"
        + "".join(f"{w:>12}" for w in (*ways, *verify))
        + "   host µs / kernels (suite, suite-one)"
    )
    for b in backends:
        walls = [ways[w][b]["wall_ms"] for w in ways] + [verify[w][b] for w in verify]
        extra = ", ".join(f"{ways[w][b]['host_us']:.0f} / {ways[w][b]['kernels']:.0f}" for w in ways)
        print(
            f"{b:<12}"
            + "".join(f"{x:>12.3f}" if x is not None else f"{'error':>12}" for x in walls)
            + f"   {extra}"
        )


if __name__ == "__main__":
    main()
