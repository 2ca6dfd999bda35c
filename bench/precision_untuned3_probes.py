"""Dynamo checks behind bench/results/precision_untuned3.md (FL1 precision and recall on
x-transformers 2.31.10 and e3nn 0.6.0, torch 2.13 CPU).

Each check compiles real package code (the installed packages: both are pure Python) or, where the
flagged line sits in a training-only or optional-dependency path that is costly to build, a tiny copy
of the flagged pattern. Break sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned3_probes.py [--only p|c|x|e]
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys

import torch
from break_probe import compile_row, listen, package_site
from torch import nn


def _user(path: str) -> str | None:
    """A break at a package line (named from the package folder down) or a probe's own line."""
    return package_site(path, ("x_transformers", "e3nn"), "precision_untuned3_probes.py")


# ---- pattern copies ---------------------------------------------------------------------------


def detach_requires_grad(p, grad):
    """xl_autoregressive_wrapper.py:512-515 `tgt = tgt - lr * grad; tgt = tgt.detach().requires_grad_()`."""
    p = p - 0.1 * grad
    p = p.detach().requires_grad_()
    return p * 2


class FrozenCopy(nn.Module):
    """next_latent_wrapper.py:324-326 `frozen = deepcopy(self.head); for p in ...: p.requires_grad_(False)`."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 4)

    def forward(self, x):
        frozen = copy.deepcopy(self.head)
        for p in frozen.parameters():
            p.requires_grad_(False)
        return frozen(x) * 2


class Gru(nn.Module):
    """next_latent_wrapper.py:112 `out, _ = self.gru(next_embeds, first_hidden)`."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 4)

    def forward(self, x, h):
        x = x * 2
        out, _ = self.gru(x, h)
        return out + 1


def early_exit(x, threshold=0.5):
    """x_transformers.py:4499-4516 `should_early_exit = cum_exit_prob >= t; if looped and should_early_exit: break`."""
    cum = torch.zeros(())
    for _ in range(3):
        x = x * 2
        cum = cum + x.sigmoid().mean()
        should_early_exit = cum >= threshold
        if should_early_exit:
            break
    return x


class StepItem(nn.Module):
    """up_wrapper.py:235-239 `self.step.add_(1); if every > 0 and divisible_by(self.step.item(), every):`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("step", torch.tensor(0))

    def forward(self, x):
        self.step.add_(1)
        if (self.step.item() % 2) == 0:
            x = x + 1
        return x * 2


def zip_grads(params, x):
    """xl_autoregressive_wrapper.py:490-512: `grads = torch.autograd.grad(...)` is a tuple; `zip(.., wrapper_grads)`."""
    grads = tuple(p * x.sum() for p in params)  # a tuple of tensors, as autograd.grad returns
    wrapper_grads = grads[0:2]
    new = {}
    for (name, p), grad in zip(enumerate(params), wrapper_grads, strict=False):
        new[name] = p - 0.1 * grad
    return new


def generate_range(x, length):
    """up_wrapper.py:99-115 `@torch.compile def generate(self, length, ...): for _ in range(length):`."""
    for _ in range(length):
        x = x * 2
    return x


def split_tolist(seq, lengths):
    """entropy_based_tokenizer.py:213-215 `lengths = lengths[lengths > 0]; seq.split(lengths.tolist())`."""
    return [t * 2 for t in seq.split(lengths.tolist())]


def bool_mask_index(loss, target, ignore_index=0):
    """autoregressive_wrapper.py:686-691, gpt_lejepa.py:292, next_latent_wrapper.py:394: `x[mask]`."""
    mask = target != ignore_index
    return loss[mask].mean()


def cond_on_list(mems):
    """x_transformers.py:3441, 3653: `mems = mems.copy() if exists(mems) else [None] * n; mems.pop(0) if mems`."""
    mems = mems.copy() if mems is not None else [None] * 2
    out = []
    for _ in range(2):
        layer_mem = mems.pop(0) if mems else None
        out.append(layer_mem)
    return out


# ---- the false-positive classes of precision_untuned3.md, as minimal modules ----------------------
# `fuselint check --select FL1 bench/precision_untuned3_probes.py` flags each marked line; each module
# compiles to one graph (ClassFF: the one break is on `torch.autograd.grad`, not on the zip).


class ClassFAAlibi(nn.Module):
    """FA: `forward(self, i, j)` gets ints (x_transformers.py:685-692)."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = None

    def forward(self, i, j):
        if self.bias is not None and self.bias.shape[-1] >= j:  # FL102 (false)
            return self.bias[..., -i:, -j:]
        q = torch.arange(j - i, j)  # FL101 (false)
        k = torch.arange(j)  # FL101 (false)
        return q[:, None] - k


