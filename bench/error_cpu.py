"""Errors against float32 of the suite's models in bf16, eager / fuselint / Inductor, on a CPU.

    TRITON_INTERPRET=1 PYTHONPATH=. python bench/error_cpu.py t5enc gpt2 vit
    TRITON_INTERPRET=1 PYTHONPATH=. python bench/error_cpu.py mobilenetv3 --dtype float32 --bn-random 1

With `--dtype float32` the models run in float32 and the exact answer is the same model in float64
(a CPU's float32 convolutions and matmuls are IEEE: what differs is each backend's own arithmetic);
the table then also gives each backend's error against eager float32. `--bn-random SEED` draws every
timm BatchNorm's statistics and affine first (bench/models.py's option).

Where the plan decides which values are stored in bf16 and which are recomputed in float32
inside their readers, the error tells it, and that needs no GPU: fuselint's kernels run in
Triton's interpreter, Inductor's as C++. The models are bench/models.py's small configs (batch 2,
64 tokens or 224² images). Two things keep the comparison fair:

- Triton 3.6's interpreter converts float32 to bf16 by dropping the low bits (its `cast_impl`
  passes no rounding mode), where a GPU rounds to nearest even: a cast alone doubles the mean
  error. This script makes the interpreter round as the GPU does (`_round_like_gpu`).
- The matmuls are ATen's in both backends, so a difference is the plan's, not the GEMM's.

Inductor's CPU code keeps the same values as its GPU code where that decision is made in its
lowering (realize on reuse: ops <= 30 and reads <= 4); the numbers are not the GPU's numbers.
"""

from __future__ import annotations

import argparse
import copy
import sys

import numpy as np
import torch

sys.path.insert(0, "bench")
import models as M  # noqa: E402


def _round_like_gpu() -> None:
    """float32 -> bf16 in Triton's interpreter rounded to nearest even, through torch."""
    import triton.language as tl
    import triton.runtime.interpreter as interp

    builder = interp.InterpreterBuilder
    truncating = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            rounded = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)
            bits = rounded.view(torch.int16).numpy().view(np.uint16)
            return interp.TensorHandle(bits.reshape(src.data.shape), dst_type.scalar)
        return truncating(self, src, dst_type)

    builder.cast_impl = cast_impl
    builder.create_fp_trunc = lambda self, src, dst_type: self.cast_impl(src, dst_type)


def errors(name: str, dtype: torch.dtype = torch.bfloat16) -> dict[str, tuple[float, ...]]:
    """backend -> (max, mean) abs error of its output in `dtype` against the model one precision
    up (float32 for bf16, float64 for float32); in float32 also (max, mean) against eager float32."""
    import fuselint.backend  # noqa: F401  (registers the backend)

    model, args = M.build(name, small=True)
    wide = torch.float64 if dtype == torch.float32 else torch.float32
    mw, aw = M._to(copy.deepcopy(model), args, "cpu", wide)
    mb, ab = M._to(copy.deepcopy(model), args, "cpu", dtype)
    out: dict[str, tuple[float, ...]] = {}
    with torch.no_grad():
        exact = M._first_tensor(mw(*aw)).double()
        eager = None
        for backend in ("eager", "fuselint", "inductor"):
            torch._dynamo.reset()
            run = mb if backend == "eager" else torch.compile(mb, backend=backend)
            got = M._first_tensor(run(*ab)).double()
            eager = got if eager is None else eager
            row = (M.max_error(got, exact), M.mean_error(got, exact))
            if dtype == torch.float32:
                row += (M.max_error(got, eager), M.mean_error(got, eager))
            out[backend] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", choices=M.MODELS)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--bn-random", type=int, default=None, metavar="SEED")
    opts = ap.parse_args()
    _round_like_gpu()
    M.BN_SEED = opts.bn_random
    dtype = getattr(torch, opts.dtype)
    if dtype == torch.bfloat16:
        print(
            f"torch {torch.__version__}; bf16 vs the float32 model, CPU; max / mean abs error (mean x 1e-4)"
        )
    else:
        print(
            f"torch {torch.__version__}; float32 vs the float64 model, CPU; max / mean abs error "
            "(mean x 1e-8); then vs eager float32"
        )
    print("| model | eager | fuselint | inductor |")
    print("|---|---|---|---|")
    scale = 1e4 if dtype == torch.bfloat16 else 1e8
    for name in opts.models:
        e = errors(name, dtype)
        cells = " | ".join(
            "  ".join(f"{e[b][i]:.4g} / {e[b][i + 1] * scale:.3f}" for i in range(0, len(e[b]), 2))
            for b in ("eager", "fuselint", "inductor")
        )
        print(f"| {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
