"""Where along a timm CNN (MobileNetV3, EfficientNet-B0) one backend's bf16 error grows past another's, over
many batches. Needs CUDA:

    python bench/error_chain.py mobilenetv3 --batches 24 --json chain.json [--whole] [--nose] [--dump DIR]

The model is cut into units (the stem, every block, the head); each unit is compiled alone under each
backend, and the units run one after another, each on the previous one's output (a "chain"), on the same
batches as `bench/models.py --err-batches N` (the build's batch, then `_fresh_inputs` seeds 1..N-1). The
reference is the same chain in IEEE float32. Per batch and unit boundary the script records each chain's mean
abs error and mean signed error against the reference, and each unit's local error (the unit alone on the
reference's input rounded to bf16, against the float32 unit on that same rounded input). Since the units are
compiled once, chains that mix backends cost only their calls:

- `swap`: the base backend's chain with the other backend at one unit: the final error it moves, per unit;
- `prefix`: the other backend for the first k units, the base backend for the rest, for every k.

`--bn-random SEED` draws every BatchNorm's statistics and affine first (see `randomize_batchnorm`).
`--oracle` adds a backend that runs each unit in IEEE float32 and rounds its output once (the most
exact bf16 unit), and the Inductor chain with it at one unit (`swap_oracle`). `--whole` compiles the whole model too (its error, and how many outputs differ from the chain's: a
fusion across a unit boundary shows there); `--nose` adds fuselint with no squeeze-excite convolution
reduced (`squeeze_excite.MAX_MACS = 0`); `--dump DIR` writes the whole model's fuselint graph code and kernels.
The summary (means over the batches, and on how many batches the other backend's error is the larger) is
printed last; `summarize` is pure and reads only the JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def unit_names(stages: list[int]) -> list[str]:
    """The units of a model whose blocks has these stage lengths: stem, every block, head."""
    return ["stem"] + [f"b{i}.{j}" for i, n in enumerate(stages) for j in range(n)] + ["head"]


def mix(base: str, other: str, n: int, *, at: int | None = None, before: int | None = None) -> list[str]:
    """The backend of each of n units: `base` except `other` at unit `at`, or for the units before `before`."""
    if (at is None) == (before is None):
        raise ValueError("give one of at / before")
    if at is not None:
        return [other if k == at else base for k in range(n)]
    return [other if k < before else base for k in range(n)]


def summarize(data: dict, base: str = "inductor", other: str = "fuselint") -> str:
    """Markdown tables of a run's JSON: per boundary the chains' mean errors (x1e-4), the local errors, and
    the swaps' and prefixes' final errors (x1e-4) against the base chain's."""
    names = data["units"]
    batches = data["batches"]
    out = []

    def mean(rows):
        return statistics.fmean(rows) if rows else float("nan")

    def above(a, b):
        return sum(x > y for x, y in zip(a, b, strict=True))

    backends = [be for be in data["backends"] if be in batches[0]["chain"]]
    out.append(
        f"{len(batches)} batches; mean abs error x1e-4 against IEEE float32 (chain: each unit on the previous one's output)"
    )
    out.append("")
    out.append(
        "| boundary | |ref| | "
        + " | ".join(f"chain {be}" for be in backends)
        + f" | {other}>{base} | "
        + " | ".join(f"local {be}" for be in backends)
        + f" | local {other}>{base} |"
    )
    out.append("|---" * (2 * len(backends) + 4) + "|")
    for k, name in enumerate(names):
        chain = {be: [b["chain"][be][k] for b in batches] for be in backends}
        local = {be: [b["local"][be][k] for b in batches] for be in backends}
        ref = mean([b["ref_scale"][k] for b in batches])
        cells = [f"{mean(chain[be]) * 1e4:.3f}" for be in backends]
        lcells = [f"{mean(local[be]) * 1e4:.3f}" for be in backends]
        n = len(batches)
        c_above = above(chain[other], chain[base]) if other in chain and base in chain else 0
        l_above = above(local[other], local[base]) if other in local and base in local else 0
        out.append(
            f"| {name} | {ref:.3g} | "
            + " | ".join(cells)
            + f" | {c_above}/{n} | "
            + " | ".join(lcells)
            + f" | {l_above}/{n} |"
        )
    if "swap" in batches[0]:
        final = [b["chain"][base][-1] for b in batches]
        out.append("")
        out.append(
            f"final error x1e-4 of the {base} chain with {other} at one unit (swap), with {other} for the units "
            f"before it (prefix); delta against the pure {base} chain ({mean(final) * 1e4:.3f}); "
            "`up` = batches where it is above"
        )
        out.append("")
        out.append("| unit | swap | delta | up | prefix before it | delta | up |")
        out.append("|---|---|---|---|---|---|---|")
        for k, name in enumerate(names):
            sw = [b["swap"][k] for b in batches]
            pr = [b["prefix"][k] for b in batches]
            out.append(
                f"| {name} | {mean(sw) * 1e4:.3f} | {(mean(sw) - mean(final)) * 1e4:+.3f} | {above(sw, final)}/{len(final)}"
                f" | {mean(pr) * 1e4:.3f} | {(mean(pr) - mean(final)) * 1e4:+.3f} | {above(pr, final)}/{len(final)} |"
            )
    for key, who in (
        ("swap_eager", "eager"),
        ("swap_oracle", "oracle"),
        ("swap_back", f"{base} in the {other} chain"),
    ):
        if key not in batches[0]:
            continue
        ref_final = [b["chain"][other if key == "swap_back" else base][-1] for b in batches]
        out.append("")
        out.append(
            f"`{key}`: final error x1e-4 with {who} at one unit; delta against that chain's ({mean(ref_final) * 1e4:.3f})"
        )
        out.append("")
        out.append("| unit | final | delta | up |")
        out.append("|---|---|---|---|")
        for k, name in enumerate(names):
            sw = [b[key][k] for b in batches]
            out.append(
                f"| {name} | {mean(sw) * 1e4:.3f} | {(mean(sw) - mean(ref_final)) * 1e4:+.3f} | {above(sw, ref_final)}/{len(sw)} |"
            )
    if "pairs" in batches[0]:
        out.append("")
        out.append(
            "two units compiled as one graph, on the chain's input: error x1e-4 minus the chain's at the same "
            "boundary, and the share of outputs unlike the chain's (batch mean)"
        )
        out.append("")
        pbe = list(batches[0]["pairs"])
        out.append("| junction | " + " | ".join(f"{be} delta | {be} differ" for be in pbe) + " |")
        out.append("|---" * (1 + 2 * len(pbe)) + "|")
        for k in range(len(names) - 1):
            cells = []
            for be in pbe:
                got = mean([b["pairs"][be][k][0] for b in batches])
                base_err = mean([b["chain"][be][k + 1] for b in batches])
                cells.append(
                    f"{(got - base_err) * 1e4:+.3f} | {mean([b['pairs'][be][k][1] for b in batches]):.4f}"
                )
            out.append(f"| {names[k]}+{names[k + 1]} | " + " | ".join(cells) + " |")
    if "whole" in batches[0]:
        out.append("")
        out.append("| whole model | mean err x1e-4 | outputs differing from its chain (batch mean) |")
        out.append("|---|---|---|")
        for be in batches[0]["whole"]:
            errs = [b["whole"][be][0] for b in batches]
            diff = [b["whole"][be][1] for b in batches]
            out.append(f"| {be} | {mean(errs) * 1e4:.3f} | {mean(diff):.4f} |")
    return "\n".join(out)