class ClassFA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rel_pos = ClassFAAlibi()

    def forward(self, q, k):
        i, j = q.shape[-2], k.shape[-2]
        return self.rel_pos(i, j) + q @ k.transpose(-1, -2)


class ClassFB(nn.Module):
    """FB: a keyword defaulting to None, set to an int, added to a shape (x_transformers.py:3403-3465)."""

    def forward(self, x, seq_pos_offset=None, cache=None):
        if seq_pos_offset is None:
            seq_pos_offset = cache.cache_length if cache is not None else 0
        return x + torch.arange(x.shape[1] + seq_pos_offset)  # FL101 (false)


class ClassFC(nn.Module):
    """FC: starred shape unpacking (continuous.py:159-165)."""

    def forward(self, x, mask=None):
        _batch, seq, _orig_mask, device = *x.shape[:2], mask, x.device
        return x + torch.arange(seq, device=device)  # FL101 (false)


class ClassFD(nn.Module):
    """FD: truthiness of a list of tensors (x_transformers.py:3441, 3653)."""

    def forward(self, x, mems=None):
        mems = mems.copy() if mems is not None else [None] * 2
        for _ in range(2):
            layer_mem = mems.pop(0) if mems else None  # FL102 (false)
            if layer_mem is not None:
                x = x + layer_mem
        return x


def class_fe_rand_angles(*shape, requires_grad=False, dtype=None, device=None):
    alpha, gamma = 2 * math.pi * torch.rand(2, *shape, dtype=dtype, device=device)
    alpha = alpha.detach().requires_grad_(requires_grad)  # FL105 (false)
    return alpha, gamma


class ClassFE(nn.Module):
    """FE: `requires_grad_(flag)`, flag defaulting to False and not passed (e3nn/o3/_rotation.py:67-71)."""

    def forward(self, x):
        a, _g = class_fe_rand_angles(dtype=x.dtype, device=x.device)
        return x * a


class ClassFF(nn.Module):
    """FF: zip over the tuple `torch.autograd.grad` returns (xl_autoregressive_wrapper.py:490-507)."""

    def forward(self, x, params):
        grads = torch.autograd.grad((x * params[0] * params[1]).sum(), params)
        wrapper_grads = grads[0:2]
        out = []
        for p, grad in zip(params, wrapper_grads, strict=True):  # FL107 (false)
            out.append(p - 0.1 * grad)
        return out


class ClassFG(nn.Module):
    """FG: an int argument of a `@torch.compile` method (up_wrapper.py:99-115)."""

    @torch.compile(backend="eager")
    def generate(self, length, seed=None):
        x = seed
        for _ in range(length):  # FL101 (false)
            x = x * 2
        return x

    def forward(self, x):
        return self.generate(8, seed=x)


# ---- runner -------------------------------------------------------------------------------------


def compile_run(label: str, fn, args, breaks, kwargs=None) -> None:
    print(compile_row(label, fn, args, breaks, _user, kwargs, grad_mode(label)), flush=True)


def grad_mode(label: str):
    """Inference runs under no_grad; a run labelled "train ..." (a training step) or "class ..." (FF
    calls torch.autograd.grad) keeps autograd on."""
    return contextlib.nullcontext() if label.startswith(("train", "class")) else torch.no_grad()


def class_runs() -> list:
    q = torch.rand(2, 4, 8)
    params = [torch.rand(3, requires_grad=True), torch.rand(3, requires_grad=True)]
    return [
        ("class FA (int i, j)", ClassFA(), (q, q)),
        ("class FB (offset keyword)", ClassFB(), (torch.rand(2, 5),)),
        ("class FC (starred shape)", ClassFC(), (torch.rand(2, 5),)),
        (
            "class FD (list truthiness)",
            ClassFD(),
            (torch.rand(2, 5), [torch.rand(2, 5), torch.rand(2, 5)]),
        ),
        ("class FE (requires_grad_ flag)", ClassFE(), (torch.rand(3),)),
        ("class FF (zip over grads)", ClassFF(), (torch.rand(3), params)),
        ("class FG (compiled int argument)", ClassFG(), (torch.rand(3),)),
    ]


