"""Dynamo checks behind bench/results/precision_untuned5.md (FL1 precision and recall on
nflows 0.14 and vector-quantize-pytorch 1.32.0, torch 2.13 CPU).

Each run compiles real package code (both packages are pure Python) with random weights, tiny
sizes, seeded. nflows' flows are `Distribution`s whose `forward` is not the call users make: they
compile `flow.log_prob` (training and density evaluation) and `flow.sample`, so those are the runs,
beside the transforms' own `forward` / `inverse`. The quantizers' `forward` is the call, in training
(codebook EMA, k-means init, dead-code expiry, quantizer dropout) and in inference. Break sites come
from dynamo's `graph_breaks` log (bench/break_probe.py); pattern copies show what dynamo does on a
flagged line that no run reaches.

    PYTHONPATH=$PWD python bench/precision_untuned5_probes.py [--only pmnv] [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned5_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import torch
from break_probe import compile_run as _compile_run
from break_probe import listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("nflows", "vector_quantize_pytorch")


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, PACKAGES, "precision_untuned5_probes.py")


# ---- pattern copies ---------------------------------------------------------------------------


def buffer_flag_copy(x, flag):
    """vector_quantize_pytorch.py:454 `if self.initted:` on a bool buffer (here an argument)."""
    if flag:
        return x * 2
    return x + 1


def rand_int_copy(x, max_size: int):
    """residual_vq.py:102 `torch.randint(0, n, ()).item()` that picks a quantizer dropout index."""
    rand_int = torch.randint(0, max_size, (), device=x.device)
    return x[: rand_int.item() + 1] * 2


def nonzero_copy(mask, x):
    """vector_quantize_pytorch.py:571 `mask.nonzero(as_tuple = True)[0]` on the dead-code mask."""
    dead = mask.nonzero(as_tuple=True)[0]
    return x[dead] * 2


class TopkArgument(nn.Module):
    """vector_quantize_pytorch.py:1133 `min(int(topk), n)` where `topk` is an int argument
    (FL101 flags the line; `fuselint check --select FL1` on this file flags it too)."""

    def forward(self, x, topk=None):
        if topk is not None:
            topk = min(int(topk), 4)
            return x.topk(topk, dim=-1).values
        return x


# ---- the in-scope misses and the false FL107 of precision_untuned5.md, as minimal modules ----------
# `fuselint check --select FL1 bench/precision_untuned5_probes.py` flags none of the lines marked
# "(missed)" and flags the line marked "(flagged)".


class MissRandomDraw(nn.Module):
    """residual_vq.py:442/479: a Python `random` draw, compared in an `if`."""

    def forward(self, x):
        index = random.Random(1).randrange(0, 3)
        for i in range(3):
            if i > index:  # FL102 (missed)
                x = x + 1
        return x


class MissMaskArgument(nn.Module):
    """vector_quantize_pytorch.py:1364 `commit_loss[loss_mask]`, the mask a forward argument."""

    def forward(self, x, mask):
        loss = (x * 2) ** 2
        return loss[mask].mean()  # FL106 (missed)


class MissBufferDataAssigned(nn.Module):
    """normalization.py:175: a bool buffer whose `.data` another method assigns."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("initialized", torch.tensor(False))

    def forward(self, x):
        if self.training and not self.initialized:  # FL102 (missed)
            self._initialize(x)
        return x * 2

    def _initialize(self, x):
        self.initialized.data = torch.tensor(True)


class MissNumpySize(nn.Module):
    """autoregressive.py:43-46 `for _ in range(np.prod(inputs.shape[1:]))`."""

    def forward(self, x):
        n = np.prod(x.shape[1:])
        out = torch.zeros_like(x)
        for _ in range(n):  # (missed)
            out = out + x
        return out


class FalseStaticZip(nn.Module):
    """orthogonal.py:81: a loop over the rows of a parameter with a fixed row count."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Parameter(torch.randn(2, 4))

    def forward(self, x):
        for q, n in zip(self.q, self.q.norm(dim=-1), strict=True):  # FL107 (flagged)
            x = x - (x @ q)[:, None] * q / n
        return x


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> tuple[str, list[str]]:
    """`break_probe.compile_run` with this file's sites named by `_user`."""
    return _compile_run(label, fn, args, breaks, _user, kwargs)


