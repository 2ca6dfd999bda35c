"""Which module of GPT-2 / ViT / T5 / EfficientNet-B0 / MobileNetV3 makes fuselint's error vs float32 larger than Inductor's:
each submodule compiled alone on the inputs it sees in the bf16 model; error vs the same submodule
in float32 (IEEE) on the same (bf16-rounded, upcast) inputs; mean abs error x1e-4 / max. Needs CUDA:

    python bench/error_modules.py vit gpt2 t5enc efficientnet mobilenetv3

The CNNs' rows are their BN-activation stem and head, and the first block of every stage;
`efficientnet:parts` gives the submodules (convolutions, BN-activations, squeeze-excite) of the
first two blocks, each alone.
"""

import copy
import sys

sys.path.insert(0, "bench")
import models as M
import torch

import fuselint.backend  # noqa

torch.backends.cuda.matmul.allow_tf32 = False


def targets(name, model):
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
    if name.endswith(":parts"):  # the submodules of the first two blocks, each alone
        found = {}
        for i in (0, 1):
            for key, sub in model.blocks[i][0].named_children():
                if not isinstance(sub, torch.nn.Identity):
                    found[f"stage{i}.0.{key}"] = sub
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


for name in sys.argv[1:]:
    model, args = M.build(name.split(":")[0])
    model, args = M._to(model, args, "cuda", torch.bfloat16)
    if hasattr(model, "config"):
        model.config.use_cache = False
    mods = targets(name, model)
    seen: dict = {}
    hooks = [
        m.register_forward_pre_hook(
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
            for be in ("eager", "fuselint", "inductor"):
                torch._dynamo.reset()
                f = m if be == "eager" else torch.compile(m, backend=be)
                out = M._first_tensor(f(*a, **k)).float()
                d = (out - ref).abs()
                row.append(f"{be} {d.mean().item() * 1e4:.3f}/{d.max().item():.4f}")
        print(f"{name:6s} {key:15s} " + "  ".join(row), flush=True)
