"""Which module of GPT-2 / ViT / T5 / EfficientNet-B0 / MobileNetV3 makes fuselint's error vs float32 larger than Inductor's:
each submodule compiled alone on the inputs it sees in the bf16 model; error vs the same submodule
in float32 (IEEE) on the same (bf16-rounded, upcast) inputs; mean abs error x1e-4 / max. Needs CUDA:

    python bench/error_modules.py vit gpt2 t5enc efficientnet mobilenetv3

The CNNs' rows are their BN-activation stem and head, and the first block of every stage;
`efficientnet:parts` gives the submodules (convolutions, BN-activations, squeeze-excite) of the
first two blocks, each alone; `efficientnet:pairs` runs of two and of three consecutive submodules
of those blocks, so that a rounding between two submodules that one backend's fusion avoids shows as a
run whose error differs while its parts' do not. `--emulate` adds Inductor with
`emulate_precision_casts=True` (each 16-bit intermediate rounded, as eager does) as a fourth backend.
"""

import copy
import sys

sys.path.insert(0, "bench")
import models as M
import torch

import fuselint.backend  # noqa

torch.backends.cuda.matmul.allow_tf32 = False


def targets(name, model):
    if name.endswith(":model"):  # the whole model, on its own inputs
        return {"model": model}
    if name == "vit":
        b = model.blocks[1]
        return {"block": b, "attn": b.attn, "mlp": b.mlp, "norm1": b.norm1, "head_norm": model.norm}
    if name == "gpt2":
        b = model.h[1]
        return {"block": b, "attn": b.attn, "mlp": b.mlp, "ln_1": b.ln_1}
    if name == "t5enc":
        b = model.encoder.block[1] if hasattr(model, "encoder") else model.block[1]
        return {
            "block": b,
            "selfattn_layer": b.layer[0],
            "ff_layer": b.layer[1],
            "attn": b.layer[0].SelfAttention,
        }
    if name.endswith(":parts") or name.endswith(":pairs"):  # submodules of the first two blocks
        found = {}
        for i in (0, 1):
            subs = [
                (k, s) for k, s in model.blocks[i][0].named_children() if not isinstance(s, torch.nn.Identity)
            ]
            if name.endswith(":parts"):
                found.update({f"stage{i}.0.{key}": sub for key, sub in subs})
                continue
            for width in (2, 3):  # consecutive runs; these blocks have no skip, so a run is their forward
                for j in range(len(subs) - width + 1):
                    run = subs[j : j + width]
                    found[f"s{i}." + "+".join(k for k, _ in run)] = torch.nn.Sequential(*(s for _, s in run))
        return found
    if name in ("efficientnet", "mobilenetv3"):
        found = {"bn1": model.bn1, "conv_head": model.conv_head}
        if hasattr(model, "bn2"):
            found["bn2"] = model.bn2
        for i, stage in enumerate(model.blocks):
            found[f"stage{i}.0"] = stage[0]
            if len(stage) > 1:
                found[f"stage{i}.1"] = stage[1]
        found["classifier"] = model.classifier
        return found
    raise SystemExit(f"no targets for {name}")


def up(v):
    return v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


EMULATE = "--emulate" in sys.argv
BACKENDS = ("eager", "fuselint", "inductor") + (("inductor-emul",) if EMULATE else ())


def compiled(m, be):
    if be == "eager":
        return m
    if be == "inductor-emul":
        from torch._inductor import config

        inner = torch.compile(m, backend="inductor")

        def call(*a, **k):
            with config.patch(emulate_precision_casts=True):
                return inner(*a, **k)

        return call
    return torch.compile(m, backend=be)


for name in (a for a in sys.argv[1:] if not a.startswith("--")):
    model, args = M.build(name.split(":")[0])
    model, args = M._to(model, args, "cuda", torch.bfloat16)
    if hasattr(model, "config"):
        model.config.use_cache = False
    mods = targets(name, model)
    seen: dict = {}
    # A run of submodules (`:pairs`) is a Sequential outside the model: it sees its first one's input.
    hooks = [
        (
            m[0] if isinstance(m, torch.nn.Sequential) and m not in list(model.modules()) else m
        ).register_forward_pre_hook(
            lambda m, a, k, key=key, seen=seen: seen.setdefault(key, (a, k)), with_kwargs=True
        )
        for key, m in mods.items()
    ]
    with torch.no_grad():
        model(*args)
    for h in hooks:
        h.remove()
    for key, m in mods.items():
        a, k = seen[key]
        m32 = copy.deepcopy(m).float()
        with torch.no_grad():
            ref = M._first_tensor(m32(*[up(v) for v in a], **{kk: up(v) for kk, v in k.items()})).float()
            row = []
            for be in BACKENDS:
                torch._dynamo.reset()
                f = compiled(m, be)
                out = M._first_tensor(f(*a, **k)).float()
                d = (out - ref).abs()
                row.append(f"{be} {d.mean().item() * 1e4:.3f}/{d.max().item():.4f}")
        print(f"{name:6s} {key:24s} " + "  ".join(row), flush=True)
