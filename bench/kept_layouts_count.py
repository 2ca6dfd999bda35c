"""Kernels per call that kept layout copies remove from the suite's convolution models, on a CPU.

    TRITON_INTERPRET=1 PYTHONPATH=.:<timm> python bench/kept_layouts_count.py resnet50,convnext

`kept_layouts.keep_layout_copies` makes each channels_last copy of a convolution weight once and
keeps it, where the graph launched a copy kernel per weight per call. This compiles each model
(bench/models.py's small configs, batch 2, in bf16 and float32) with fuselint under Triton's
interpreter twice: with no copy kept (``MAX_KEPT_BYTES = 0``, the graph as it was before) and
as it is now; counts the kernels each launches in a call after the first (on a CPU every call
runs the FX graph, one ``FusedKernel`` call per launch) and checks that both give the same
output, bit for bit. The layout pass decides as for a GPU, so the copies are the GPU's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models as M  # noqa: E402
import torch  # noqa: E402


def count(name: str, dtype: torch.dtype, keep: bool) -> tuple[int, int, int, torch.Tensor]:
    """(kernels launched in the second call, copies kept, bytes kept, the output)."""
    import fuselint.backend  # noqa: F401  (registers the backend)
    from fuselint.backend import history_mark, kept_layouts, reports_since, runtime

    bound = kept_layouts.MAX_KEPT_BYTES
    kept_layouts.MAX_KEPT_BYTES = bound if keep else 0
    launches = [0]
    call = runtime.FusedKernel.__call__

    def counted(self, *args):
        launches[0] += 1
        return call(self, *args)

    try:
        torch._dynamo.reset()
        mark = history_mark()
        model, args = M._to(*M.build(name, small=True), "cpu", dtype)
        compiled = torch.compile(model, backend="fuselint")
        with torch.no_grad():
            compiled(*args)
            runtime.FusedKernel.__call__ = counted
            out = compiled(*args)
    finally:
        runtime.FusedKernel.__call__ = call
        kept_layouts.MAX_KEPT_BYTES = bound
    copies = [
        k
        for r in reports_since(mark)
        for k in kept_layouts.kept_values(r.graph_module)
        if isinstance(k, kept_layouts.KeptLayout)
    ]
    nbytes = sum(k.tensor.numel() * k.tensor.element_size() for k in copies if k.tensor is not None)
    return launches[0], len(copies), nbytes, out


def main() -> None:
    print("| model | dtype | kernels per call before | after | copies kept | MiB kept | outputs |")
    print("|---|---|---|---|---|---|---|")
    for name in sys.argv[1].split(","):
        for dtype in (torch.bfloat16, torch.float32):
            before, _, _, out_before = count(name, dtype, keep=False)
            after, kept, nbytes, out_after = count(name, dtype, keep=True)
            same = "bit-equal" if torch.equal(out_before, out_after) else "DIFFER"
            dt = str(dtype).removeprefix("torch.")
            print(
                f"| {name} | {dt} | {before} | {after} | {kept} | {nbytes / 2**20:.1f} | {same} |", flush=True
            )


if __name__ == "__main__":
    main()