def probe_runs() -> list:
    x = torch.rand(4, 3)
    return [
        ("probe buffer_flag_copy (vq 454)", buffer_flag_copy, (x, torch.tensor(True))),
        ("probe rand_int_copy (residual_vq 102 and 3 twins)", rand_int_copy, (x, 3)),
        ("probe nonzero_copy (vq 571)", nonzero_copy, (x[:, 0] > 0.5, x)),
        ("probe TopkArgument, topk=3 (vq 1133)", TopkArgument(), (x,), {"topk": 3}),
    ]


# ---- nflows -------------------------------------------------------------------------------------


def miss_runs() -> list:
    x = torch.rand(4, 3)
    return [
        ("miss random draw in an if (residual_vq 479 and 3 twins)", MissRandomDraw(), (x,)),
        ("miss mask argument (vq 1364)", MissMaskArgument(), (x, x > 0.5)),
        ("train miss buffer .data assigned (normalization 175)", MissBufferDataAssigned(), (x,)),
        ("miss np.prod of a shape as a range (autoregressive 46)", MissNumpySize(), (x,)),
        ("false FL107 zip over a parameter's 2 rows (orthogonal 81)", FalseStaticZip(), (x.T.contiguous(),)),
    ]


def n_runs() -> list:
    from nflows import distributions, flows, transforms
    from nflows.nn import nets

    torch.manual_seed(0)
    d = 4
    x = torch.randn(8, d)

    def coupling_net(i, o):
        return nets.ResidualNet(i, o, hidden_features=8, num_blocks=1)

    mask = torch.tensor([1, 0, 1, 0])
    maf = flows.MaskedAutoregressiveFlow(d, hidden_features=8, num_layers=2, num_blocks_per_layer=1)
    realnvp = flows.SimpleRealNVP(d, hidden_features=8, num_layers=2, num_blocks_per_layer=1)
    rq_maf = transforms.MaskedPiecewiseRationalQuadraticAutoregressiveTransform(
        features=d, hidden_features=8, num_bins=4, tails="linear", tail_bound=3.0
    )
    rq_coupling = transforms.PiecewiseRationalQuadraticCouplingTransform(
        mask, coupling_net, num_bins=4, tails="linear", tail_bound=3.0
    )
    nsf = flows.Flow(
        transforms.CompositeTransform(
            [
                transforms.ActNorm(d),
                transforms.PiecewiseRationalQuadraticCouplingTransform(
                    mask, coupling_net, num_bins=4, tails="linear", tail_bound=3.0
                ),
                transforms.LULinear(d),
                transforms.ReversePermutation(d),
            ]
        ),
        distributions.StandardNormal([d]),
    )
    quad = transforms.MaskedPiecewiseQuadraticAutoregressiveTransform(
        features=d, hidden_features=8, num_bins=4, tails="linear", tail_bound=3.0
    )
    cubic = transforms.PiecewiseCubicCouplingTransform(mask, coupling_net, num_bins=4, tails="linear",
                                                       tail_bound=3.0)  # fmt: skip
    linear_cdf = transforms.PiecewiseLinearCouplingTransform(mask, coupling_net, num_bins=4)
    linear_tails = transforms.PiecewiseLinearCDF([d], tails="linear", tail_bound=2.0)
    cdf = transforms.CompositeCDFTransform(
        transforms.Sigmoid(), transforms.PiecewiseRationalQuadraticCDF([d])
    )
    unit = torch.rand(8, d)
    mog = flows.Flow(
        transforms.CompositeTransform(
            [transforms.SVDLinear(d, num_householder=2), transforms.QRLinear(d, 2)]
        ),
        distributions.ConditionalDiagonalNormal([d], context_encoder=nn.Linear(3, 2 * d)),
    )
    ctx = torch.randn(8, 3)
    actnorm = transforms.ActNorm(d)
    return [
        ("MAF (MaskedAutoregressiveFlow) log_prob", maf.log_prob, (x,)),
        ("MAF sample(16)", maf.sample, (16,)),
        ("RealNVP (SimpleRealNVP) log_prob", realnvp.log_prob, (x,)),
        ("RealNVP sample(16)", realnvp.sample, (16,)),
        ("rational-quadratic MAF transform forward", rq_maf, (x,)),
        ("rational-quadratic MAF transform inverse", rq_maf.inverse, (x,)),
        ("rational-quadratic coupling forward", rq_coupling, (x,)),
        ("rational-quadratic coupling inverse", rq_coupling.inverse, (x,)),
        ("train NSF (ActNorm, RQ coupling, LU, permutation) log_prob", nsf.log_prob, (x,)),
        ("NSF sample(16) (eval, after the train step)", nsf.sample, (16,)),
        ("quadratic MAF transform forward", quad, (x,)),
        ("cubic coupling forward", cubic, (x,)),
        ("linear coupling forward (inputs in [0, 1])", linear_cdf, (unit,)),
        ("CompositeCDFTransform(Sigmoid, RQ CDF) forward", cdf, (x,)),
        ("conditional flow (SVD, QR, ConditionalDiagonalNormal) log_prob", mog.log_prob, (x, ctx)),
        ("conditional flow sample(5, context)", mog.sample, (5, ctx)),
        ("train ActNorm forward (first call, data init)", actnorm, (x,)),
        ("Tanh inverse", transforms.Tanh().inverse, (unit * 0.5,)),
        ("LogTanh forward (inputs in [-3, 3])", transforms.LogTanh(cut_point=1), (x.clamp(-3, 3),)),
        ("LogTanh inverse", transforms.LogTanh(cut_point=1).inverse, (x.clamp(-3, 3),)),
        (
            "PiecewiseLinearCDF(tails='linear') forward",
            transforms.PiecewiseLinearCDF([d], tails="linear", tail_bound=2.0),
            (x,),
        ),
        ("PiecewiseLinearCDF(tails='linear') inverse", linear_tails.inverse, (x,)),
        ("train BatchNorm transform forward", transforms.BatchNorm(d), (x,)),
        ("CauchyCDF inverse", transforms.nonlinearities.CauchyCDF().inverse, (unit,)),
    ]


