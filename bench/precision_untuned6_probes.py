"""Dynamo checks behind bench/results/precision_untuned6.md (FL1 precision and recall on
reformer-pytorch 1.4.4, performer-pytorch 1.1.4 and torchsde 0.2.6, torch 2.13 CPU).

Each run compiles real package code (all three are pure Python) with random weights, tiny sizes,
seeded. The attention models' `forward` is the call, in eval (no_grad) and in training; their
autoregressive wrappers' `generate` is compiled too (users compile sampling loops). torchsde's
call is `sdeint` / `sdeint_adjoint` (its SDE solvers), which users compile wrapped in a function
or a module's `forward`, and the Brownian motions' `__call__`. Break sites come from dynamo's
`graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned6_probes.py [--only rpsx] [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned6_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import compile_run as _compile_run
from break_probe import listen, package_site, probe_header, probe_rows, write_sites
from torch import nn

PACKAGES = ("reformer_pytorch", "performer_pytorch", "torchsde")


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, PACKAGES, "precision_untuned6_probes.py")


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> tuple[str, list[str]]:
    """`break_probe.compile_run` with this file's sites named by `_user`."""
    return _compile_run(label, fn, args, breaks, _user, kwargs)


# ---- reformer-pytorch ---------------------------------------------------------------------------


def r_runs() -> list:
    import reformer_pytorch as rp
    from reformer_pytorch.generative_tools import TrainingWrapper, top_p

    torch.manual_seed(0)
    tokens = torch.randint(0, 32, (2, 16))
    x = torch.randn(2, 16, 16)
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 12:] = False
    small = {"num_tokens": 32, "dim": 16, "depth": 1, "max_seq_len": 16, "heads": 2,
             "dim_head": 8, "bucket_size": 4, "n_hashes": 2}  # fmt: skip
    lm = rp.ReformerLM(**small)
    causal = rp.ReformerLM(**small, causal=True)
    full = rp.ReformerLM(**small, full_attn_thres=32)
    local = rp.ReformerLM(**{**small, "heads": 4}, n_local_attn_heads=2, axial_position_emb=True,
                          axial_position_shape=(4, 4))  # fmt: skip
    pkm = rp.ReformerLM(**{**small, "depth": 2}, pkm_layers=(0,), pkm_num_keys=4,
                        use_full_attn=True, ff_glu=True, use_scale_norm=True)  # fmt: skip
    rezero = rp.ReformerLM(**small, use_rezero=True, weight_tie=True, layer_dropout=0.1,
                           fixed_position_emb=True)  # fmt: skip
    reformer = rp.Reformer(dim=16, depth=1, heads=2, dim_head=8, bucket_size=4, n_hashes=2)
    lsh = rp.LSHSelfAttention(dim=16, heads=2, bucket_size=4, n_hashes=2, causal=False)
    lsh_rot = rp.LSHSelfAttention(dim=16, heads=2, bucket_size=4, n_hashes=2, allow_duplicate_attention=False,
                                  random_rotations_per_head=True, attend_across_buckets=False,
                                  return_attn=False)  # fmt: skip
    encdec = rp.ReformerEncDec(dim=16, enc_num_tokens=32, enc_depth=1, enc_max_seq_len=16,
                               dec_num_tokens=32, dec_depth=1, dec_max_seq_len=16,
                               enc_bucket_size=4, dec_bucket_size=4, enc_n_hashes=2, dec_n_hashes=2)  # fmt: skip
    padded = rp.Autopadder(rp.ReformerLM(**small))
    wrapper = TrainingWrapper(rp.ReformerLM(**small, causal=True))
    return [
        ("ReformerLM eval", lm, (tokens,)),
        ("train ReformerLM (reversible)", lm, (tokens,)),
        ("ReformerLM eval, input_mask", lm, (tokens,), {"input_mask": mask}),
        ("train ReformerLM causal", causal, (tokens,)),
        ("ReformerLM full attention (full_attn_thres)", full, (tokens,)),
        ("ReformerLM local heads, axial position", local, (tokens,)),
        ("train ReformerLM pkm, use_full_attn, glu, scale norm", pkm, (tokens,)),
        ("train ReformerLM rezero, weight tie, layer dropout, fixed position", rezero, (tokens,)),
        ("Reformer (embeddings in) eval", reformer, (x,)),
        ("LSHSelfAttention eval", lsh, (x,)),
        ("LSHSelfAttention no duplicates, rotations per head", lsh_rot, (x,)),
        ("train ReformerEncDec (return_loss)", encdec, (tokens, tokens), {"return_loss": True}),
        ("Autopadder(ReformerLM) on 13 tokens", padded, (tokens[:, :13],)),
        ("TrainingWrapper.generate (4 tokens)", wrapper.generate, (tokens[:, :4], 4)),
        ("TrainingWrapper.generate, eos_token, top_p", wrapper.generate, (tokens[:, :4], 4),
         {"eos_token": 1, "filter_logits_fn": top_p}),
        ("ReformerEncDec.generate (4 tokens)", encdec.generate, (tokens, tokens[:, :1], 4)),
        ("Recorder(ReformerLM) eval", rp.Recorder(rp.ReformerLM(**small)), (tokens,)),
        ("LSHSelfAttention with keys (context)", lsh, (x,), {"keys": x[:, :8]}),
        ("train ReformerLM local heads", local, (tokens,)),
    ]  # fmt: skip


