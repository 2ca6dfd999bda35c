"""Does dynamo break where pad23's new FL102 findings say, once FL106's fix sizes the rows? (issue 10)

pad23 reads more of what crosses a call: items of a tuple a helper returns, a top-K of a counted `k`,
a name bound in both arms of an `if`, comprehensions of calls. Besides kornia SIFT's pad test (the
target, measured by `bench/fix_rate.py`), a whole-package lint of kornia, torch_geometric and
transformers' models finds four new count tests. Each probe below calls the installed package's own
code on rows from a custom op with an unbacked-size fake (FL106's fix's shape; where the rows come
from a helper, the helper is replaced by its FL106-fixed form), compiled with the eager backend
(`dynamic=False`), and prints the lines of the package file where dynamo breaks. A finding is real
when its line is among them.

    PYTHONPATH=$PWD CORPUS_VENV/bin/python bench/pad23_prec_probes.py
"""

from __future__ import annotations

import torch


@torch.library.custom_op("pad23_prec::masked_rows", mutates_args=())
def masked_rows(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """`x[keep]`: as many rows as `keep` holds True."""
    return x[keep].contiguous()


@masked_rows.register_fake
def _masked_rows_fake(x, keep):
    rows = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(rows >= 0)
    return x.new_empty((rows, *x.shape[keep.dim() :]))


def lines_where_dynamo_breaks(fn, *args, in_file: str) -> list[str]:
    """`line: reason` for each break dynamo reports in a file whose path ends with `in_file`."""
    torch._dynamo.reset()
    seen = set()
    for reason in torch._dynamo.explain(fn)(*args).break_reasons:
        frames = [f for f in reason.user_stack if f.filename.endswith(in_file)]
        if frames:
            seen.add(f"{frames[-1].lineno}: {str(reason.reason).splitlines()[0][:80]}")
    return sorted(seen)


def superpoint_top_k():
    """modeling_superpoint.py:49, `if k >= len(keypoints)` on the keypoints `remove_keypoints_from_borders`
    returns (mask reads, items of its tuple)."""
    from transformers.models.superpoint.modeling_superpoint import top_k_keypoints

    def f(keypoints, scores, keep):
        return top_k_keypoints(masked_rows(keypoints, keep), masked_rows(scores, keep), 4)

    g = torch.Generator().manual_seed(0)
    scores = torch.rand(12, generator=g)
    keypoints = torch.randint(0, 30, (12, 2), generator=g)
    return lines_where_dynamo_breaks(
        f, keypoints, scores, scores > 0.3, in_file="superpoint/modeling_superpoint.py"
    )


_UNPATCHED: dict = {}  # the package's own helpers, while a probe stands in for them


@torch.library.custom_op("pad23_prec::neighborhoods", mutates_args=())
def neighborhoods(
    o1: torch.Tensor,
    o2: torch.Tensor,
    s1: torch.Tensor,
    s2: torch.Tensor,
    dist1: torch.Tensor,
    im1seeds: torch.Tensor,
    im2seeds: torch.Tensor,
    k1: torch.Tensor,
    k2: torch.Tensor,
    r1: torch.Tensor,
    r2: torch.Tensor,
    fnn12: torch.Tensor,
    limits: list[float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """kornia AdaLAM's `extract_neighborhood_sets` whole, as FL106's fix would keep its mask reads: the
    seeds that survive are as many as the data says."""
    found = _UNPATCHED["extract_neighborhood_sets"](
        o1, o2, s1, s2, dist1, im1seeds, im2seeds, k1, k2, r1, r2, fnn12, *limits
    )
    return tuple(t.contiguous() for t in found)


@neighborhoods.register_fake
def _neighborhoods_fake(o1, o2, s1, s2, dist1, im1seeds, im2seeds, k1, k2, r1, r2, fnn12, limits):
    seeds = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(seeds >= 0)
    return (
        dist1.new_empty((seeds, k1.shape[0]), dtype=torch.bool),
        dist1.new_empty((seeds,), dtype=torch.int64),
        im1seeds.new_empty((seeds,)),
        im2seeds.new_empty((seeds,)),
    )


def adalam_no_seed():
    """adalam/core.py:379, `if rdims.shape[0] == 0` on the second item `extract_neighborhood_sets`
    returns (`numn1[valid_seeds]`), that helper kept whole in the graph as FL106's fix keeps its reads."""
    import kornia.feature.adalam.core as core
    from kornia.feature.adalam.adalam import get_adalam_default_config

    original = _UNPATCHED["extract_neighborhood_sets"] = core.extract_neighborhood_sets

    def kept(o1, o2, s1, s2, dist1, im1seeds, im2seeds, k1, k2, r1, r2, fnn12, *limits):
        return neighborhoods(
            o1, o2, s1, s2, dist1, im1seeds, im2seeds, k1, k2, r1, r2, fnn12, [float(v) for v in limits]
        )

    core.extract_neighborhood_sets = kept
    try:
        g = torch.Generator().manual_seed(0)
        n = 40
        k1, k2 = torch.rand(n, 2, generator=g) * 100, torch.rand(n, 2, generator=g) * 100
        fnn12 = torch.randperm(n, generator=g)
        scores1 = torch.rand(n, generator=g) * 0.9
        o1, o2 = torch.rand(n, generator=g), torch.rand(n, generator=g)
        s1, s2 = torch.rand(n, generator=g) + 1, torch.rand(n, generator=g) + 1
        config = get_adalam_default_config()

        def f(k1, k2, fnn12, scores1, o1, o2, s1, s2):
            return core.adalam_core(k1, k2, fnn12, scores1, config, None, None, None, o1, o2, s1, s2)

        return lines_where_dynamo_breaks(f, k1, k2, fnn12, scores1, o1, o2, s1, s2, in_file="adalam/core.py")
    finally:
        core.extract_neighborhood_sets = original


def pyg_connect_output():
    """connect/base.py:40, `edge_attr.size(0) != edge_index.size(1)` on what `filter_adj` returns
    (FilterEdges): each mask read is its own unbacked size."""
    from torch_geometric.nn.pool.connect.base import ConnectOutput

    def f(row, col, attr, keep):
        edge_index = torch.stack([masked_rows(row, keep), masked_rows(col, keep)], dim=0)
        return ConnectOutput(edge_index, masked_rows(attr, keep)).edge_attr * 2

    g = torch.Generator().manual_seed(0)
    row, col = torch.randint(0, 5, (10,), generator=g), torch.randint(0, 5, (10,), generator=g)
    attr = torch.rand(10, 3, generator=g)
    return lines_where_dynamo_breaks(f, row, col, attr, row != col, in_file="connect/base.py")


def pyg_coalesce():
    """utils/_coalesce.py:183, `len(edge_attr) > 0` on edge attributes sized by the self-loop fix
    (ASAPooling → to_torch_coo_tensor → coalesce)."""
    from torch_geometric.utils import coalesce

    def f(edge_index, attr, keep):
        return coalesce(masked_rows(edge_index.t(), keep).t(), masked_rows(attr, keep), num_nodes=6)[1] * 2

    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 6, (2, 12), generator=g)
    attr = torch.rand(12, generator=g)
    return lines_where_dynamo_breaks(
        f, edge_index, attr, edge_index[0] != edge_index[1], in_file="utils/_coalesce.py"
    )


def main() -> None:
    for probe in (superpoint_top_k, adalam_no_seed, pyg_connect_output, pyg_coalesce):
        try:
            print(f"{probe.__name__:20s} {probe()}")
        except Exception as exc:  # noqa: BLE001 - the probe reports what failed
            print(f"{probe.__name__:20s} error {type(exc).__name__}: {str(exc).splitlines()[0][:140]}")


if __name__ == "__main__":
    main()
