"""Numbers behind the reasons fix_rate.py gives for UNTUNED16's sites that are left (fixes16).

1. Output shapes that follow the data: each kornia entry of the group run on its own input and on
   another of the same shape (another seeded random image; for the matcher, the second set made a
   noisy copy of the first, so that some ratios pass); the shapes of its output tensors for each.
2. A Linear on a subset of rows against the Linear on all rows, then indexed (MFConv's degree
   buckets, `lin_l(h.index_select(0, idx))`): bit-equal or not, over random subsets at its sizes.
3. SOLD2's `refine_heatmap`: the mean of a data-sized prefix of the sorted values against a masked
   sum over a static length (what a fixed-shape form would compute): bit-equal or not.

    PYTHONPATH=. python bench/untuned16_checks.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import untuned16_select as rule  # noqa: E402
from real_corpus import build  # noqa: E402

KORNIA = (
    "kn_aliked",
    "kn_disk",
    "kn_descriptor_matcher",
    "kn_sift_scale_space",
    "kn_sold2",
    "kn_sold2_detector",
    "kn_scale_space_detector",
)


def shapes(output) -> list[tuple[int, ...]]:
    import torch

    from fuselint.verify.numerics import flatten

    return [tuple(t.shape) for _, t in flatten(output) if isinstance(t, torch.Tensor)]


def output_shapes(model_name: str) -> tuple[list, list]:
    """The entry's output shapes on its own input and on another input of the same shape."""
    import torch

    model, args = build(model_name)
    model.eval()
    with torch.no_grad():
        first = shapes(model(*args))
        torch.manual_seed(2)
        if model_name == "kn_descriptor_matcher":
            other = (args[0], args[0] + 0.01 * torch.randn_like(args[0]))
        else:
            other = tuple(torch.rand_like(a) for a in args)
        second = shapes(model(*other))
    return first, second


def subset_rows(trials: int = 20) -> int:
    """How many of `trials` random row subsets give a Linear output that differs, bit for bit, from
    the all-rows output indexed (MFConv at the corpus's sizes: 20 nodes, 8 -> 16)."""
    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 16)
    h = torch.randn(20, 8)
    differ = 0
    with torch.no_grad():
        full = lin(h)
        for _ in range(trials):
            idx = torch.randperm(20)[: int(torch.randint(1, 20, ()))].sort().values
            differ += not torch.equal(lin(h.index_select(0, idx)), full.index_select(0, idx))
    return differ


def prefix_mean(trials: int = 20) -> int:
    """How many of `trials` random heatmaps give a masked mean over all sorted values that differs,
    bit for bit, from `refine_heatmap`'s mean of the data-sized prefix."""
    import torch

    torch.manual_seed(0)
    differ = 0
    for _ in range(trials):
        heatmap = torch.rand(32, 32) ** 4
        values = torch.sort(heatmap[heatmap > 2e-3], descending=True)[0]
        k = math.ceil(values.shape[0] * 0.2)
        want = torch.mean(values[:k])
        ordered = torch.sort(heatmap.flatten(), descending=True)[0]
        keep = torch.arange(ordered.numel()) < k
        got = torch.where(keep, ordered, 0).sum() / k
        differ += not torch.equal(want, got)
    return differ


def main() -> None:
    print(f"rule: {rule.__name__}")
    for name in KORNIA:
        first, second = output_shapes(name)
        print(f"{name}: output shapes {first} vs {second}: {'differ' if first != second else 'same'}")
    print(f"Linear on a row subset vs all rows then indexed: {subset_rows()} of 20 subsets differ")
    print(f"masked mean vs refine_heatmap's prefix mean: {prefix_mean()} of 20 heatmaps differ")


if __name__ == "__main__":
    main()
