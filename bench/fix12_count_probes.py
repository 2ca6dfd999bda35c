"""What keeps a branch, a `min` or a check on an unbacked size in one graph (fix12, issue 10).

Each case is a small function whose count comes from a custom op with an unbacked-size fake (the
shape of FL106's fix); it is compiled with a recording backend (`dynamic=False`) and run on data
where the count is 10 of 20 (the "empty" cases on a tensor with no positive entry). Printed: the
graphs dynamo made (1 = no break), whether the compiled output equals eager's, and any error.

    PYTHONPATH=$PWD PROJECT_VENV/bin/python bench/fix12_count_probes.py
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true, statically_known_true


@torch.library.custom_op("fix12_probe::nz", mutates_args=())
def nz(m: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(m).contiguous()


@nz.register_fake
def _nz_fake(m):
    size = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(size >= 0)
    return m.new_empty((size, m.dim()), dtype=torch.long)


@torch.library.custom_op("fix12_probe::sel", mutates_args=())
def sel(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return x[m].contiguous()


@sel.register_fake
def _sel_fake(x, m):
    size = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(size >= 0)
    return x.new_empty((size,))


def graphs_equal_error(fn, *args):
    torch._dynamo.reset()
    graphs = []

    def record(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    try:
        out, error = torch.compile(fn, backend=record, dynamic=False)(*args), None
    except Exception as exc:  # noqa: BLE001 - the probe reports what failed
        out, error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    ref = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    pairs = zip(outs, ref if isinstance(ref, tuple) else (ref,), strict=True)
    return len(graphs), error is None and all(torch.equal(a, b) for a, b in pairs), error


def cap(x):  # kornia ALIKED: `if len(indices) > n_limit`
    i = nz(x > 0)[:, 0]
    if len(i) > 5:
        i = i[:5]
    return i * 2


def cap_guard_or_false(x):
    i = nz(x > 0)[:, 0]
    if guard_or_false(len(i) > 5):
        i = i[:5]
    return i * 2


def cap_guard_or_true(x):
    i = nz(x > 0)[:, 0]
    if guard_or_true(len(i) > 5):
        i = i[:5]
    return i * 2


def cap_statically_known_true(x):
    i = nz(x > 0)[:, 0]
    if statically_known_true(len(i) > 5):
        i = i[:5]
    return i * 2


def empty_shortcut(x):  # the descriptor matcher: `if len(match_dists) == 0: return ...`
    s = sel(x, x > 0)
    if len(s) == 0:
        return x.new_zeros(0)
    return s.sort()[0]


def empty_shortcut_guard_or_false(x):
    s = sel(x, x > 0)
    if guard_or_false(len(s) == 0):
        return x.new_zeros(0)
    return s.sort()[0]


def builtin_min_topk(x):  # SIFT: `k_eff = min(num_feats, nms_idx.shape[0])`
    i = nz(x > 0)[:, 0]
    return torch.topk(x[i], min(5, i.shape[0]))[0]


def sym_min_topk(x):
    i = nz(x > 0)[:, 0]
    return torch.topk(x[i], torch.sym_min(5, i.shape[0]))[0]


def min_then_test(x):  # SIFT: `if k_eff > 0:`
    i = nz(x > 0)[:, 0]
    k = min(5, i.shape[0])
    if k > 0:
        return torch.topk(x[i], k)[0]
    return x[:0]


def min_then_guard_or_true(x):
    i = nz(x > 0)[:, 0]
    k = min(5, i.shape[0])
    if guard_or_true(k > 0):
        return torch.topk(x[i], k)[0]
    return x[:0]


def two_counts_check(x):  # kornia NMS: `if boxes.shape[0] != scores.shape[0]: raise`
    a, b = nz(x > 0), sel(x, x > 0)
    if a.shape[0] != b.shape[0]:
        raise ValueError("mismatch")
    return a[:, 0].float() + b


def two_counts_guard_or_false(x):
    a, b = nz(x > 0), sel(x, x > 0)
    if guard_or_false(a.shape[0] != b.shape[0]):
        raise ValueError("mismatch")
    return a[:, 0].float() + b


def two_counts_torch_check(x):
    a, b = nz(x > 0), sel(x, x > 0)
    torch._check(a.shape[0] == b.shape[0])
    if a.shape[0] != b.shape[0]:
        raise ValueError("mismatch")
    return a[:, 0].float() + b


def cap_torch_cond(x):
    s = sel(x, x > 0)
    return torch.cond(s.shape[0] > 5, lambda t: t[:5].clone(), lambda t: t.clone(), (s,))


def loop_over_count(x):  # SOLD2: `for idx in range(num_segments)`
    s = sel(x, x > 0)
    total = x.new_zeros(())
    for j in range(len(s)):
        total = total + s[j]
    return total


CASES = [
    cap, cap_guard_or_false, cap_guard_or_true, cap_statically_known_true, empty_shortcut,
    empty_shortcut_guard_or_false, builtin_min_topk, sym_min_topk, min_then_test, min_then_guard_or_true,
    two_counts_check, two_counts_guard_or_false, two_counts_torch_check, cap_torch_cond, loop_over_count,
]  # fmt: skip


def main() -> None:
    x = torch.cat([torch.ones(10), -torch.ones(10)])[
        torch.randperm(20, generator=torch.Generator().manual_seed(0))
    ]
    print(f"torch {torch.__version__}; 10 of 20 entries positive (count 10 > cap 5)")
    print("| case | graphs | compiled == eager | error |\n|---|---|---|---|")
    for fn in CASES:
        graphs, equal, error = graphs_equal_error(fn, x)
        print(f"| {fn.__name__} | {graphs} | {equal} | {error or ''} |")
    empty = -torch.ones(20)
    print("\nno positive entry (count 0):\n| case | graphs | compiled == eager | error |\n|---|---|---|---|")
    for fn in (empty_shortcut_guard_or_false, min_then_guard_or_true, cap_guard_or_false):
        graphs, equal, error = graphs_equal_error(fn, empty)
        print(f"| {fn.__name__} | {graphs} | {equal} | {error or ''} |")


if __name__ == "__main__":
    main()
