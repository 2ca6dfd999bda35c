"""Does dynamo break where the union narrowing (cg23) adds a finding? One probe per new finding.

Run: `PYTHONPATH=$PWD CORPUS_VENV/bin/python bench/cg23_union_probes.py`. Each probe copies the
lines around the finding (the package's own code, cut to what the finding needs) and counts the
graphs and break reasons dynamo (torch 2.13, CPU) reports when the narrowed arm runs.

- torch_geometric 2.8.1 `nn/conv/cluster_gcn_conv.py:118` (FL106, `edge_weight[row == col] += ...` in
  the `else` arm of `isinstance(edge_index, SparseTensor)`): the package's ClusterGCNConv itself.
- transformers 5.23 `deepseek_ocr2/modeling_deepseek_ocr2.py:1435` (FL101, `num_local_patches.tolist()`
  under `isinstance(num_local_patches, torch.Tensor)`, the parameter `list[int] | torch.Tensor | None`),
  and its modular twin `modular_deepseek_ocr2.py:961`: the split of local features per image.
"""

from __future__ import annotations

import torch
from torch import nn


def count(fn, *args) -> tuple[int, list[str]]:
    """Graphs compiled and break reasons (first lines) when dynamo runs `fn(*args)`."""
    graphs = []

    def backend(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    torch.compile(fn, backend=backend)(*args)
    reasons = [k.splitlines()[0] for k in (*counters["graph_break"], *counters["unimplemented"])]
    return len(graphs), reasons


def cluster_gcn() -> tuple[int, list[str]]:
    from torch_geometric.nn import ClusterGCNConv

    torch.manual_seed(0)
    conv = ClusterGCNConv(8, 8, diag_lambda=0.5).eval()
    x = torch.randn(6, 8)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 2, 3, 4, 5, 0, 0]])
    return count(conv, x, edge_index)


class LocalPatches(nn.Module):
    """deepseek_ocr2's `get_image_features`: local features split per image by a count that may
    come as a tensor (the processor's output) and is made a list first."""

    def forward(
        self, local_features: torch.Tensor, num_local_patches: list[int] | torch.Tensor | None = None
    ):
        if isinstance(num_local_patches, torch.Tensor):
            num_local_patches = num_local_patches.tolist()
        per_image = torch.split(local_features, num_local_patches, dim=0)
        return [
            p.mean(0) if p.shape[0] else local_features.new_zeros(local_features.shape[1:]) for p in per_image
        ]


def deepseek_ocr2() -> tuple[int, list[str]]:
    return count(LocalPatches(), torch.randn(10, 4), torch.tensor([6, 0, 4]))


def main() -> None:
    for name, probe in [("cluster_gcn_conv.py:118", cluster_gcn), ("deepseek_ocr2 tolist", deepseek_ocr2)]:
        graphs, reasons = probe()
        print(f"{name}: {graphs} graphs, {len(reasons)} breaks: {sorted(set(reasons))}")


if __name__ == "__main__":
    main()
