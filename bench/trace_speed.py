"""How fast and how lean is tracing a large model? A 32-layer, 4096-wide decoder on the meta device.

The budget (issue #4): under 60 s and under 3 GB of memory. The model is
fixtures/trace/transformer_stack.py:big (LLaMA-7B-like shapes, about 6.5B parameters), built
on the meta device so no weight memory is allocated. Run from the repository root:
    PYTHONPATH=. python bench/trace_speed.py [--train] [--write bench/results/trace_speed.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY = f"{ROOT / 'fixtures' / 'trace' / 'transformer_stack.py'}:big"
BUDGET_S, BUDGET_MB = 60.0, 3 * 1024


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", action="store_true", help="also trace backward (train mode)")
    parser.add_argument("--write", help="write the result as markdown to this file")
    args = parser.parse_args()

    start = time.perf_counter()
    import torch

    from fuselint.graph.capture import capture
    from fuselint.graph.entry import build, load_entry

    imported = time.perf_counter()
    entry = load_entry(ENTRY)
    cap = capture(entry, train=args.train)
    traced = time.perf_counter()

    with torch.device("meta"):
        params = sum(p.numel() for p in build(entry).model.parameters())
    ops = sum(len(g.ops()) - len(g.ops("input")) for g in cap.graphs)
    peak = _peak_mb()
    seconds = traced - imported
    verdict = "within" if seconds < BUDGET_S and peak < BUDGET_MB else "OVER"
    row = (
        f"| {'train' if args.train else 'inference'} | {params / 1e9:.2f}B | {len(cap.graphs)} | {ops} "
        f"| {len(cap.breaks)} | {imported - start:.1f} | {seconds:.1f} | {peak:.0f} | {os.getloadavg()[0]:.1f} "
        f"| {verdict} |"
    )
    table = (
        "| mode | parameters | graphs | ATen ops | breaks | import s | trace s | peak RSS MB | load avg "
        "| budget (60 s, 3 GB) |\n|---|---|---|---|---|---|---|---|---|---|\n" + row + "\n"
    )
    print(table)
    if args.write:
        header = (
            "Trace speed: 32 layers x 4096 wide decoder (fixtures/trace/transformer_stack.py:big) on the meta "
            f"device.\ntorch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, "
            f"{os.cpu_count()} cores, shared with other jobs (load avg: 1-minute load when the row was taken).\n"
            "Peak RSS is the whole process (imports included); trace s excludes imports.\n"
            f"Command: `PYTHONPATH=. {Path(sys.executable)} bench/trace_speed.py"
            f"{' --train' if args.train else ''}`\n\n"
        )
        path = Path(args.write)
        previous = path.read_text() if path.exists() and args.train else ""
        # The train run appends its row to the inference table written just before it.
        if previous and "| mode |" in previous:
            path.write_text(previous.rstrip("\n") + "\n" + row + "\n")
        else:
            path.write_text(header + table)
    if verdict != "within":
        sys.exit(1)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