def probe_runs() -> list:
    p = nn.Parameter(torch.rand(3))
    return [
        ("probe detach_requires_grad (xl_ar 515)", detach_requires_grad, (p, torch.rand(3))),
        ("train probe detach_requires_grad (xl_ar 515)", detach_requires_grad, (p, torch.rand(3))),
        ("probe FrozenCopy (next_latent 324, 326)", FrozenCopy(), (torch.rand(2, 4),)),
        ("probe Gru (next_latent 112)", Gru(), (torch.rand(3, 1, 4), torch.rand(1, 1, 4))),
        ("probe early_exit (x_transformers 4515)", early_exit, (torch.rand(4),)),
        ("probe StepItem (up_wrapper 239)", StepItem(), (torch.rand(2),)),
        ("probe zip_grads (xl_ar 507)", zip_grads, ([torch.rand(3), torch.rand(3)], torch.rand(3))),
        ("probe generate_range (up_wrapper 115)", generate_range, (torch.rand(3), 4)),
        ("probe split_tolist (entropy_based_tokenizer 215)", split_tolist, (torch.rand(6), torch.tensor([2, 4]))),
        ("probe bool_mask_index (ar 691, lejepa 292/295, next_latent 394)", bool_mask_index,
         (torch.rand(2, 5), torch.randint(0, 3, (2, 5)))),
        ("probe cond_on_list (x_transformers 3653, 3654)", cond_on_list, (None,)),
        ("probe cond_on_list, mems given", cond_on_list, ([torch.rand(2), torch.rand(2)],)),
    ]  # fmt: skip