# ---- performer-pytorch --------------------------------------------------------------------------


def p_runs() -> list:
    import performer_pytorch as pp
    from performer_pytorch.autoregressive_wrapper import top_p

    torch.manual_seed(0)
    tokens = torch.randint(0, 32, (2, 16))
    x = torch.randn(2, 16, 16)
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 12:] = False
    small = {"num_tokens": 32, "dim": 16, "depth": 1, "max_seq_len": 16, "heads": 2, "dim_head": 8,
             "nb_features": 8}  # fmt: skip
    lm = pp.PerformerLM(**small)
    causal = pp.PerformerLM(**small, causal=True)
    rev = pp.PerformerLM(**small, reversible=True, feature_redraw_interval=1)
    local = pp.PerformerLM(**{**small, "heads": 4}, local_attn_heads=2, local_window_size=4,
                           rotary_position_emb=False, axial_position_emb=True, axial_position_shape=(4, 4))  # fmt: skip
    gen = pp.PerformerLM(**small, generalized_attention=True, ff_glu=True, use_scalenorm=True,
                         shift_tokens=True, ff_chunks=2)  # fmt: skip
    noproj = pp.PerformerLM(**small, no_projection=True, use_rezero=True, tie_embed=True)
    performer = pp.Performer(dim=16, depth=1, heads=2, dim_head=8, nb_features=8, cross_attend=True)
    ctx = torch.randn(2, 8, 16)
    encdec = pp.PerformerEncDec(dim=16, enc_num_tokens=32, enc_depth=1, enc_heads=2, enc_max_seq_len=16,
                                dec_num_tokens=32, dec_depth=1, dec_heads=2, dec_max_seq_len=16,
                                enc_nb_features=8, dec_nb_features=8)  # fmt: skip
    wrapper = pp.AutoregressiveWrapper(pp.PerformerLM(**small, causal=True))
    fast = pp.FastAttention(dim_heads=8, nb_features=8)
    q = torch.randn(2, 2, 16, 8)
    return [
        ("PerformerLM eval", lm, (tokens,)),
        ("train PerformerLM (projection redraw every 1000 calls)", lm, (tokens,)),
        ("PerformerLM eval, mask", lm, (tokens,), {"mask": mask}),
        ("PerformerLM causal eval", causal, (tokens,)),
        ("train PerformerLM reversible, redraw every call", rev, (tokens,)),
        ("PerformerLM local heads, axial position", local, (tokens,)),
        ("train PerformerLM generalized attention, glu, scalenorm, shift tokens, ff chunks", gen, (tokens,)),
        ("PerformerLM no projection, rezero, tied embedding", noproj, (tokens,)),
        ("Performer cross attention eval", performer, (x,), {"context": ctx}),
        ("train PerformerEncDec", encdec, (tokens, tokens)),
        ("AutoregressiveWrapper.generate (4 tokens)", wrapper.generate, (tokens[:, :4], 4)),
        ("FastAttention eval", fast, (q, q, q)),
        ("AutoregressiveWrapper.generate, eos_token, top_p", wrapper.generate, (tokens[:, :4], 4),
         {"eos_token": 1, "filter_logits_fn": top_p}),
        ("AutoregressiveWrapper.generate, repetition_penalty=1.2", wrapper.generate, (tokens[:, :4], 4),
         {"repetition_penalty": 1.2}),
        ("PerformerEncDec.generate (4 tokens)", encdec.generate, (tokens, tokens[:, :1], 4)),
        ("train PerformerLM causal", causal, (tokens,)),
        ("train PerformerLM local heads", local, (tokens,)),
    ]  # fmt: skip


# ---- torchsde -----------------------------------------------------------------------------------


class _SDE(nn.Module):
    """A small neural SDE: drift and diffusion are linear layers."""

    def __init__(self, noise_type: str = "diagonal", sde_type: str = "ito", brownian: int = 3) -> None:
        super().__init__()
        self.noise_type, self.sde_type = noise_type, sde_type
        self.drift = nn.Linear(3, 3)
        self.diffusion = nn.Linear(3, 3 if noise_type != "general" else 3 * brownian)
        self.brownian = brownian

    def f(self, t, y):
        return torch.tanh(self.drift(y))

    def g(self, t, y):
        out = torch.sigmoid(self.diffusion(y))
        if self.noise_type == "general":
            return out.view(y.size(0), 3, self.brownian)
        if self.noise_type == "scalar":
            return out[..., :1].expand(-1, 3).unsqueeze(-1).contiguous()
        return out


class _LogqpSDE(_SDE):
    """An SDE with a prior drift `h`, for `sdeint(..., logqp=True)`."""

    def h(self, t, y):
        return -y


