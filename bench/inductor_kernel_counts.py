"""Inductor's kernel launches next to fuselint's plan, for each reference graph.

Run on a GPU machine to confirm the GPU counts kept in tests/fusion/fusion_references.py:

    PYTHONPATH=. python bench/inductor_kernel_counts.py            # cuda when available
    PYTHONPATH=. python bench/inductor_kernel_counts.py --device cpu

A launch is a generated kernel call (Triton `.run(` / C++ `cpp_fused_*`) or an extern call the
wrapper makes (extern_kernels.mm/addmm/bmm/convolution, aten fallbacks). Inductor's rewrite of
hand-written attention into SDPA is switched off: fuselint plans the graph as written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fusion"))

from fusion_capture import aten_graphs
from fusion_references import CPU_COUNTS, DIVERGENT, REFERENCES, inductor_gpu_count

from fuselint.fusion.plan import plan

_KERNEL = re.compile(r"^\s+(?:\w+\s*=\s*)?(?:(\w+)\.run\(|(cpp_fused_\w+)\()", re.MULTILINE)
_EXTERN = re.compile(
    r"^\s+(?:\w+\s*=\s*)?((?:extern_kernels|torch\.ops\.\w+|aten)\.\w+(?:\.\w+)?)\(",
    re.MULTILINE,
)
_NOT_A_LAUNCH = ("alloc", "empty", "assert", "reinterpret", "as_strided", "resize", "copy_misaligned")


def count_launches(code: str) -> tuple[int, list[str]]:
    """Kernel calls plus extern calls in Inductor's generated wrapper code."""
    body = code.split("def call(", 1)[-1]
    calls = [a or b for a, b in _KERNEL.findall(body)]
    calls += [c for c in _EXTERN.findall(body) if not any(w in c for w in _NOT_A_LAUNCH)]
    return len(calls), calls


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, torch.nn.Module):
        return x.to(device).eval()
    # A reference written as a closure over modules (`lambda x: F.gelu(lin(x))`): move those.
    for cell in getattr(x, "__closure__", None) or ():
        if isinstance(cell.cell_contents, torch.nn.Module):
            cell.cell_contents.to(device).eval()
    return x


def inductor_launches(fn, args, device: str) -> tuple[int, list[str]]:
    """Compile fn with Inductor (SDPA rewrite and FX cache off) and count its launches."""
    from torch._inductor import config
    from torch._inductor.fx_passes import fuse_attention
    from torch._inductor.utils import run_and_get_code

    if hasattr(fuse_attention, "_sfdp_init"):
        fuse_attention._sfdp_init = lambda *a, **k: None
    config.fx_graph_cache = False
    fn = _to(fn, device)
    args = tuple(_to(a, device) for a in args)
    torch._dynamo.reset()
    with torch.no_grad():
        _out, codes = run_and_get_code(torch.compile(fn), *args)
    total, names = 0, []
    for code in codes:
        n, calls = count_launches(code)
        total += n
        names += calls
    return total, names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--verbose", action="store_true", help="list the launches Inductor makes")
    opts = parser.parse_args(argv)
    print(f"torch {torch.__version__}, device {opts.device}")
    print(f"{'graph':22s} {'inductor':>8s} {'fuselint':>8s} {'kept':>5s}  kept=inductor  plan=inductor")
    for name, (build, _count) in REFERENCES.items():
        fn, args = build()
        planned = sum(plan(fg).launches for fg in aten_graphs(fn, *args))
        fn, args = build()
        measured, calls = inductor_launches(fn, args, opts.device)
        # the count kept for this device and torch version (Inductor fuses differently on CPU)
        gpu = inductor_gpu_count(name, torch.__version__)
        kept = gpu if opts.device.startswith("cuda") else CPU_COUNTS.get(name, gpu)
        print(
            f"{name:22s} {measured:8d} {planned:8d} {kept:5d}  {'yes' if measured == kept else 'NO':13s}"
            f"  {'yes' if planned == measured else 'no'}"
        )
        if opts.verbose:
            print("    " + ", ".join(calls))
    print("known divergences (not asserted):")
    for name, (build, cpu_count, why) in DIVERGENT.items():
        fn, args = build()
        planned = sum(plan(fg).launches for fg in aten_graphs(fn, *args))
        fn, args = build()
        measured, calls = inductor_launches(fn, args, opts.device)
        print(f"{name:22s} {measured:8d} {planned:8d} {cpu_count:5d}  (CPU count kept; {why})")
        if opts.verbose:
            print("    " + ", ".join(calls))


if __name__ == "__main__":
    main()
