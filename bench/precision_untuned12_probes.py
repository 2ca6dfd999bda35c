"""Dynamo checks behind bench/results/precision_untuned12.md (FL1 recall and precision on
pytorch-tabnet 4.1.0, held out: chosen before any finding was read; torch 2.13 CPU).

Each run compiles real pytorch-tabnet code (pure Python) with random weights, tiny sizes, seeded,
the way its training loop (`TabModel._train_batch`, `TabNetPretrainer._train_batch`) and
`predict` call it: the TabNet network with sparsemax and entmax attention, categorical
embeddings, feature groups and several task heads, the pretraining network (obfuscation, decoder),
its unsupervised loss, and the SMOTE-style augmentations handed each batch. Runs labelled "train"
keep autograd on and call backward. Break sites come from dynamo's `graph_breaks` log
(bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned12_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned12_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import CallWith, probe_main

PACKAGES = ("pytorch_tabnet",)


def t_runs() -> list:
    from pytorch_tabnet import sparsemax, tab_network
    from pytorch_tabnet.augmentations import ClassificationSMOTE, RegressionSMOTE
    from pytorch_tabnet.metrics import UnsupervisedLoss
    from pytorch_tabnet.utils import check_embedding_parameters, create_group_matrix

    torch.manual_seed(0)
    x = torch.randn(16, 6)
    cats = torch.cat([torch.randn(16, 4), torch.randint(0, 3, (16, 2)).float()], 1)
    small = dict(n_d=4, n_a=4, n_steps=2, virtual_batch_size=8)

    def built(cls, *args, groups=(), cat_idxs=(), cat_dims=(), cat_emb_dim=1, **kw):
        """The network as `TabModel._set_network` builds it: checked embedding sizes, group matrix."""
        dims, idxs, emb = check_embedding_parameters(list(cat_dims), list(cat_idxs), cat_emb_dim)
        matrix = create_group_matrix([list(g) for g in groups], args[0])
        return cls(*args, **{**small, **kw}, cat_idxs=idxs, cat_dims=dims, cat_emb_dim=emb,
                   group_attention_matrix=matrix)  # fmt: skip

    def tabnet(**kw):
        return built(tab_network.TabNet, 6, 3, **kw)

    def pretrainer(**kw):
        return built(tab_network.TabNetPretraining, 6, **kw)

    runs = [
        ("TabNet forward", lambda: tabnet(), (x,)),
        ("train TabNet forward", lambda: tabnet(), (x,)),
        ("TabNet entmax forward", lambda: tabnet(mask_type="entmax"), (x,)),
        ("train TabNet entmax forward", lambda: tabnet(mask_type="entmax"), (x,)),
        ("TabNet categorical forward", lambda: tabnet(cat_idxs=[4, 5], cat_dims=[3, 3], cat_emb_dim=2), (cats,)),
        ("train TabNet categorical forward", lambda: tabnet(cat_idxs=[4, 5], cat_dims=[3, 3], cat_emb_dim=[2, 1]), (cats,)),
        ("TabNet groups forward", lambda: tabnet(groups=[[0, 1], [2, 3]]), (x,)),
        ("train TabNet categorical groups forward", lambda: tabnet(groups=[[0, 4]], cat_idxs=[4, 5], cat_dims=[3, 3], cat_emb_dim=2), (cats,)),
        ("TabNet multitask forward", lambda: built(tab_network.TabNet, 6, [2, 3]), (x,)),
        ("TabNet forward_masks", lambda: CallWith(tabnet(), lambda m, v: m.forward_masks(v)), (x,)),
        ("TabNetPretraining forward", lambda: pretrainer(), (x,)),
        ("train TabNetPretraining forward", lambda: pretrainer(), (x,)),
        ("train TabNetPretraining categorical forward", lambda: pretrainer(cat_idxs=[4, 5], cat_dims=[3, 3], cat_emb_dim=2), (cats,)),
        ("TabNetPretraining forward_masks", lambda: CallWith(pretrainer(), lambda m, v: m.forward_masks(v)), (x,)),
        ("train RandomObfuscator forward", lambda: tab_network.RandomObfuscator(0.2, torch.eye(6)), (x,)),
        ("GBN forward", lambda: tab_network.GBN(6, virtual_batch_size=8), (x,)),
        ("train GBN forward", lambda: tab_network.GBN(6, virtual_batch_size=8), (x,)),
        ("Sparsemax forward", lambda: sparsemax.Sparsemax(dim=-1), (x,)),
        ("train Sparsemax forward", lambda: sparsemax.Sparsemax(dim=-1), (x.clone().requires_grad_(),)),
        ("Entmax15 forward", lambda: sparsemax.Entmax15(dim=-1), (x,)),
        ("train Entmax15 forward", lambda: sparsemax.Entmax15(dim=-1), (x.clone().requires_grad_(),)),
        ("Entmoid15", lambda: CallWith(None, lambda _m, v: sparsemax.Entmoid15.apply(v)), (x,)),
        ("UnsupervisedLoss", lambda: UnsupervisedLoss, (torch.randn(16, 6), torch.randn(16, 6), (torch.rand(16, 6) > 0.5).float())),
        ("RegressionSMOTE", lambda: CallWith(RegressionSMOTE(device_name="cpu"), lambda m, a, b: m(a, b)), (x, torch.randn(16, 1))),
        ("ClassificationSMOTE", lambda: CallWith(ClassificationSMOTE(device_name="cpu"), lambda m, a, b: m(a, b)), (x, torch.randint(0, 3, (16,)))),
    ]  # fmt: skip
    return runs


if __name__ == "__main__":
    probe_main(t_runs, PACKAGES, "precision_untuned12_probes.py", sys.argv)
