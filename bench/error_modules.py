"""Which module of GPT-2 / ViT / T5 makes fuselint's error vs float32 larger than Inductor's:
each submodule compiled alone on the inputs it sees in the bf16 model; error vs the same submodule
in float32 (IEEE) on the same (bf16-rounded, upcast) inputs; mean abs error x1e-4 / max. Needs CUDA:

    python bench/error_modules.py vit gpt2 t5enc
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
    raise SystemExit(name)


def up(v):
    return v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


for name in sys.argv[1:]:
    model, args = M.build(name)
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
