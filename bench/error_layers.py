"""fuselint vs Inductor error against float32 on GPT-2 / ViT / T5 cut to 1 and 2 layers, and on ViT's
patch embedding and head alone (mean abs x1e-4 / max). Needs CUDA:

    python bench/error_layers.py
"""

import copy
import sys

sys.path.insert(0, "bench")
import models as M
import timm
import torch
import transformers as tf

import fuselint.backend  # noqa

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def run(tag, model, args):
    model = model.eval()
    m32, a32 = M._to(copy.deepcopy(model), args, "cuda", torch.float32)
    mb, ab = M._to(model, args, "cuda", torch.bfloat16)
    with torch.no_grad():
        ref = M._first_tensor(m32(*a32)).float()
        row = []
        for be in ("eager", "fuselint", "inductor"):
            torch._dynamo.reset()
            f = mb if be == "eager" else torch.compile(mb, backend=be)
            d = (M._first_tensor(f(*ab)).float() - ref).abs()
            row.append(f"{be} {d.mean().item() * 1e4:.3f}/{d.max().item():.4f}")
    print(f"{tag:14s} " + "  ".join(row), flush=True)


for n in (1, 2):
    torch.manual_seed(0)
    run(
        f"gpt2-{n}",
        tf.GPT2Model(tf.GPT2Config(n_layer=n, n_embd=768, n_head=12, use_cache=False)),
        (torch.randint(0, 30000, (8, 512)),),
    )
    torch.manual_seed(0)
    run(
        f"vit-{n}",
        timm.create_model("vit_base_patch16_224", pretrained=False, depth=n),
        (torch.randn(32, 3, 224, 224),),
    )
    torch.manual_seed(0)
    run(
        f"t5enc-{n}",
        tf.T5EncoderModel(tf.T5Config(d_model=512, d_ff=2048, num_layers=n, num_heads=8)),
        (torch.randint(0, 30000, (16, 256)),),
    )


class Embed(torch.nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return self.vit._pos_embed(self.vit.patch_embed(x))


torch.manual_seed(0)
vit = timm.create_model("vit_base_patch16_224", pretrained=False, depth=1)
run("vit-embed", Embed(vit), (torch.randn(32, 3, 224, 224),))


class Norm(torch.nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return self.vit.forward_head(self.vit.norm(x))


run("vit-head", Norm(vit), (torch.randn(32, 197, 768) * 3,))


class GPT2Ends(torch.nn.Module):
    """GPT-2's embedding (tokens + positions) into the first block's LayerNorm, or its last
    residual add into ln_f (`end="last"`)."""

    def __init__(self, model, end: str):
        super().__init__()
        self.model, self.end = model, end

    def forward(self, ids_or_h, r=None):
        if self.end == "first":
            pos = torch.arange(ids_or_h.shape[1], device=ids_or_h.device)
            h = self.model.wte(ids_or_h) + self.model.wpe(pos)
            return self.model.h[0].ln_1(h)
        return self.model.ln_f(ids_or_h + r)


torch.manual_seed(0)
gpt2 = tf.GPT2Model(tf.GPT2Config(n_layer=1, n_embd=768, n_head=12, use_cache=False))
run("gpt2-embed-ln", GPT2Ends(gpt2, "first"), (torch.randint(0, 30000, (8, 512)),))
run("gpt2-add-lnf", GPT2Ends(gpt2, "last"), (torch.randn(8, 512, 768) * 3, torch.randn(8, 512, 768)))