class _LatentSDE(nn.Module):
    """What a user compiles: a module whose `forward` integrates an SDE."""

    def __init__(self, method: str, adjoint: bool = False) -> None:
        super().__init__()
        self.sde = _SDE(sde_type="stratonovich" if adjoint else "ito")
        self.method, self.adjoint = method, adjoint

    def forward(self, y0, ts):
        import torchsde

        solve = torchsde.sdeint_adjoint if self.adjoint else torchsde.sdeint
        extra = {"adjoint_method": "adjoint_reversible_heun"} if self.adjoint else {}
        return solve(self.sde, y0, ts, method=self.method, dt=0.25, **extra)


def s_runs() -> list:
    import torchsde

    torch.manual_seed(0)
    y0 = torch.randn(2, 3)
    ts = torch.linspace(0, 1, 3)

    def solve(sde, **kw):
        return lambda y, t: torchsde.sdeint(sde, y, t, dt=0.25, **kw)

    bm = torchsde.BrownianInterval(t0=0.0, t1=1.0, size=(2, 3), levy_area_approximation="space-time")
    tree = torchsde.BrownianTree(t0=0.0, w0=torch.zeros(2, 3), t1=1.0)
    path = torchsde.BrownianPath(t0=0.0, w0=torch.zeros(2, 3))
    return [
        ("sdeint euler (Ito, diagonal)", solve(_SDE()), (y0, ts)),
        ("sdeint milstein (Ito, diagonal)", solve(_SDE(), method="milstein"), (y0, ts)),
        ("sdeint srk (Ito, diagonal, space-time Levy area)", solve(_SDE(), method="srk"), (y0, ts)),
        ("sdeint midpoint (Stratonovich)", solve(_SDE(sde_type="stratonovich"), method="midpoint"), (y0, ts)),
        ("sdeint reversible_heun (Stratonovich)", solve(_SDE(sde_type="stratonovich"), method="reversible_heun"), (y0, ts)),
        ("sdeint euler, general noise", solve(_SDE(noise_type="general", brownian=2)), (y0, ts)),
        ("sdeint euler, scalar noise", solve(_SDE(noise_type="scalar", brownian=1)), (y0, ts)),
        ("sdeint euler, adaptive", solve(_SDE(), adaptive=True), (y0, ts)),
        ("train sdeint euler, logqp", solve(_LogqpSDE(), logqp=True), (y0, ts)),
        ("train latent SDE module (sdeint euler in forward)", _LatentSDE("euler"), (y0, ts)),
        ("train latent SDE module (sdeint_adjoint reversible_heun)", _LatentSDE("reversible_heun", adjoint=True), (y0, ts)),
        ("BrownianInterval(0.25, 0.5)", lambda a, b: bm(a, b), (0.25, 0.5)),
        ("BrownianTree(0.5)", lambda a: tree(a), (0.5,)),
        ("BrownianPath(0.5)", lambda a: path(a), (0.5,)),
    ]  # fmt: skip


# ---- what a flagged line does once the break before it is gone (not package sites: no JSON) -------


def x_runs() -> list:
    """reformer's and performer's `Deterministic` restore the RNG state (`fork_rng`, `set_rng_state`,
    reformer reversible.py:33-34, performer 46-47) in the backward of `_ReversibleFunction`. The real
    runs break first at `record_rng`'s `torch.get_rng_state()` (reformer 17, performer 30); with
    `record_rng` replaced by a plain store, the run shows whether dynamo reaches the restore."""
    import performer_pytorch as pp
    import reformer_pytorch as rp
    from performer_pytorch import reversible as p_rev
    from reformer_pytorch import reversible as r_rev

    state = torch.get_rng_state()

    def record_rng(self, *args):
        self.cpu_state = state

    r_rev.Deterministic.record_rng = record_rng
    p_rev.Deterministic.record_rng = record_rng
    torch.manual_seed(0)
    tokens = torch.randint(0, 32, (2, 16))
    reformer = rp.ReformerLM(num_tokens=32, dim=16, depth=1, max_seq_len=16, heads=2, dim_head=8,
                             bucket_size=4, n_hashes=2)  # fmt: skip
    performer = pp.PerformerLM(num_tokens=32, dim=16, depth=1, max_seq_len=16, heads=2, dim_head=8,
                               nb_features=8, reversible=True, feature_redraw_interval=None)  # fmt: skip
    return [
        ("train probe ReformerLM, record_rng without get_rng_state", reformer, (tokens,)),
        ("train probe PerformerLM reversible, record_rng without get_rng_state", performer, (tokens,)),
    ]


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else "rps"
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    runs: list = []
    if "r" in only:
        runs += r_runs()
    if "p" in only:
        runs += p_runs()
    if "s" in only:
        runs += s_runs()
    if "x" in only:
        runs += x_runs()
    records = probe_rows(
        runs, compile_run, PACKAGES, breaks, keep=lambda label: " probe " not in f" {label} "
    )
    write_sites(out, records)


if __name__ == "__main__":
    main()