# ---- vector-quantize-pytorch --------------------------------------------------------------------


def v_runs() -> list:
    import vector_quantize_pytorch as vq

    torch.manual_seed(0)
    x = torch.randn(2, 16, 8)
    img = torch.randn(1, 8, 4, 4)
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 10:] = False
    plain = vq.VectorQuantize(dim=8, codebook_size=32)
    kmeans = vq.VectorQuantize(dim=8, codebook_size=16, kmeans_init=True, kmeans_iters=2)
    dead = vq.VectorQuantize(dim=8, codebook_size=64, threshold_ema_dead_code=2)
    cos = vq.VectorQuantize(dim=8, codebook_size=32, use_cosine_sim=True, orthogonal_reg_weight=0.1,
                            codebook_dim=4, heads=2, separate_codebook_per_head=True)  # fmt: skip
    rvq = vq.ResidualVQ(dim=8, num_quantizers=4, codebook_size=32, quantize_dropout=True)
    fsq = vq.FSQ(levels=[8, 5, 5], dim=8)
    rfsq = vq.ResidualFSQ(dim=8, levels=[8, 5, 5], num_quantizers=3, quantize_dropout=True)
    lfq = vq.LFQ(dim=8, codebook_size=256, entropy_loss_weight=0.1)
    rlfq = vq.ResidualLFQ(dim=8, codebook_size=256, num_quantizers=3, quantize_dropout=True)
    latent = vq.LatentQuantize(
        levels=[5, 5, 5], dim=8, commitment_loss_weight=0.1, quantization_loss_weight=0.1
    )
    active = vq.VectorQuantize(
        dim=8, codebook_size=32, orthogonal_reg_weight=0.1, orthogonal_reg_active_codes_only=True
    )
    kmeans64 = vq.VectorQuantize(dim=8, codebook_size=64, kmeans_init=True, kmeans_iters=2)
    sim = vq.SimVQ(dim=8, codebook_size=32)
    rsim = vq.ResidualSimVQ(dim=8, num_quantizers=3, codebook_size=32, quantize_dropout=True)
    grvq = vq.GroupedResidualVQ(dim=8, num_quantizers=2, groups=2, codebook_size=32)
    rpq = vq.RandomProjectionQuantizer(dim=8, num_codebooks=2, codebook_dim=4, codebook_size=32)
    return [
        ("VectorQuantize eval", plain, (x,)),
        ("train VectorQuantize (EMA update)", plain, (x,)),
        ("train VectorQuantize, mask", plain, (x,), {"mask": mask}),
        ("train VectorQuantize kmeans_init (first call)", kmeans, (x,)),
        ("train VectorQuantize threshold_ema_dead_code=2", dead, (x,)),
        ("train VectorQuantize cosine, orthogonal_reg, 2 heads", cos, (x,)),
        ("VectorQuantize on an image (1, 8, 4, 4), eval", vq.VectorQuantize(dim=8, codebook_size=32,
                                                                          accept_image_fmap=True), (img,)),
        ("ResidualVQ eval", rvq, (x,)),
        ("train ResidualVQ quantize_dropout", rvq, (x,)),
        ("train ResidualVQ quantize_dropout, fixed seed 1", rvq, (x,), {"rand_quantize_dropout_fixed_seed": 1}),
        ("FSQ eval", fsq, (x,)),
        ("train ResidualFSQ quantize_dropout", rfsq, (x,)),
        ("LFQ eval", lfq, (x,)),
        ("train LFQ (entropy loss)", lfq, (x,)),
        ("train ResidualLFQ quantize_dropout", rlfq, (x,)),
        ("train LatentQuantize (channels first)", latent, (x.transpose(1, 2),)),
        ("LatentQuantize eval", latent, (x.transpose(1, 2),)),
        ("train VectorQuantize kmeans_init, 32 vectors for 64 codes", kmeans64, (x,)),
        ("VectorQuantize eval, topk=3 (an int)", plain, (x,), {"topk": 3}),
        ("train VectorQuantize orthogonal_reg_active_codes_only", active, (x,)),
        ("train VectorQuantize dead codes, 4 vectors for 64 codes", dead, (x[:1, :4],)),
        ("SimVQ eval", sim, (x,)),
        ("train ResidualSimVQ quantize_dropout", rsim, (x,)),
        ("GroupedResidualVQ eval", grvq, (x,)),
        ("RandomProjectionQuantizer eval", rpq, (x,)),
    ]  # fmt: skip


