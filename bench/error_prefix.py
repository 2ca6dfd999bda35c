# ruff: noqa: B023  (each lambda is timed within the iteration that made it)
"""GPT-2 (1 layer) cut after each stage; fuselint vs Inductor outputs compared bitwise, and each vs fp32."""

import copy
import sys

sys.path.insert(0, "bench")
import models as M
import torch
import transformers as tf

import fuselint.backend  # noqa

torch.backends.cuda.matmul.allow_tf32 = False


class Prefix(torch.nn.Module):
    def __init__(self, m, stage):
        super().__init__()
        self.m, self.stage = m, stage

    def forward(self, ids):
        m, b = self.m, self.m.h[0]
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = m.wte(ids) + m.wpe(pos)
        x = b.ln_1(h)
        if self.stage == 1:
            return x
        a = b.attn(x)[0]
        if self.stage == 2:
            return a
        h = h + a
        if self.stage == 3:
            return h
        x = b.ln_2(h)
        if self.stage == 4:
            return x
        f = b.mlp.c_fc(x)
        if self.stage == 5:
            return f
        g = b.mlp.act(f)
        if self.stage == 6:
            return g
        y = b.mlp.c_proj(g)
        if self.stage == 7:
            return y
        h = h + y
        if self.stage == 8:
            return h
        return m.ln_f(h)


torch.manual_seed(0)
gpt = tf.GPT2Model(tf.GPT2Config(n_layer=1, n_embd=768, n_head=12, use_cache=False)).eval()
ids = torch.randint(0, 30000, (8, 512))
for stage in range(1, 10):
    model = Prefix(gpt, stage)
    m32, a32 = M._to(copy.deepcopy(model), (ids,), "cuda", torch.float32)
    mb, ab = M._to(copy.deepcopy(model), (ids,), "cuda", torch.bfloat16)
    with torch.no_grad():
        ref = m32(*a32).float()
        outs = {}
        for be in ("eager", "fuselint", "inductor"):
            torch._dynamo.reset()
            f = mb if be == "eager" else torch.compile(mb, backend=be)
            outs[be] = f(*ab).float()
        row = "  ".join(
            f"{be} {(o - ref).abs().mean().item() * 1e4:.3f}/{(o - ref).abs().max().item():.4f}"
            for be, o in outs.items()
        )
        diff = (outs["fuselint"] - outs["inductor"]).abs()
        print(
            f"stage {stage}: {row}  fl-vs-ind differ {int((diff > 0).sum())} of {diff.numel()} max {diff.max().item():.4g}",
            flush=True,
        )
