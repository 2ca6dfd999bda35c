"""The launch grids of the reduction kernels fuselint generates for a real training step.

    TRITON_INTERPRET=1 python bench/reduction_grids.py --model resnet50 --batch 8
    TRITON_INTERPRET=1 python bench/reduction_grids.py --model gpt2 --batch 8 --seq 512

Runs on CPU: the forward and backward graphs of one training step (mean of the output,
backward) are compiled by the fuselint backend's own compile_graph, while the step itself
runs the graphs through ATen (nothing is interpreted). For every reduction kernel it prints
the GPU launch grid it would have unsplit (``interpret=False``): a kernel whose grid is below
2 x 132 programs (an H100/H200 has 132 SMs) while it reduces a long extent leaves most of
the GPU idle; and what :func:`choose_config` makes of it now (split in chunks, or why not).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU kernels are generated only under it

import torch  # noqa: E402

SMS = 132


def build(name: str, batch: int, seq: int) -> tuple[torch.nn.Module, tuple]:
    import transformers as tf

    torch.manual_seed(0)
    if name == "gpt2":
        model = tf.GPT2Model(tf.GPT2Config(n_layer=4, n_embd=768, n_head=12))
        return model, (torch.randint(0, 50257, (batch, seq)),)
    if name == "resnet50":  # transformers' ResNetConfig defaults are ResNet-50's
        model = tf.ResNetModel(tf.ResNetConfig())
        return model, (torch.randn(batch, 3, 224, 224),)
    raise SystemExit(f"unknown model {name!r} (gpt2, resnet50)")


def kernels_of_step(model: torch.nn.Module, args: tuple) -> list:
    """(graph name, FusedKernel) for every kernel of one training step's graphs."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    import fuselint.backend as fb
    from fuselint.backend.compiler import compile_graph

    found = []

    def compiler(name: str):
        def compile_one(gm, example_inputs):
            report_gm = compile_graph(copy.deepcopy(gm), example_inputs, name=name, inference=False)
            del report_gm
            found.extend((name, k) for k in fb.history[-1].kernels)
            return make_boxed_func(gm.forward)  # the step runs through ATen

        return compile_one

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        decompositions=fb.decompositions(select_decomp_table()),
        partition_fn=min_cut_rematerialization_partition,
    )
    compiled = torch.compile(model.train(), backend=backend)
    out = compiled(*args)
    out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    out.float().mean().backward()
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--min-rnumel", type=int, default=8192, help="a 'long' reduced extent")
    a = p.parse_args(argv)
    from fuselint.backend.heuristics import _unsplit_config, choose_config

    model, args = build(a.model, a.batch, a.seq)
    found = kernels_of_step(model, args)
    rows = []
    for graph, k in found:
        if not k.ir.rdims:
            continue
        unsplit = _unsplit_config(k.ir, interpret=False, max_persistent=None)
        rows.append((graph, k.__name__, k.ir, unsplit, choose_config(k.ir, interpret=False)))
    few = [r for r in rows if r[3].grid < 2 * SMS and r[2].rnumel >= a.min_rnumel]
    split = [r for r in few if r[4].combine is not None]
    launches = sum(1 + (len(r[2].late_stores) > 0) for r in split)
    print(
        f"{a.model}: {len(found)} kernels, {len(rows)} reductions, {len(few)} with grid < {2 * SMS} "
        f"and rnumel >= {a.min_rnumel}, {len(split)} of them split (+{launches} GPU launches)"
    )
    print("| graph | kernel | xnumel | rnumel | GPU grid unsplit | now |")
    print("|---|---|---|---|---|---|")
    for graph, name, ir, unsplit, cfg in few:
        if cfg.combine is not None:
            now = f"{cfg.split} chunks of {cfg.chunk}: grid ({cfg.grid}, {cfg.split}), combine grid {cfg.combine.grid}"
            if ir.late_stores:
                now += f", stores grid ({cfg.grid}, {cfg.split})"
        else:
            now = (
                "one kernel ("
                + ("chunks of 2 blocks would not split it" if ir.splittable else "not splittable")
                + ")"
            )
        print(f"| {graph} | {name} | {ir.xnumel} | {ir.rnumel} | {unsplit.grid} | {now} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
