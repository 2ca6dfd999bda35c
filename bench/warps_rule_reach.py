"""Which kernels of the suite's models the vector-warps rule gives another launch configuration, on a CPU.

    TRITON_INTERPRET=1 PYTHONPATH=.:<timm and transformers> python bench/warps_rule_reach.py gpt2,convnext

`heuristics.VECTOR_WARP_BYTES` caps the warps of short rows that read a vector along the row. A rule
of launch configuration changes only the kernels it reaches, and which those are needs no GPU: this
compiles each model (bench/models.py's small configs, batch 2, in bf16 and float32) with fuselint
under Triton's interpreter, keeps every kernel's IR, and compares the GPU configuration the
heuristics choose for it with the rule against the one they chose before it (no vector read). A
model none of whose kernels changed keeps its earlier GPU numbers. Rows per program depend on the
row count, so a kernel with a row or two at batch 2 could differ at the suite's batch; the rule
itself depends on the row's length, the vector and the dtype only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402
import torch  # noqa: E402


def reach(name: str, dtype: torch.dtype) -> tuple[int, list[tuple]]:
    """(kernels compiled, [(row length, rows, config before, config now, first fused nodes)])."""
    import fuselint.backend  # noqa: F401  (registers the backend)
    from fuselint.backend import compiler, heuristics

    seen = []
    choose = compiler.choose_config

    def keep(ir, interpret, max_persistent=None):
        seen.append(ir)
        return choose(ir, interpret, max_persistent)

    def before(ir):
        vector = heuristics._column_vector_bytes
        heuristics._column_vector_bytes = lambda ir: 0
        try:
            return heuristics.choose_config(ir, False)
        finally:
            heuristics._column_vector_bytes = vector

    compiler.choose_config = keep
    try:
        torch._dynamo.reset()
        model, args = M._to(*M.build(name, small=True), "cpu", dtype)
        with torch.no_grad():
            torch.compile(model, backend="fuselint")(*args)
    finally:
        compiler.choose_config = choose
    changed = []
    for ir in seen:
        now, then = heuristics.choose_config(ir, False), before(ir)
        if now != then:
            changed.append((ir.rnumel, ir.xnumel, then.describe(), now.describe(), ir.fused[:2]))
    return len(seen), changed


def main() -> None:
    for name in sys.argv[1].split(","):
        for dtype in (torch.bfloat16, torch.float32):
            kernels, changed = reach(name, dtype)
            print(f"{name} {dtype}: {kernels} kernels, {len(changed)} with another config", flush=True)
            for row in changed[:6]:
                print("   ", row, flush=True)


if __name__ == "__main__":
    main()
