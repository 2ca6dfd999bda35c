"""How cuDNN rounds a float32 convolution in TF32, and what that does to MobileNetV3's error, on a GPU.

    PYTHONPATH=. python bench/tf32_rounding.py [--batches 24] [--json out.json]
    PYTHONPATH=. python bench/tf32_rounding.py --model efficientnet --batches 0   # rounding only

fuselint reduces MobileNetV3's squeeze-excite convolutions in IEEE float32 (backend/squeeze_excite.py);
eager and Inductor hand them to cuDNN, which runs a float32 convolution in TF32 unless
`torch.backends.cudnn.allow_tf32` is off (PyTorch's default is on). At timm's initial BatchNorm that
leaves fuselint's whole-model error 1.19x Inductor's (bench/results/h200-s23/tf32-init64.txt), and
the same with those convolutions in cuDNN (`tf32_errors.py --nose`) to the last digit.

1. `rounding`: each squeeze-excite reduce convolution's real input (of `--model`'s) (and a 1x1 and a 3x3 convolution of
   the trunk), convolved by cuDNN with TF32 on, against the float64 product of its operands taken as
   they are, truncated to TF32's 10-bit mantissa, and rounded to nearest even at that bit: the
   matching one is at float32 rounding distance (~1e-7 relative), the others at TF32's (~1e-4).
2. `model` (with `--batches` above 0): MobileNetV3 (timm, batch 64, initial BatchNorm, TF32 on) in eager with its squeeze-excite
   reduce convolutions run four ways: by cuDNN as usual, in IEEE float32 (what fuselint computes),
   and in IEEE float32 on operands truncated / rounded to TF32 first. Mean abs error against the
   model in IEEE float32 and in float64, averaged over `--batches` batches, and on how many batches
   each is above cuDNN's.
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
import torch.nn.functional as F  # noqa: E402

LOW = 0x1FFF  # the 13 mantissa bits TF32 drops


def truncated(x: torch.Tensor) -> torch.Tensor:
    return (x.contiguous().view(torch.int32) & ~LOW).view(torch.float32)


def nearest_even(x: torch.Tensor) -> torch.Tensor:
    """The rounding fuselint's gates ship (squeeze_excite.round_to_tf32), so that this probes it."""
    from fuselint.backend.squeeze_excite import round_to_tf32

    return round_to_tf32(x)


ROUNDINGS = {"as is": lambda t: t, "truncated": truncated, "nearest even": nearest_even}


def conv_inputs(model, x) -> dict[str, tuple]:
    """name -> (input, conv module) of each squeeze-excite reduce conv and two trunk convs."""
    seen: dict[str, tuple] = {}
    hooks = []
    wanted = {n: m for n, m in model.named_modules() if n.endswith("se.conv_reduce")}
    convs = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d) and "se." not in n]
    for n, m in convs:
        if m.kernel_size == (1, 1) and m.groups == 1:
            wanted[n] = m
            break
    for n, m in convs:
        if m.kernel_size == (3, 3) and m.groups == 1 and n not in wanted:
            wanted[n] = m
            break

    def keep(name):
        def hook(mod, inp, out):
            seen.setdefault(name, (inp[0].detach(), mod))

        return hook

    for n, m in wanted.items():
        hooks.append(m.register_forward_hook(keep(n)))
    with torch.no_grad(), M._ieee_float32():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def rounding(model, x) -> list[dict]:
    rows = []
    for name, (inp, conv) in conv_inputs(model, x).items():
        with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
            got = conv(inp).double()
        row = {"conv": name, "input": list(inp.shape), "weight": list(conv.weight.shape)}
        for label, r in ROUNDINGS.items():
            ref = F.conv2d(
                r(inp).double(),
                r(conv.weight.detach()).double(),
                None if conv.bias is None else conv.bias.detach().double(),
                conv.stride,
                conv.padding,
                conv.dilation,
                conv.groups,
            )
            row[label] = ((got - ref).abs().max() / ref.abs().max()).item()
        rows.append(row)
        print(
            f"{name:28s} {str(row['input']):20s} " + "  ".join(f"{k} {row[k]:.2e}" for k in ROUNDINGS),
            flush=True,
        )
    return rows


def _se_reduce(conv, how: str):
    def forward(x):
        if how == "cudnn":
            return F.conv2d(x, conv.weight, conv.bias)
        r = {"ieee": lambda t: t, "truncated": truncated, "nearest even": nearest_even}[how]
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return F.conv2d(r(x), r(conv.weight), conv.bias)

    return forward


def model_errors(model, args, batches: int) -> dict:
    ways = ("cudnn", "ieee", "truncated", "nearest even")
    ref32 = copy.deepcopy(model)
    ref64 = copy.deepcopy(model).double()
    errs = {w: {"ieee32": [], "float64": []} for w in ways}
    for b in range(batches):
        xs = M._fresh_inputs(args, 1000 + b) if b else args
        with torch.no_grad():
            with M._ieee_float32():
                e32 = ref32(*xs)
            e64 = ref64(*(a.double() for a in xs))
            for w in ways:
                for n, m in model.named_modules():
                    if n.endswith("se.conv_reduce"):
                        m.forward = _se_reduce(m, w)
                with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
                    out = model(*xs)
                errs[w]["ieee32"].append((out - e32).abs().mean().item())
                errs[w]["float64"].append((out.double() - e64).abs().mean().item())
    summary = {}
    for w in ways:
        s = {k: sum(v) / len(v) for k, v in errs[w].items()}
        s["above cudnn (ieee32)"] = sum(
            a > c for a, c in zip(errs[w]["ieee32"], errs["cudnn"]["ieee32"], strict=True)
        )
        summary[w] = s
        print(
            f"squeeze-excite reduce {w:13s} vs IEEE float32 {s['ieee32']:.4e}  vs float64 {s['float64']:.4e}  "
            f"above cuDNN's on {s['above cudnn (ieee32)']} of {batches}",
            flush=True,
        )
    return {"per_batch": errs, "summary": summary}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--json")
    p.add_argument("--model", default="mobilenetv3", help="a timm model of bench/models.py")
    a = p.parse_args()
    model, args = M.build(a.model)
    model = model.cuda()
    args = tuple(x.cuda() for x in args)
    out = {"rounding": rounding(model, args[0])}
    if a.batches:
        out["model"] = model_errors(model, args, a.batches)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