def dead_code_nonzero_calls() -> str:
    """How often eager runs vector_quantize_pytorch.py:571 (`nonzero`, taken only when more codes
    are dead than there are vectors) in one training step of a dead-code config, by line tracing."""
    import vector_quantize_pytorch as vq

    counts = []
    for vectors in (4, 128):
        torch.manual_seed(0)
        model = vq.VectorQuantize(dim=8, codebook_size=64, threshold_ema_dead_code=2).train()
        hits: list[int] = []

        def tracer(frame, event, _arg, hits=hits):
            name = frame.f_code.co_filename
            if event == "line" and frame.f_lineno == 571 and name.endswith("vector_quantize_pytorch.py"):
                hits.append(1)
            return tracer

        sys.settrace(tracer)
        try:
            model(torch.randn(1, vectors, 8))
        finally:
            sys.settrace(None)
        counts.append(f"{vectors} vectors for 64 codes: line 571 ran {len(hits)} time(s)")
    return "; ".join(counts)


def latent_in_place_path() -> str:
    """Can a LatentQuantize training step reach latent_quantization.py:266-274 (the in-place
    codebook optimizer branch)? Its guard (264) reads `self.optimize_values`; run it eagerly."""
    import vector_quantize_pytorch as vq

    results = []
    for optimize_values in (True, False):
        model = vq.LatentQuantize(
            levels=[5, 5, 5],
            dim=8,
            optimize_values=optimize_values,
            in_place_codebook_optimizer=torch.optim.SGD,
        ).train()
        try:
            model(torch.randn(2, 8, 16))
            results.append(f"optimize_values={optimize_values}: runs")
        except Exception as exc:
            results.append(f"optimize_values={optimize_values}: {type(exc).__name__}: {exc}")
    return "; ".join(results)


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else "pmnv"
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    runs: list = []
    if "p" in only:
        runs += probe_runs()
    if "m" in only:
        runs += miss_runs()
    if "n" in only:
        runs += n_runs()
    if "v" in only:
        runs += v_runs()
    records = probe_rows(runs, compile_run, PACKAGES, breaks)
    if "v" in only:
        print(f"\nvector_quantize_pytorch.py:571 in eager: {dead_code_nonzero_calls()}")
        print(f"latent_quantization.py in-place optimizer branch, eager: {latent_in_place_path()}")
    write_sites(out, records)


if __name__ == "__main__":
    main()
