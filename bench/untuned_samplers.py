"""Graph breaks in k-diffusion's samplers (a package fuselint was not tuned on), before and after
`fuselint check --fix --unsafe-fixes`.

Each sampler runs a whole 6-step loop (`get_sigmas_karras`, a tiny denoiser, seed 0, tqdm's `trange` replaced by `range`)
under `torch._dynamo.explain`; the break sites inside k_diffusion's files, the graphs, and the
eager outputs (seeded) are saved:

    PYTHONPATH=ORIG python bench/untuned_samplers.py --save before.pt
    fuselint check --fix --unsafe-fixes --no-prove --config CFG FIXED/k_diffusion/sampling.py
    PYTHONPATH=FIXED python bench/untuned_samplers.py --save after.pt
    python bench/untuned_samplers.py --compare before.pt after.pt

CFG holds `[tool.fuselint] traced-functions = ["sample_*"]` (each sampler is what a user compiles).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import listen_breaks  # noqa: E402

SAMPLERS = ("sample_euler", "sample_euler_ancestral", "sample_heun", "sample_dpm_2")


def run(name: str) -> dict:
    """Break sites (file name, line, gb id), graphs and the eager output of one sampler's loop."""
    import k_diffusion.sampling as sampling
    import torch

    from fuselint.graph.breaks_log import parse_break

    def denoiser(x, sigma):
        return x / (1 + sigma.reshape(-1, 1, 1, 1) ** 2)

    # tqdm's bar is host output that dynamo skips (every loop would stop at its first line):
    # the loops run over a plain range here, before and after alike
    sampling.trange = lambda n, disable=None: range(n)
    sampler = getattr(sampling, name)
    sigmas = sampling.get_sigmas_karras(6, 0.1, 10.0)
    torch.manual_seed(0)
    x = torch.randn(1, 4, 8, 8) * sigmas[0]
    torch.manual_seed(1)
    eager = sampler(denoiser, x, sigmas, disable=True)
    graphs: list[int] = []

    def recorder(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    handler = listen_breaks()
    torch._dynamo.reset()
    torch.manual_seed(1)
    torch.compile(sampler, backend=recorder, dynamic=False)(denoiser, x, sigmas, disable=True)
    root = str(Path(sampling.__file__).resolve().parent) + "/"
    sites = set()
    for text in handler.texts:
        parsed = parse_break(text)
        frames = [(f, n) for f, n, _ in parsed.frames] + [(parsed.file, parsed.line)] if parsed else []
        inside = [(f, n) for f, n in frames if f and str(Path(f).resolve()).startswith(root)]
        if inside:
            sites.add((Path(inside[-1][0]).name, inside[-1][1], parsed.gb_id))
    return {"graphs": len(graphs), "sites": sorted(sites), "output": eager}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    import torch

    if args.save:
        warnings.filterwarnings("ignore")
        torch.save({name: run(name) for name in SAMPLERS}, args.save)
        return
    before, after = (torch.load(p, weights_only=False) for p in args.compare)
    print("| sampler | sites | graphs | outputs max abs diff | left |\n|---|---|---|---|---|")
    for name in SAMPLERS:
        b, a = before[name], after[name]
        diff = (b["output"] - a["output"]).abs().max().item()
        left = "; ".join(f"{f}:{line} {why}" for f, line, why in a["sites"]) or "-"
        print(
            f"| {name} | {len(b['sites'])} → {len(a['sites'])} | {b['graphs']} → {a['graphs']} | "
            f"{diff:.2e} | {left} |"
        )


if __name__ == "__main__":
    main()
