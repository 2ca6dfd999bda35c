"""Dynamo checks behind the verdicts of the fifth sample (seed 28) of
bench/results/real_breaks_precision.md (prec28j, issue 11): each probe compiles the installed package
code of one sampled finding, or a few-line reproduction of its pattern, (torch 2.13 CPU, backend eager,
dynamic=False) on the input a normal call gives and, where the verdict turns on it, on the input of the
other path. A row prints the graphs, their op count and the lines where dynamo logged a break (in the
package, or "probes:N" for a line of this file).

    cd bench && PYTHONPATH=$PWD/..:$PWD python prec28_probes.py

Needs the corpus packages kornia, torch_geometric and transformers.
"""

from __future__ import annotations

import copy

import torch
from break_probe import print_probes

SCRIPT = "prec28_probes.py"
PACKAGES = ("kornia", "torch_geometric", "transformers")


def sparse_value(sparse):
    """Sample 45 (torch_geometric `utils/sparse.py:460`): `set_sparse_value` on a torch sparse COO
    adjacency, as APPNP does with `dropout > 0` in training; the dense input is the other path."""
    from torch_geometric.utils.sparse import set_sparse_value

    index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    adj = torch.sparse_coo_tensor(index, torch.ones(4), (3, 3)).coalesce()
    if not sparse:
        return lambda v: torch.zeros(3, 3).index_put((index[0], index[1]), v), (torch.rand(4),)
    return lambda v: set_sparse_value(adj, v), (torch.rand(4),)


def appnp_sparse(label):
    """Sample 45 through the module the finding names: APPNP with a sparse COO `edge_index`, dropout 0.5,
    in train mode (the branch of `appnp.py:115-118`)."""
    from torch_geometric.nn import APPNP

    module = APPNP(K=2, alpha=0.1, dropout=0.5, normalize=False)
    module.train(label.startswith("train"))
    index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    adj = torch.sparse_coo_tensor(index, torch.ones(4), (3, 3)).coalesce()
    return module, (torch.rand(3, 4), adj)


def sparse_from_dense(index, values):
    """Sample 45's line alone: `torch.sparse_coo_tensor` built from dense indices and values."""
    return torch.sparse_coo_tensor(index, values, (3, 3)).coalesce().to_dense()


def gated_delta_rule(seq_len):
    """Sample 23 (transformers `qwen4_exp/modeling_qwen4_exp.py:441`): the token loop of
    `torch_recurrent_gated_delta_rule`, whose only caller (`:585`) runs it when `seq_len == 1` with a
    recurrent state (a decode step); `seq_len` 6 is the shape the finding's message assumes."""
    from transformers.models.qwen4_exp.modeling_qwen4_exp import torch_recurrent_gated_delta_rule

    batch, heads, k_dim, v_dim = 1, 2, 4, 4
    query, key = torch.rand(batch, seq_len, heads, k_dim), torch.rand(batch, seq_len, heads, k_dim)
    value = torch.rand(batch, seq_len, heads, v_dim)
    g, beta = -torch.rand(batch, seq_len, heads), torch.rand(batch, seq_len, heads)
    state = torch.rand(batch, heads, k_dim, v_dim)
    fn = getattr(torch_recurrent_gated_delta_rule, "__wrapped__", torch_recurrent_gated_delta_rule)
    return (
        lambda q, k, v, g, b, s: fn(q, k, v, g=g, beta=b, initial_state=s, output_final_state=True)[0],
        (query, key, value, g, beta, state),
    )


def cutmix_labels(num_mix):
    """Sample 19 (kornia `_2d/mix/cutmix.py:145`): `zip(params["mix_pairs"], params["crop_src"])`
    runs over `num_mix` rows (a constructor argument, default 1), not the batch; line 143 reads
    `params["dtype"].item()` before it."""
    from kornia.augmentation import RandomCutMixV2

    aug = RandomCutMixV2(num_mix=num_mix, use_correct_lambda=True)
    images = torch.rand(4, 3, 8, 8)
    params = aug.forward_parameters(images.shape)
    params["dtype"] = torch.tensor(2)  # kornia's DType.FLOAT32
    return lambda labels: aug.apply_transform_class(labels, params, aug.flags), (torch.arange(4).float(),)


def cutmix_loop_alone(pairs, crops, labels):
    """Sample 19 without line 143's read: the zip over the `num_mix` rows alone."""
    out = []
    for pair, crop in zip(pairs, crops, strict=True):
        permuted = labels.index_select(0, pair)
        area = (crop[:, 1, 0] - crop[:, 0, 0]) * (crop[:, 2, 1] - crop[:, 1, 1]) / 64
        out.append(torch.stack([labels, permuted, area], -1))
    return torch.stack(out, 0)


def deepcopy_mask(mask):
    """Sample 16 (diffusers `kandinsky2_2/pipeline_kandinsky2_2_inpainting.py:103`): `prepare_mask`
    starts with `old_mask = deepcopy(mask)` on each mask tensor of every inpainting call."""
    old = copy.deepcopy(mask)
    return old * 2


def mixtral(experts_implementation):
    """Samples 8, 9, 26, 27, 28, 32 (the experts loops of decorated `*Experts` classes, here
    `mixtral/modeling_mixtral.py:78-82`): a tiny Mixtral built as `from_config` builds it. Left unset,
    `PreTrainedModel.__init__` picks `grouped_mm` for a class under `@use_experts_implementation`, and the
    loop in the class's own `forward` never runs; `experts_implementation="eager"` runs it."""
    from transformers import AutoModel, MixtralConfig

    config = MixtralConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
    )
    torch.manual_seed(0)
    kwargs = {"experts_implementation": experts_implementation} if experts_implementation else {}
    model = AutoModel.from_config(config, **kwargs).eval()
    assert model.config._experts_implementation == (experts_implementation or "grouped_mm")
    return model, (torch.randint(0, 100, (1, 8)),)


def cases() -> list:
    pairs = torch.stack([torch.randperm(4)])
    crops = torch.rand(1, 4, 4, 2) * 8
    return [
        ("torch_geometric set_sparse_value, sparse COO adjacency", *sparse_value(True)),
        ("dense adjacency filled the same way (no sparse tensor)", *sparse_value(False)),
        (
            "torch.sparse_coo_tensor from dense index and values",
            sparse_from_dense,
            (torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), torch.rand(4)),
        ),
        ("train torch_geometric APPNP, sparse COO edge_index, dropout 0.5", *appnp_sparse("train")),
        ("torch_recurrent_gated_delta_rule, seq_len 1 (its caller's)", *gated_delta_rule(1)),
        ("torch_recurrent_gated_delta_rule, seq_len 6", *gated_delta_rule(6)),
        ("kornia RandomCutMixV2.apply_transform_class, num_mix 1", *cutmix_labels(1)),
        ("cutmix label loop alone, num_mix 1", cutmix_loop_alone, (pairs, crops, torch.arange(4).float())),
        ("deepcopy of a mask tensor", deepcopy_mask, (torch.ones(1, 4, 4),)),
        ("transformers Mixtral, experts implementation left unset (grouped_mm)", *mixtral(None)),
        ('transformers Mixtral, experts_implementation="eager"', *mixtral("eager")),
    ]


if __name__ == "__main__":
    print_probes(cases(), SCRIPT, PACKAGES)
