"""Dynamo check behind the `option` road (moe21, issue 11): transformers 5.x mixture-of-experts models
whose experts class carries `@use_experts_implementation`, built from tiny configs with random weights
(torch 2.13 CPU, backend eager, dynamic=False, eval + no_grad), compiled whole once with the experts
implementation left unset (the model then picks "grouped_mm") and once with `experts_implementation="eager"`,
which keeps the class's own python loop over the experts. A row prints the graphs, their op count and the
lines where dynamo logged a break. openai_privacy_filter picks "eager" itself when the option is unset
(its `get_correct_experts_implementation`), which is why its loop stays on the normal road. The last two rows
are seed 32's probes (bench/results/real_breaks_precision.md): the reproduced lines of #3 (diffusers
`scheduling_rfd4_proteina.py:245`) and #31 (transformers `mra/modeling_mra.py:364`).

    cd bench && PYTHONPATH=$PWD/..:$PWD CORPUS_VENV/bin/python moe21_probes.py

Needs the corpus package transformers (5.23.0).
"""

from __future__ import annotations

import torch
from break_probe import print_probes

SCRIPT = "moe21_probes.py"
PACKAGES = ("transformers",)
TINY = {
    "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 32,
}  # fmt: skip


def mixtral(**options):
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(**TINY, num_local_experts=4, num_experts_per_tok=2, **options)
    return MixtralForCausalLM(config).eval()


def qwen2_moe(**options):
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    config = Qwen2MoeConfig(
        **TINY, moe_intermediate_size=8, shared_expert_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, **options,
    )  # fmt: skip
    return Qwen2MoeForCausalLM(config).eval()


def olmoe(**options):
    from transformers import OlmoeConfig, OlmoeForCausalLM

    config = OlmoeConfig(**TINY, num_experts=4, num_experts_per_tok=2, **options)
    return OlmoeForCausalLM(config).eval()


def privacy_filter(**options):
    from transformers import OpenAIPrivacyFilterConfig, OpenAIPrivacyFilterForTokenClassification

    config = OpenAIPrivacyFilterConfig(**options)
    tiny = {**TINY, "num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 8, "pad_token_id": 0}
    for name, value in tiny.items():
        if hasattr(config, name):
            setattr(config, name, value)
    return OpenAIPrivacyFilterForTokenClassification(config).eval()


def timestep_check(timestep, timesteps):
    """Seed 32 #3: the rfd4_proteina scheduler's `step` check, as written there."""
    if not torch.equal(timestep, timesteps[0]):
        raise ValueError("timestep must be the next element of timesteps.")
    return timestep * 2


def mra_fallback(query):
    """Seed 32 #31: what `mra2_attention` returns when the MRA kernel is not loaded (CPU, or no `kernels`)."""
    return torch.zeros_like(query).requires_grad_()


def logits(model):
    return lambda ids: model(input_ids=ids).logits


def main() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (1, 8))
    runs = []
    for name, build in (("Mixtral", mixtral), ("Qwen2-MoE", qwen2_moe), ("OLMoE", olmoe)):
        for label, options in (
            ("unset", {}),
            ('experts_implementation="eager"', {"experts_implementation": "eager"}),
        ):
            model = build(**options)
            chosen = model.config._experts_implementation
            runs.append((f"tiny {name}, {label} (runs {chosen})", logits(model), (ids,)))
    model = privacy_filter()
    runs.append(
        (
            f"tiny openai_privacy_filter, unset (runs {model.config._experts_implementation})",
            logits(model),
            (ids,),
        )
    )
    timesteps = torch.tensor([999.0, 500.0])
    runs.append(
        (
            "seed 32 #3: `torch.equal` check of the next timestep",
            timestep_check,
            (timesteps[0].clone(), timesteps),
        )
    )
    runs.append(("seed 32 #31: `zeros_like(query).requires_grad_()`", mra_fallback, (torch.randn(2, 3),)))
    print_probes(runs, SCRIPT, PACKAGES)


if __name__ == "__main__":
    main()