def x_runs() -> list:
    from x_transformers import (
        AutoregressiveWrapper,
        ContinuousTransformerWrapper,
        Decoder,
        Encoder,
        TransformerWrapper,
        XTransformer,
    )
    from x_transformers.belief_state_wrapper import BeliefStateWrapper
    from x_transformers.continuous import ContinuousAutoregressiveWrapper
    from x_transformers.entropy_based_tokenizer import EntropyBasedTokenizer
    from x_transformers.gpt_lejepa import LatentAutoregressive
    from x_transformers.next_latent_wrapper import NextLatentWrapper
    from x_transformers.nonautoregressive_wrapper import NonAutoregressiveWrapper
    from x_transformers.xval import XValAutoregressiveWrapper, XValTransformerWrapper

    def lm(**attn):
        net = TransformerWrapper(
            num_tokens=64, max_seq_len=32, attn_layers=Decoder(dim=32, depth=2, heads=2, **attn)
        )
        return net.eval()

    tokens = torch.randint(0, 64, (2, 16))
    runs = [
        ("Decoder, absolute pos (default)", lm(), (tokens,)),
        ("Decoder, rotary_pos_emb", lm(rotary_pos_emb=True), (tokens,)),
        ("Decoder, rotary, attn_flash", lm(rotary_pos_emb=True, attn_flash=True), (tokens,)),
        ("Decoder, alibi_pos_bias", lm(alibi_pos_bias=True), (tokens,)),
        ("Decoder, rel_pos_bias (T5)", lm(rel_pos_bias=True), (tokens,)),
        ("Decoder, dynamic_pos_bias", lm(dynamic_pos_bias=True), (tokens,)),
        ("Decoder, polar_pos_emb", lm(polar_pos_emb=True), (tokens,)),
        ("Decoder, rotary, seq_start_pos (left pad)", lm(rotary_pos_emb=True), (tokens,),
         {"seq_start_pos": torch.tensor([0, 3])}),
    ]  # fmt: skip
    looped = TransformerWrapper(
        num_tokens=64,
        max_seq_len=32,
        looped=True,
        attn_layers=Decoder(dim=32, depth=2, heads=2, pre_and_post_norm=True),
    ).eval()
    runs.append(("TransformerWrapper(looped=True), looped_inference, 1 token", looped,
                 (torch.randint(0, 64, (1, 1)),), {"looped_inference": True}))  # fmt: skip
    mem = TransformerWrapper(
        num_tokens=64, max_seq_len=32, num_memory_tokens=4, attn_layers=Encoder(dim=32, depth=2, heads=2)
    ).eval()
    runs.append(("Encoder, num_memory_tokens=4, mask", mem, (tokens,), {"mask": torch.ones(2, 16).bool()}))
    xl = lm(rotary_pos_emb=True)
    runs.append(("Decoder, rotary, mems (Transformer-XL)", xl, (tokens,),
                 {"mems": [torch.rand(2, 4, 32), torch.rand(2, 4, 32)]}))  # fmt: skip
    xt = XTransformer(
        dim=32, enc_num_tokens=64, enc_depth=1, enc_heads=2, enc_max_seq_len=32,
        dec_num_tokens=64, dec_depth=1, dec_heads=2, dec_max_seq_len=32, tie_token_emb=True,
    ).eval()  # fmt: skip
    runs.append(
        ("XTransformer (enc-dec), src_mask", xt, (tokens, tokens), {"mask": torch.ones(2, 16).bool()})
    )
    cont = ContinuousTransformerWrapper(
        dim_in=8, dim_out=8, max_seq_len=32, attn_layers=Decoder(dim=32, depth=1, heads=2)
    ).eval()
    runs.append(
        ("ContinuousTransformerWrapper, lens", cont, (torch.rand(2, 16, 8),), {"lens": torch.tensor([16, 9])})
    )
    ar = AutoregressiveWrapper(lm(rotary_pos_emb=True)).train()
    runs.append(("train AutoregressiveWrapper loss", ar, (torch.randint(0, 64, (2, 17)),)))
    nar = NonAutoregressiveWrapper(
        TransformerWrapper(num_tokens=65, max_seq_len=16, logits_dim=64, attn_layers=Encoder(dim=32, depth=1, heads=2)),
        mask_id=64, use_simple_mdlm_loss_weight=False,
    ).train()  # fmt: skip
    runs.append(
        ("train NonAutoregressiveWrapper loss (mdlm weight off)", nar, (torch.randint(0, 64, (2, 16)),))
    )
    xv = XValAutoregressiveWrapper(
        XValTransformerWrapper(num_tokens=64, numerical_token_id=63, max_seq_len=32,
                               attn_layers=Decoder(dim=32, depth=1, heads=2))
    ).train()  # fmt: skip
    ids = torch.randint(0, 64, (2, 17))
    runs.append(("train XValAutoregressiveWrapper loss", xv, (ids, torch.rand(2, 17)), {"mask": ids != 0}))
    bs = BeliefStateWrapper(forward_decoder=lm()).train()
    runs.append(("train BeliefStateWrapper loss", bs, (torch.randint(0, 64, (2, 8)),)))
    car = ContinuousAutoregressiveWrapper(
        ContinuousTransformerWrapper(dim_in=8, dim_out=8, max_seq_len=32, attn_layers=Decoder(dim=32, depth=1, heads=2))
    ).train()  # fmt: skip
    runs.append(("train ContinuousAutoregressiveWrapper rollout_steps=2", car, (torch.rand(2, 16, 8),),
                 {"rollout_steps": 2}))  # fmt: skip
    nl = NextLatentWrapper(lm(), dim=32, dynamics_type="gru").train()
    runs.append(("train NextLatentWrapper(gru) loss", nl, (torch.randint(0, 64, (2, 9)),)))
    # sigreg_loss_weight > 0 raises IndexError at next_latent_wrapper.py:394 in eager too (2.31.10)
    nls = NextLatentWrapper(lm(), dim=32, dynamics_type="gru", sigreg_loss_weight=0.05).train()
    runs.append(("train NextLatentWrapper(gru, sigreg) loss", nls, (torch.randint(0, 64, (2, 9)),)))
    la = LatentAutoregressive(lm(), dim=32).train()
    runs.append(("train LatentAutoregressive (gpt_lejepa) loss", la, (torch.randint(0, 64, (2, 9)),)))
    tok = EntropyBasedTokenizer(lm(), entropy_threshold=2.5, max_token_size=4)
    runs.append(("EntropyBasedTokenizer(max_token_size=4)", tok, (tokens,)))
    tok2 = EntropyBasedTokenizer(lm(), entropy_threshold=2.5)
    runs.append(
        ("EntropyBasedTokenizer, return_segmented_seq", tok2, (tokens,), {"return_segmented_seq": True})
    )
    return runs


