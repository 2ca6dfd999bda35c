"""Which form keeps kornia SIFT's pad-to-`num_feats` test in one graph and equal to eager (xfn22, issue 10).

`ScaleSpaceDetector._detect` sums the octaves' results, each octave's top-K of
`min(num_feats, its candidates)` (the candidates a `nonzero`, kept in the graph by FL106's fix: an
unbacked size), and pads up to `num_feats` when the sum is short:

    n_candidates = responses.size(1)
    if n_candidates < num_feats:
        pad = num_feats - n_candidates
        responses = F.pad(responses, (0, pad), value=float("-inf"))
    responses, idxs = torch.topk(responses, k=num_feats, dim=1)

Each case below is that shape on two "octaves" whose candidates come from a custom op with an
unbacked-size fake (FL106's fix's shape), compiled with a recording backend (`dynamic=False`) and
run on inputs whose summed count is below, at and above `num_feats` (and 0). Printed per case: the
graphs dynamo made (1 = no break) and, per input, whether the compiled output equals eager's
(`=`), differs (`DIFF`) or raises (the error's type).

    PYTHONPATH=$PWD PROJECT_VENV/bin/python bench/xfn22_pad_probes.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true

NUM_FEATS = 6


@torch.library.custom_op("xfn22_probe::nz", mutates_args=())
def nz(m: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(m).contiguous()


@nz.register_fake
def _nz_fake(m):
    size = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(size >= 0)
    return m.new_empty((size, m.dim()), dtype=torch.long)


def octave(resp: torch.Tensor) -> torch.Tensor:
    """One octave's best `min(NUM_FEATS, candidates)` responses, (1, k), as fixed SIFT computes them."""
    idx = nz(resp > 0)[:, 0]
    k = min(NUM_FEATS, idx.shape[0])
    if guard_or_true(k > 0):  # fix12's guard of SIFT's `if k_eff > 0`
        best, _ = torch.topk(resp[idx], k=k)
    else:
        best = resp[:0]
    return best.unsqueeze(0)


def joined(a, b):
    return torch.cat([octave(a), octave(b)], 1)


def original(a, b):
    responses = joined(a, b)
    n = responses.size(1)
    if n < NUM_FEATS:
        responses = F.pad(responses, (0, NUM_FEATS - n), value=float("-inf"))
    return torch.topk(responses, k=NUM_FEATS, dim=1)[0]


def pad_guard_or_true(a, b):  # "within the limit": always pads, a negative pad crops
    responses = joined(a, b)
    n = responses.size(1)
    if guard_or_true(n < NUM_FEATS):
        responses = F.pad(responses, (0, NUM_FEATS - n), value=float("-inf"))
    return torch.topk(responses, k=NUM_FEATS, dim=1)[0]


def pad_guard_or_false(a, b):  # never pads: a top-K of NUM_FEATS needs that many
    responses = joined(a, b)
    n = responses.size(1)
    if guard_or_false(n < NUM_FEATS):
        responses = F.pad(responses, (0, NUM_FEATS - n), value=float("-inf"))
    return torch.topk(responses, k=NUM_FEATS, dim=1)[0]


def pad_sym_max(a, b):  # pad by max(NUM_FEATS - n, 0), no test
    responses = joined(a, b)
    n = responses.size(1)
    responses = F.pad(responses, (0, torch.sym_max(NUM_FEATS - n, 0)), value=float("-inf"))
    return torch.topk(responses, k=NUM_FEATS, dim=1)[0]


def pad_always(a, b):  # pad by NUM_FEATS, no test: at least NUM_FEATS columns for every count
    responses = F.pad(joined(a, b), (0, NUM_FEATS), value=float("-inf"))
    return torch.topk(responses, k=NUM_FEATS, dim=1)[0]


def inputs():
    """(label, a, b): summed candidates 0, 3 (below), 6 (at), 9 and 12 (above NUM_FEATS)."""
    found = []
    for label, na, nb in (("0", 0, 0), ("3", 2, 1), ("6", 3, 3), ("9", 5, 4), ("12", 6, 6)):
        g = torch.Generator().manual_seed(na * 10 + nb)
        a, b = -torch.rand(20, generator=g), -torch.rand(20, generator=g)
        a[:na] = torch.rand(na, generator=g) + 0.1
        b[:nb] = torch.rand(nb, generator=g) + 0.1
        found.append((label, a, b))
    return found


def run(fn) -> str:
    torch._dynamo.reset()
    graphs = []

    def record(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(fn, backend=record, dynamic=False)
    verdicts = []
    for label, a, b in inputs():
        ref = original(a, b)  # eager, the code as written
        try:
            out = compiled(a, b)
            verdict = "=" if torch.equal(out, ref) else "DIFF"
        except Exception as exc:  # noqa: BLE001 - the probe reports what failed
            verdict = type(exc).__name__
        verdicts.append(f"n={label}: {verdict}")
    return f"graphs {len(graphs)}; " + ", ".join(verdicts)


def main() -> None:
    for fn in (original, pad_guard_or_true, pad_guard_or_false, pad_sym_max, pad_always):
        print(f"{fn.__name__:20s} {run(fn)}")


if __name__ == "__main__":
    main()
