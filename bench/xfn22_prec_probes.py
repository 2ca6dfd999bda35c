"""Does dynamo break where xfn22's cross-call FL102 findings say, once FL106's fix sizes the rows? (issue 10)

xfn22 carries a data-sized kind across calls: a parameter a caller fills with rows sized by the data,
and a helper whose returns are data-sized. Each case below calls the installed package's own function
(kornia 0.9.0, torch_geometric 2.8.1) on rows from a custom op with an unbacked-size fake (FL106's
fix's shape; for a helper's return, the helper is replaced by its FL106-fixed form), compiled with
the eager backend (`dynamic=False`), and prints the lines of the package file where dynamo breaks.
A finding is real when its line is among them.

    PYTHONPATH=$PWD CORPUS_VENV/bin/python bench/xfn22_prec_probes.py
"""

from __future__ import annotations

import torch


@torch.library.custom_op("xfn22_prec::rows", mutates_args=())
def rows(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """`x[m]`, its rows sized by the data."""
    return x[m].contiguous()


@rows.register_fake
def _rows_fake(x, m):
    size = torch.library.get_ctx()._shape_env.create_unbacked_symint()
    torch._check(size >= 0)
    return x.new_empty((size, *x.shape[m.dim() :]))


def break_lines(fn, *args, file_part: str) -> list[str]:
    """`line: reason` of each graph break dynamo reports inside a file whose path holds `file_part`."""
    torch._dynamo.reset()
    found = []
    for reason in torch._dynamo.explain(fn)(*args).break_reasons:
        frames = [f for f in reason.user_stack if file_part in f.filename]
        if frames:
            found.append(f"{frames[-1].lineno}: {str(reason.reason).splitlines()[0][:90]}")
    return sorted(set(found))


def kornia_nms():
    from kornia.geometry.bbox import nms

    def f(prob):
        points = torch.nonzero(prob >= 0.5).float()  # sized by the data: the where-fix's nonzero is an op
        points = rows(points, torch.ones(points.shape[0], dtype=torch.bool))
        boxes = torch.cat([points - 0.75, points + 0.75], 1)
        return nms(boxes, rows(prob, prob >= 0.5), 0.0)

    return break_lines(
        f, torch.rand(5, 5, generator=torch.Generator().manual_seed(0)), file_part="geometry/bbox.py"
    )


def kornia_transform_points():
    from kornia.geometry.linalg import transform_points

    def f(h, points, m):
        return transform_points(h, rows(points, m))

    g = torch.Generator().manual_seed(0)
    pts = torch.rand(10, 2, generator=g)
    return break_lines(f, torch.eye(3)[None], pts, pts[:, 0] > 0.3, file_part="geometry/linalg.py")


def kornia_svd_cast():
    from kornia.core.utils import _torch_svd_cast

    def f(x, m):
        return _torch_svd_cast(rows(x, m))[1]

    g = torch.Generator().manual_seed(0)
    x = torch.rand(8, 3, 3, generator=g)
    return break_lines(f, x, x[:, 0, 0] > 0.3, file_part="core/utils.py")


def kornia_ransac_refits():
    from kornia.geometry.ransac import RANSAC

    def fixed_remove_bad_models(self, models):  # FL106's fix of its `models[mask]`
        mask = torch.isfinite(models).all(dim=-1).all(dim=-1) & (models.abs().amax(dim=(-2, -1)) > 0)
        return rows(models, mask)

    RANSAC.remove_bad_models = fixed_remove_bad_models
    ransac = RANSAC("essential")
    models = torch.rand(4, 3, 3, generator=torch.Generator().manual_seed(0))
    return break_lines(ransac._project_refits, models, file_part="geometry/ransac.py")


def pyg_maybe_num_nodes():
    from torch_geometric.utils.num_nodes import maybe_num_nodes

    def f(edge_index, m):
        return maybe_num_nodes(rows(edge_index.t(), m).t())

    e = torch.randint(0, 6, (2, 12), generator=torch.Generator().manual_seed(0))
    return break_lines(f, e, e[0] != e[1], file_part="utils/num_nodes.py")


def pyg_select_output():
    """SelectTopK's call (`node_index`, `torch.arange(node_index.size(0))`, `score[node_index]`): one
    unbacked size, which the checks in `SelectOutput.__init__` compare without a guard (not flagged)."""
    from torch_geometric.nn.pool.select.base import SelectOutput

    def f(score, m):
        node_index = rows(torch.arange(score.size(0)), m)
        out = SelectOutput(
            node_index=node_index,
            num_nodes=score.size(0),
            cluster_index=torch.arange(node_index.size(0)),
            num_clusters=node_index.size(0),
            weight=score[node_index],
        )
        return out.weight * 2

    score = torch.rand(9, generator=torch.Generator().manual_seed(0))
    return break_lines(f, score, score > 0.4, file_part="pool/select/base.py")


def main() -> None:
    probes = (kornia_nms, kornia_transform_points, kornia_svd_cast, kornia_ransac_refits, pyg_maybe_num_nodes)
    for probe in (*probes, pyg_select_output):
        try:
            print(f"{probe.__name__:24s} {probe()}")
        except Exception as exc:  # noqa: BLE001 - the probe reports what failed
            print(f"{probe.__name__:24s} error {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")


if __name__ == "__main__":
    main()
