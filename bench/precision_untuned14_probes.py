"""Dynamo checks behind bench/results/precision_untuned14.md (FL1 recall and precision on
pytorch-metric-learning 2.9.0, the TUNE package of judge14, chosen before any finding was read;
torch 2.13 CPU).

Each run compiles real pytorch-metric-learning code (pure Python) on random embeddings of a tiny
batch (12 x 8, four classes of three), seeded, the way a training step calls it: every loss
`loss(embeddings, labels)` (autograd on, backward on the loss), losses fed a miner's tuples,
every miner `miner(embeddings, labels)`, the reducers, regularizers and distances a loss builds,
CrossBatchMemory, SelfSupervisedLoss, MultipleLosses, and the inference helpers. Break sites
come from dynamo's `graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned14_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned14_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import CallWith, probe_main

PACKAGES = ("pytorch_metric_learning",)


def m_runs() -> list:
    from pytorch_metric_learning import distances, losses, miners, reducers, regularizers
    from pytorch_metric_learning.utils import inference

    torch.manual_seed(0)
    emb = torch.randn(12, 8)
    labels = torch.arange(4).repeat_interleave(3)
    ref = torch.randn(12, 8)
    grad = emb.clone().requires_grad_()

    def loss_run(name, build):
        return (f"train {name}", build, (grad, labels))

    def mined(loss, miner):
        return CallWith(loss, lambda m, e, y: m(e, y, miner(e, y)))

    runs = [
        loss_run("AngularLoss", lambda: losses.AngularLoss()),
        loss_run("ArcFaceLoss", lambda: losses.ArcFaceLoss(4, 8)),
        loss_run("CircleLoss", lambda: losses.CircleLoss()),
        loss_run("ContrastiveLoss", lambda: losses.ContrastiveLoss()),
        loss_run("CosFaceLoss", lambda: losses.CosFaceLoss(4, 8)),
        loss_run("DynamicSoftMarginLoss", lambda: losses.DynamicSoftMarginLoss()),
        loss_run("FastAPLoss", lambda: losses.FastAPLoss()),
        loss_run("HistogramLoss", lambda: losses.HistogramLoss(n_bins=10)),
        loss_run("InstanceLoss", lambda: losses.InstanceLoss()),
        loss_run("IntraPairVarianceLoss", lambda: losses.IntraPairVarianceLoss()),
        loss_run("LargeMarginSoftmaxLoss", lambda: losses.LargeMarginSoftmaxLoss(4, 8)),
        loss_run("GeneralizedLiftedStructureLoss", lambda: losses.GeneralizedLiftedStructureLoss()),
        loss_run("LiftedStructureLoss", lambda: losses.LiftedStructureLoss()),
        ("train ManifoldLoss", lambda: CallWith(losses.ManifoldLoss(l=8, K=4), lambda m, e: m(e)), (grad,)),
        loss_run("MarginLoss", lambda: losses.MarginLoss()),
        loss_run("MarginLoss learned beta", lambda: losses.MarginLoss(learn_beta=True, num_classes=4)),
        loss_run("MultiSimilarityLoss", lambda: losses.MultiSimilarityLoss()),
        loss_run("NPairsLoss", lambda: losses.NPairsLoss()),
        loss_run("NCALoss", lambda: losses.NCALoss()),
        loss_run("NormalizedSoftmaxLoss", lambda: losses.NormalizedSoftmaxLoss(4, 8)),
        loss_run("NTXentLoss", lambda: losses.NTXentLoss()),
        loss_run("P2SGradLoss", lambda: losses.P2SGradLoss(8, 4)),
        loss_run("PNPLoss", lambda: losses.PNPLoss()),
        loss_run("ProxyAnchorLoss", lambda: losses.ProxyAnchorLoss(4, 8)),
        loss_run("ProxyNCALoss", lambda: losses.ProxyNCALoss(4, 8)),
        loss_run("RankedListLoss", lambda: losses.RankedListLoss(margin=0.4, Tn=10)),
        loss_run("SignalToNoiseRatioContrastiveLoss", lambda: losses.SignalToNoiseRatioContrastiveLoss()),
        loss_run("SmoothAPLoss", lambda: losses.SmoothAPLoss()),
        loss_run("SoftTripleLoss", lambda: losses.SoftTripleLoss(4, 8, centers_per_class=2)),
        loss_run("SphereFaceLoss", lambda: losses.SphereFaceLoss(4, 8)),
        loss_run("SubCenterArcFaceLoss", lambda: losses.SubCenterArcFaceLoss(num_classes=4, embedding_size=8)),
        loss_run("SupConLoss", lambda: losses.SupConLoss()),
        loss_run("ThresholdConsistentMarginLoss", lambda: losses.ThresholdConsistentMarginLoss()),
        loss_run("TripletMarginLoss", lambda: losses.TripletMarginLoss()),
        loss_run("TripletMarginLoss smooth swap", lambda: losses.TripletMarginLoss(smooth_loss=True, swap=True)),
        loss_run("TupletMarginLoss", lambda: losses.TupletMarginLoss()),
        loss_run("ContrastiveLoss regularized", lambda: losses.ContrastiveLoss(embedding_regularizer=regularizers.LpRegularizer())),
        loss_run("ArcFaceLoss regular face", lambda: losses.ArcFaceLoss(4, 8, weight_regularizer=regularizers.RegularFaceRegularizer())),
        loss_run("NormalizedSoftmaxLoss center invariant", lambda: losses.NormalizedSoftmaxLoss(4, 8, weight_regularizer=regularizers.CenterInvariantRegularizer())),
        loss_run("SoftTripleLoss sparse centers", lambda: losses.SoftTripleLoss(4, 8, centers_per_class=2, weight_regularizer=regularizers.SparseCentersRegularizer(4, 2))),
        loss_run("ContrastiveLoss zero mean", lambda: losses.ContrastiveLoss(embedding_regularizer=regularizers.ZeroMeanRegularizer())),
        loss_run("TripletMarginLoss avg nonzero", lambda: losses.TripletMarginLoss(reducer=reducers.AvgNonZeroReducer())),
        loss_run("TripletMarginLoss threshold", lambda: losses.TripletMarginLoss(reducer=reducers.ThresholdReducer(low=0.01))),
        loss_run("ContrastiveLoss class weighted", lambda: losses.ContrastiveLoss(reducer=reducers.ClassWeightedReducer(torch.ones(4)))),
        loss_run("ContrastiveLoss per anchor", lambda: losses.ContrastiveLoss(reducer=reducers.PerAnchorReducer())),
        loss_run("ContrastiveLoss sum", lambda: losses.ContrastiveLoss(reducer=reducers.SumReducer())),
        loss_run("ContrastiveLoss multiple reducers", lambda: losses.ContrastiveLoss(reducer=reducers.MultipleReducers({"pos_loss": reducers.MeanReducer()}))),
        loss_run("ContrastiveLoss cosine", lambda: losses.ContrastiveLoss(distance=distances.CosineSimilarity())),
        loss_run("TripletMarginLoss SNR", lambda: losses.TripletMarginLoss(distance=distances.SNRDistance())),
        loss_run("TripletMarginLoss Lp power", lambda: losses.TripletMarginLoss(distance=distances.LpDistance(p=1, power=2))),
        loss_run("MultipleLosses", lambda: losses.MultipleLosses([losses.ContrastiveLoss(), losses.TripletMarginLoss()], weights=[1, 0.5])),
        loss_run("CrossBatchMemory", lambda: losses.CrossBatchMemory(losses.ContrastiveLoss(), 8, memory_size=24)),
        ("train CrossBatchMemory miner", lambda: losses.CrossBatchMemory(losses.ContrastiveLoss(), 8, memory_size=24, miner=miners.MultiSimilarityMiner()), (grad, labels)),
        ("train SelfSupervisedLoss", lambda: losses.SelfSupervisedLoss(losses.TripletMarginLoss()), (grad, ref)),
        ("train VICRegLoss", lambda: CallWith(losses.VICRegLoss(), lambda m, e, r: m(e, ref_emb=r)), (grad, ref)),
        ("train TripletMarginLoss ref_emb", lambda: CallWith(losses.TripletMarginLoss(), lambda m, e, y, r: m(e, y, ref_emb=r, ref_labels=y)), (grad, labels, ref)),
        ("train ContrastiveLoss + PairMarginMiner", lambda: mined(losses.ContrastiveLoss(), miners.PairMarginMiner()), (grad, labels)),
        ("train TripletMarginLoss + TripletMarginMiner", lambda: mined(losses.TripletMarginLoss(), miners.TripletMarginMiner(type_of_triplets="semihard")), (grad, labels)),
        ("train MultiSimilarityLoss + MultiSimilarityMiner", lambda: mined(losses.MultiSimilarityLoss(), miners.MultiSimilarityMiner()), (grad, labels)),
        ("train TripletMarginLoss + BatchHardMiner", lambda: mined(losses.TripletMarginLoss(), miners.BatchHardMiner()), (grad, labels)),
        ("AngularMiner", lambda: miners.AngularMiner(), (emb, labels)),
        ("BatchEasyHardMiner", lambda: miners.BatchEasyHardMiner(), (emb, labels)),
        ("BatchHardMiner", lambda: miners.BatchHardMiner(), (emb, labels)),
        ("DistanceWeightedMiner", lambda: miners.DistanceWeightedMiner(), (emb, labels)),
        ("EmbeddingsAlreadyPackagedAsTriplets", lambda: miners.EmbeddingsAlreadyPackagedAsTriplets(), (emb, labels)),
        ("HDCMiner", lambda: miners.HDCMiner(), (emb, labels)),
        ("MultiSimilarityMiner", lambda: miners.MultiSimilarityMiner(), (emb, labels)),
        ("PairMarginMiner", lambda: miners.PairMarginMiner(), (emb, labels)),
        ("TripletMarginMiner", lambda: miners.TripletMarginMiner(), (emb, labels)),
        ("TripletMarginMiner hard", lambda: miners.TripletMarginMiner(type_of_triplets="hard"), (emb, labels)),
        ("UniformHistogramMiner", lambda: miners.UniformHistogramMiner(num_bins=10, pos_per_bin=2, neg_per_bin=2), (emb, labels)),
        ("BatchedDistance", lambda: CallWith(distances.BatchedDistance(distances.LpDistance(), lambda mat, s, e: mat.sum(), batch_size=4), lambda m, e, r: m(e, r)), (emb, ref)),
        ("LpDistance", lambda: distances.LpDistance(), (emb, ref)),
        ("CosineSimilarity", lambda: distances.CosineSimilarity(), (emb, ref)),
        ("MatchFinder", lambda: CallWith(inference.MatchFinder(distances.CosineSimilarity(), threshold=0.5), lambda m, e, r: m.get_matching_pairs(e, r)), (emb, ref)),
        ("CustomKNN", lambda: CallWith(inference.CustomKNN(distances.LpDistance()), lambda m, q, r: m(q, 3, r)), (emb, ref)),
    ]  # fmt: skip
    return runs


if __name__ == "__main__":
    probe_main(m_runs, PACKAGES, "precision_untuned14_probes.py", sys.argv)
