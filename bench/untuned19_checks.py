"""Numbers behind the reasons fix_rate.py gives for UNTUNED19's sites that are left (fixes19).

HiggsAudio-v2's decoder layer runs its text and audio norms and MLPs on the rows a token mask selects
(`x.masked_scatter(m[..., None], norm(x[m]))`, `x[m] += mlp(norm(x[m]))`); a static form computes each
on every row and selects (`torch.where(m[..., None], f(x), x)`). It keeps the outputs only if `f` on a
subset of the rows gives, bit for bit, `f` on all rows then indexed. Checked here for the entry's own
modules (the rule's tiny config: 32 wide, 2 x 16 tokens, CPU), over random row subsets; the MoE
experts of JetMoE and openai-privacy-filter are the same question for an expert's MLP.

    PYTHONPATH=. python bench/untuned19_checks.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import build  # noqa: E402


def rows_differ(fn, rows, trials: int = 20) -> int:
    """How many of `trials` random row subsets give `fn(rows[subset])` that differs, bit for bit, from
    `fn(rows)[subset]`."""
    import torch

    torch.manual_seed(0)
    differ = 0
    with torch.no_grad():
        full = fn(rows)
        for _ in range(trials):
            mask = torch.rand(rows.shape[0]) < torch.rand(())
            differ += not torch.equal(fn(rows[mask]), full[mask])
    return differ


def higgs_layer():
    """The first decoder layer of the entry's HiggsAudio-v2, and 32 rows of its width."""
    import torch

    model, _args = build("hf19_higgs_audio_v2")
    layer = next(m for m in model.modules() if type(m).__name__.endswith("DecoderLayer"))
    torch.manual_seed(1)
    return layer, torch.randn(32, model.model.config.hidden_size)


def main() -> None:
    layer, rows = higgs_layer()
    for name in ("input_layernorm", "audio_input_layernorm", "post_attention_layernorm", "mlp", "audio_mlp"):
        fn = getattr(layer, name)
        print(
            f"higgs_audio_v2 {name} ({type(fn).__name__}): {rows_differ(fn, rows)} of 20 row subsets differ"
        )


if __name__ == "__main__":
    main()