# -- the device part ---------------------------------------------------------------------------------------


def randomize_batchnorm(model, seed: int) -> int:
    """Give every BatchNorm of `model` (float32, before the bf16 cast) drawn statistics and affine: at
    timm's initialisation (mean 0, variance 1, weight 1, bias 0) eval BatchNorm scales by 1/sqrt(1 + eps),
    within 5e-6 of 1, which puts exact values next to bf16 rounding ties. Returns how many were set."""
    import torch

    g = torch.Generator().manual_seed(seed)
    count = 0
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
                if m.weight is not None:
                    m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(c, generator=g) * 0.1)
            count += 1
    return count


def _units(model):
    import torch

    class Stem(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.conv, self.bn = m.conv_stem, m.bn1

        def forward(self, x):
            return self.bn(self.conv(x))

    class Head(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m
            self.features_end = type(m).__name__ == "EfficientNet"  # conv_head + bn2 end its features

        def forward(self, x):
            if self.features_end:
                x = self.m.bn2(self.m.conv_head(x))
            return self.m.forward_head(x)

    return [Stem(model)] + [blk for stage in model.blocks for blk in stage] + [Head(model)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=("mobilenetv3", "efficientnet"))
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--json", required=True)
    p.add_argument("--whole", action="store_true")
    p.add_argument("--nose", action="store_true")
    p.add_argument("--pairs", action="store_true")
    p.add_argument("--oracle", action="store_true")
    p.add_argument(
        "--bn-random", type=int, metavar="SEED", help="draw every BatchNorm's statistics and affine from SEED"
    )
    p.add_argument("--dump")
    p.add_argument("--cpu", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--summary", action="store_true", help="print the tables of --json (no GPU)")
    a = p.parse_args(argv)
    if a.summary:
        print(summarize(json.loads(Path(a.json).read_text())))
        return

    import models as M
    import torch

    import fuselint.backend as fb
    from fuselint.backend import squeeze_excite

    torch._dynamo.config.automatic_dynamic_shapes = False  # the blocks share one forward: keep each static
    for knob in (
        "cache_size_limit",
        "recompile_limit",
        "accumulated_cache_size_limit",
        "accumulated_recompile_limit",
    ):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 4096)
    t_start = time.perf_counter()
    dev = "cuda" if not a.cpu else "cpu"  # --cpu: a smoke test of the script (batch 2, TRITON_INTERPRET=1)
    model, args = M.build(a.model, small=a.cpu)
    if a.cpu:
        args = (args[0][:1, :, :64, :64].clone(),)
    if a.bn_random is not None:
        randomize_batchnorm(model, a.bn_random)
    model, args = M._to(model, args, dev, torch.bfloat16)
    model32 = copy.deepcopy(model).float()
    model_cl = copy.deepcopy(model).to(memory_format=torch.channels_last)
    if a.cpu:
        batches = [args] + [
            (torch.randn(args[0].shape, generator=torch.Generator().manual_seed(s)).to(args[0].dtype),)
            for s in range(1, a.batches)
        ]
    else:
        batches = [args] + [M._fresh_inputs(args, seed) for seed in range(1, a.batches)]
    u16, u32, ucl = _units(model), _units(model32), _units(model_cl)
    names = unit_names([len(s) for s in model.blocks])
    n = len(names)
    assert len(u16) == n

    def cl(x):
        return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x

    fns: dict[str, list] = {"eager": list(u16), "eager_cl": [lambda x, u=u: u(cl(x)) for u in ucl]}
    compile_s: dict[str, float] = {}
    x0 = batches[0][0]

    def sync():
        if not a.cpu:
            torch.cuda.synchronize()

    def compile_units(be: str, backend, se_macs: int | None = None):
        saved = squeeze_excite.MAX_MACS
        if se_macs is not None:
            squeeze_excite.MAX_MACS = se_macs
        t0 = time.perf_counter()
        try:
            out, x = [], x0
            with torch.no_grad():
                for u in u16:
                    f = torch.compile(u, backend=backend)
                    x = f(x)  # compiles now, under the knob
                    out.append(f)
            sync()
        finally:
            squeeze_excite.MAX_MACS = saved
        compile_s[be] = time.perf_counter() - t0
        fns[be] = out
        print(f"compiled {be}: {compile_s[be]:.1f} s", flush=True)

    mark = fb.history_mark()
    compile_units("inductor", "inductor")
    compile_units("fuselint", "fuselint")
    fl_graphs = len(fb.reports_since(mark))
    if a.nose:  # a backend of its own: dynamo would reuse the fuselint graphs compiled with the reduction
        fuselint = torch._dynamo.lookup_backend("fuselint")

        def fuselint_nose(gm, example_inputs):
            return fuselint(gm, example_inputs)

        compile_units("fuselint_nose", fuselint_nose, se_macs=0)
    if a.oracle:  # each unit in IEEE float32 on its (bf16) input, rounded once: the best bf16 a unit can give

        def oracle(u):
            def f(x):
                with M._ieee_float32():
                    return u(x.float()).to(torch.bfloat16)

            return f

        fns["oracle"] = [oracle(u) for u in u32]
    backends = list(fns)

    def err(x, r):
        d = x.double() - r.double()
        return d.abs().mean().item(), d.mean().item()

    pairs: dict[str, list] = {}
    if a.pairs:  # two consecutive units compiled as one graph: a fusion across their boundary shows

        class Pair(torch.nn.Module):
            def __init__(self, first, second):
                super().__init__()
                self.first, self.second = first, second

            def forward(self, x):
                return self.second(self.first(x))

        for be in ("fuselint", "inductor"):
            t0 = time.perf_counter()
            pairs[be] = []
            with torch.no_grad():
                x = x0
                for k in range(n - 1):
                    f = torch.compile(Pair(u16[k], u16[k + 1]), backend=be)
                    f(x)
                    pairs[be].append(f)
                    x = fns[be][k](x)
            sync()
            compile_s[f"pairs {be}"] = time.perf_counter() - t0
            print(f"compiled pairs {be}: {compile_s[f'pairs {be}']:.1f} s", flush=True)

    whole = {}
    if a.whole:
        for be in ("fuselint", "inductor"):
            t0 = time.perf_counter()
            mark = fb.history_mark()
            whole[be] = torch.compile(model, backend=be)
            with torch.no_grad():
                whole[be](x0)
            sync()
            compile_s[f"whole {be}"] = time.perf_counter() - t0
            if be == "fuselint" and a.dump:
                d = Path(a.dump)
                d.mkdir(parents=True, exist_ok=True)
                with open(d / "fuselint_whole.txt", "w") as fh:
                    for r in fb.reports_since(mark):
                        fh.write(
                            f"# graph {r.graph}\n{r.graph_module.code if r.graph_module is not None else ''}\n"
                        )
                        for kern in r.kernels:
                            fh.write(f"# kernel {kern.__name__}\n{kern.source}\n")
                        for fall in r.fallbacks:
                            fh.write(f"# fallback {fall}\n")
            print(f"compiled whole {be}: {compile_s[f'whole {be}']:.1f} s", flush=True)

    data = {
        "model": a.model,
        "bn_random": a.bn_random,
        "units": names,
        "backends": backends,
        "compile_s": compile_s,
        "fuselint_unit_graphs": fl_graphs,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if not a.cpu else "cpu",
        "batches": [],
    }
    # Compiled units must differ from eager somewhere (a unit dynamo left to eager would not).
    same_as_eager = {}
    with torch.no_grad():
        for be in backends:
            x, same = x0, 0
            for k in range(n):
                y = fns[be][k](x)
                same += bool(torch.equal(y, u16[k](x)))
                x = y
            same_as_eager[be] = same
        x, same = x0, 0
        for k in range(
            n
        ):  # and fuselint's from Inductor's (dynamo would reuse one backend's graph for the other)
            y = fns["fuselint"][k](x)
            same += bool(torch.equal(y, fns["inductor"][k](x)))
            x = y
        same_as_eager["fuselint=inductor"] = same
    data["units_equal_to_eager"] = same_as_eager
    print("units bit-equal to eager on batch 0:", same_as_eager, flush=True)

    for bi, batch in enumerate(batches):
        x_in = batch[0]
        rec: dict = {"chain": {}, "bias": {}, "local": {}}
        with torch.no_grad():
            refs = [x_in.float()]
            with M._ieee_float32():
                for u in u32:
                    refs.append(u(refs[-1]))
            rec["ref_scale"] = [r.abs().mean().item() for r in refs[1:]]
            chains = {}
            for be in backends:
                xs = [x_in]
                for f in fns[be]:
                    xs.append(f(xs[-1]))
                chains[be] = xs
                e = [err(xs[k + 1], refs[k + 1]) for k in range(n)]
                rec["chain"][be] = [v[0] for v in e]
                rec["bias"][be] = [v[1] for v in e]
            for be in backends:
                loc = []
                for k in range(n):
                    inp = refs[k].to(torch.bfloat16)
                    with M._ieee_float32():
                        want = u32[k](inp.float())
                    loc.append(err(fns[be][k](inp), want)[0])
                rec["local"][be] = loc

            def run(plan, start, x, want=refs[-1]):
                for k in range(start, n):
                    x = fns[plan[k]][k](x)
                return err(x, want)[0]

            rec["swap"] = [
                run(mix("inductor", "fuselint", n, at=k), start=k, x=chains["inductor"][k]) for k in range(n)
            ]
            rec["swap_back"] = [
                run(mix("fuselint", "inductor", n, at=k), start=k, x=chains["fuselint"][k]) for k in range(n)
            ]
            rec["prefix"] = [
                run(mix("inductor", "fuselint", n, before=k), start=k, x=chains["fuselint"][k])
                for k in range(n)
            ]
            rec["swap_eager"] = [
                run(mix("inductor", "eager", n, at=k), start=k, x=chains["inductor"][k]) for k in range(n)
            ]
            if "oracle" in fns:
                rec["swap_oracle"] = [
                    run(mix("inductor", "oracle", n, at=k), start=k, x=chains["inductor"][k])
                    for k in range(n)
                ]
            if pairs:  # per junction k (units k, k+1): error, and the share of outputs unlike the chain's
                rec["pairs"] = {}
                for be, fs in pairs.items():
                    rows = []
                    for k, f in enumerate(fs):
                        y = f(chains[be][k])
                        rows.append([err(y, refs[k + 2])[0], (y != chains[be][k + 2]).float().mean().item()])
                    rec["pairs"][be] = rows
            if whole:
                rec["whole"] = {}
                for be, f in whole.items():
                    y = f(x_in)
                    rec["whole"][be] = [err(y, refs[-1])[0], (y != chains[be][-1]).float().mean().item()]
        data["batches"].append(rec)
        Path(a.json).write_text(json.dumps(data))
        print(f"batch {bi}: {time.perf_counter() - t_start:.0f} s", flush=True)
    print(summarize(data))


if __name__ == "__main__":
    main()
