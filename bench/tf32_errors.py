"""float32 inference error with cuDNN's TF32 on (PyTorch's default for convolutions) and off.

Mean/max abs error of eager, fuselint and Inductor against the same model in IEEE float32
(`models._ieee_float32`), on an H100/H200, over one batch or many:

    python bench/tf32_errors.py mobilenetv3 efficientnet
    python bench/tf32_errors.py mobilenetv3 --batches 24 --nose --json out.json

With TF32 on, a float32 convolution's error depends on which cuDNN algorithm runs it (tensor cores
round the inputs to a 10-bit mantissa), and so on the layout each backend gives it; with TF32 off
what is left is the backends' own arithmetic. `--nose` adds fuselint with its squeeze-excite
reduction off (`squeeze_excite.MAX_MACS = 0`: those small convolutions go to cuDNN as Inductor's
do, instead of being reduced in IEEE float32 by fuselint's own kernels). Per model, TF32 setting
and backend it prints the mean abs error averaged over the batches, the largest max, and on how
many batches each backend's mean error is above Inductor's; then (`vs float64`) each backend's mean
abs error against the same model in float64, the exact answer, which IEEE float32 eager is not.
`--bn-random SEED` draws every BatchNorm's statistics first (bench/models.py's option).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402
import torch  # noqa: E402


def compiled(backend: str, model):
    import fuselint.backend  # noqa: F401
    from fuselint.backend import squeeze_excite

    torch._dynamo.reset()
    squeeze_excite.MAX_MACS = 0 if backend == "fuselint-nose" else DEFAULT_MACS
    if backend == "eager":
        return model
    return torch.compile(model, backend="fuselint" if backend.startswith("fuselint") else "inductor")


def above_counts(means: dict[str, list[float]], against: str = "inductor") -> dict[str, int]:
    """Per backend, on how many batches its mean error is above `against`'s."""
    ref = means.get(against)
    if ref is None:
        return {}
    return {b: sum(m > r for m, r in zip(ms, ref, strict=True)) for b, ms in means.items() if b != against}


def main(argv: list[str] | None = None) -> int:
    global DEFAULT_MACS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--batches", type=int, default=1)
    p.add_argument("--nose", action="store_true")
    p.add_argument("--bn-random", type=int, default=None, metavar="SEED")
    p.add_argument("--json")
    a = p.parse_args(argv)
    from fuselint.backend import squeeze_excite

    DEFAULT_MACS = squeeze_excite.MAX_MACS
    M.BN_SEED = a.bn_random
    backends = ["eager", "fuselint"] + (["fuselint-nose"] if a.nose else []) + ["inductor"]
    results = []
    for name in a.models:
        model, args = M.build(name)
        model, args = M._to(model, args, "cuda", torch.float32)
        batches = [args] + [M._fresh_inputs(args, seed) for seed in range(1, a.batches)]
        with torch.no_grad(), M._ieee_float32():
            refs = [M._first_tensor(model(*b)).float() for b in batches]
        model64 = M._to(copy.deepcopy(model), (), "cuda", torch.float64)[0]
        with torch.no_grad():
            refs64 = [M._first_tensor(model64(*M._cast(b, torch.float64))) for b in batches]
        del model64
        for tf32 in (True, False):
            torch.backends.cudnn.allow_tf32 = tf32
            means: dict[str, list[float]] = {}
            maxima: dict[str, list[float]] = {}
            means64: dict[str, list[float]] = {}
            for be in backends:
                f = compiled(be, model)
                with torch.no_grad():
                    for b, ref, ref64 in zip(batches, refs, refs64, strict=True):
                        out = M._first_tensor(f(*b))
                        d = (out.float() - ref).abs()
                        means.setdefault(be, []).append(d.mean().item())
                        maxima.setdefault(be, []).append(d.max().item())
                        means64.setdefault(be, []).append((out.double() - ref64).abs().mean().item())
            above = above_counts(means)
            row = "  ".join(
                f"{be} {sum(means[be]) / len(batches):.4e}/{max(maxima[be]):.3e}"
                + (f" (above Inductor {above[be]}/{len(batches)})" if be in above else "")
                for be in backends
            )
            row64 = "  ".join(f"{be} {sum(means64[be]) / len(batches):.4e}" for be in backends)
            print(name, "cudnn.allow_tf32", tf32, row, flush=True)
            print(name, "cudnn.allow_tf32", tf32, "vs float64:", row64, flush=True)
            results.append(
                {"model": name, "tf32": tf32, "means": means, "maxima": maxima, "means64": means64}
            )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


DEFAULT_MACS = 0

if __name__ == "__main__":
    sys.exit(main())