def e_runs() -> list:
    from e3nn import o3
    from e3nn.nn import FullyConnectedNet, Gate, S2Activation
    from e3nn.nn.models.gate_points_2101 import Network as Net2101
    from e3nn.nn.models.gate_points_2102 import Network as Net2102
    from e3nn.nn.models.v2106.gate_points_networks import SimpleNetwork

    pos = torch.rand(10, 3)
    batch = torch.tensor([0] * 5 + [1] * 5)
    common = dict(irreps_hidden="8x0e+8x0o+4x1e+4x1o", irreps_out="1x0e", irreps_node_attr="0e", layers=2,
                  max_radius=0.8, number_of_basis=5, radial_layers=1, radial_neurons=16, num_neighbors=3.0,
                  num_nodes=5.0)  # fmt: skip
    n2101 = Net2101(irreps_in=None, irreps_edge_attr="0e+1o+2e", **common).eval()
    n2102 = Net2102(irreps_in="0e", irreps_edge_attr="0e+1o+2e", **common).eval()
    n2102_nodes = Net2102(irreps_in="0e", irreps_edge_attr="0e+1o+2e", reduce_output=False, **common).eval()
    simple = SimpleNetwork(
        "1x0e", "1x0e", max_radius=0.8, num_neighbors=3.0, num_nodes=5.0, mul=4, layers=2
    ).eval()
    simple_nodes = SimpleNetwork(
        "1x0e", "1x0e", max_radius=0.8, num_neighbors=3.0, num_nodes=5.0, mul=4, layers=2, pool_nodes=False
    ).eval()
    data2102 = {"pos": pos, "batch": batch, "x": torch.rand(10, 1), "z": torch.rand(10, 1)}
    tp = o3.FullyConnectedTensorProduct("2x0e+1x1o", "1x0e+1x1o", "4x0e+2x1o")
    gate = Gate("2x0e", [torch.relu], "1x0e+1x0e", [torch.sigmoid, torch.tanh], "1x1o+1x1e")

    class TpGate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tp = o3.FullyConnectedTensorProduct("2x0e+1x1o", "1x0e+1x1o", gate.irreps_in)
            self.gate = gate
            self.fc = FullyConnectedNet([4, 8, 1], torch.relu)

        def forward(self, x, y, z):
            return self.gate(self.tp(x, y)), self.fc(z)

    s2 = S2Activation("0e+1o+2e", torch.tanh, res=12, random_rot=True)
    s2plain = S2Activation("0e+1o+2e", torch.tanh, res=12)
    return [
        ("e3nn o3.rand_angles() (S2Activation random_rot path)", lambda x: o3.rand_angles()[0] + x, (torch.rand(1),)),
        ("e3nn gate_points_2101.Network (batch)", n2101, ({"pos": pos, "batch": batch},)),
        ("e3nn gate_points_2102.Network (batch)", n2102, (data2102,)),
        ("e3nn gate_points_2102.Network (batch, reduce_output=False)", n2102_nodes, (data2102,)),
        ("e3nn v2106 SimpleNetwork (batch)", simple, ({"pos": pos, "batch": batch, "x": torch.rand(10, 1)},)),
        ("e3nn v2106 SimpleNetwork (batch, pool_nodes=False)", simple_nodes,
         ({"pos": pos, "batch": batch, "x": torch.rand(10, 1)},)),
        ("e3nn FullyConnectedTensorProduct", tp, (torch.rand(5, 5), torch.rand(5, 4))),
        ("e3nn TP -> Gate, FullyConnectedNet", TpGate(), (torch.rand(5, 5), torch.rand(5, 4), torch.rand(5, 4))),
        ("e3nn S2Activation(random_rot=True)", s2, (torch.rand(5, 9),)),
        ("e3nn S2Activation (default)", s2plain, (torch.rand(5, 9),)),
    ]  # fmt: skip


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else "pcxe"
    breaks = listen()
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, backend eager, dynamic=False, eval + no_grad unless 'train' or 'class'\n"
    )
    print("| call | graphs, ops | break sites (innermost package line) |")
    print("|---|---|---|")
    runs: list = []
    if "p" in only:
        runs += probe_runs()
    if "c" in only:
        runs += class_runs()
    if "x" in only:
        runs += x_runs()
    if "e" in only:
        # e3nn 0.6.0 modules hold `Irrep` objects whose `__len__` raises NotImplementedError; dynamo's
        # guard on a sequence length calls len() and aborts the whole compile (InternalTorchDynamoError).
        # suppress_errors lets dynamo run such a frame eagerly and go on, so the later breaks are seen.
        torch._dynamo.config.suppress_errors = "--strict" not in sys.argv
        runs += e_runs()
    for label, fn, *rest in runs:
        compile_run(label, fn, rest[0], breaks, rest[1] if len(rest) > 1 else None)


if __name__ == "__main__":
    main()
