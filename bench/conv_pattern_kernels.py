"""bench/backend.py's conv_relu_maxpool pattern, kernel by kernel, per backend (needs CUDA).

    PYTHONPATH=. python bench/conv_pattern_kernels.py [--rep 300] [--calls 20]

In bench/backend.py's table fuselint's bf16 time for this pattern has ranged 0.073-0.303 ms between
sessions (Inductor 0.076-0.248) and stayed above Inductor's since session 17. This times the
pattern (64 x 32 x 56 x 56, 3x3 convolution to 64 channels, ReLU, 2x2 max pool) in float32 and
bf16 with triton's do_bench, several times over in one process with the backends interleaved, and
lists each backend's kernels with their GPU µs a call (torch.profiler), so that a slow backend's
time is found in one of its kernels or between them. `fuselint-no-in-place` is fuselint with
`callgen.IN_PLACE` off (no output stored into a dying input's storage), the switch session 17 added.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import backend as B  # noqa: E402
import kernel_list as K  # noqa: E402
import torch  # noqa: E402

BACKENDS = ("eager", "fuselint", "fuselint-no-in-place", "inductor")


def compiled(backend: str, fn, args: list):
    """A no-argument call of `fn` on `args` under `backend`, compiled and warm."""
    import fuselint.backend.callgen as callgen

    if backend == "eager":
        return functools.partial(torch.no_grad()(fn), *args)
    callgen.IN_PLACE = backend != "fuselint-no-in-place"  # read when a graph's call function is generated
    inner = torch.compile(fn, backend="inductor" if backend == "inductor" else "fuselint")

    def call(*args):
        with torch.no_grad():
            return inner(*args)

    for _ in range(3):  # compile now, with the switch as this backend wants it
        call(*args)
    return functools.partial(call, *args)


def main(argv: list[str] | None = None) -> int:
    import triton.testing

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rep", type=float, default=300.0, help="ms of calls per do_bench")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--calls", type=int, default=20, help="calls profiled for the kernel lists")
    a = p.parse_args(argv)
    print(f"cudnn: enabled {torch.backends.cudnn.enabled}, benchmark {torch.backends.cudnn.benchmark}")
    for dtype in (torch.float32, torch.bfloat16):
        fn, args = B.make_case("conv_relu_maxpool", dtype, "cuda", smoke=False)
        calls = {}
        for backend in BACKENDS:
            torch._dynamo.reset()
            calls[backend] = compiled(backend, fn, args)
        walls: dict[str, list[float]] = {b: [] for b in BACKENDS}
        for r in range(a.rounds):
            order = BACKENDS[r % len(BACKENDS) :] + BACKENDS[: r % len(BACKENDS)]
            for b in order:
                walls[b].append(triton.testing.do_bench(calls[b], rep=a.rep))
        for b in BACKENDS:
            rows = K.kernel_table(calls[b], a.calls)
            rounds = " ".join(f"{w:.3f}" for w in walls[b])
            print(
                f"== {str(dtype).removeprefix('torch.')} {b}: {statistics.median(walls[b]):.3f} ms "
                f"(rounds {rounds}); {sum(r[1] for r in rows):g} kernels, {sum(r[2] for r in rows):.1f} GPU µs"
            )
            for name, n, us in rows:
                print(f"{n:5g} {us:9.1f}  {name[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
