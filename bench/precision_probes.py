"""What dynamo does with the code shapes the FL1xx rules argue about: tiny models, one per class.

Not a test (needs torch and takes seconds): the evidence behind the precision choices of the
source rules. For each probe it compiles the module with `backend="eager"` (dynamo only), runs it
at two input sizes (batch or sequence length changed, other dims fixed) and prints the graph
breaks, the recompiles and the FX nodes of the graph per size: a break is a blocker, a loop whose
graph grows with the input and recompiles is data-sized, a loop whose graph does not change is
static and fuses.

    PYTHONPATH=. python bench/precision_probes.py
"""

from __future__ import annotations

import enum
import logging
import warnings

import torch
import torch._dynamo
from torch import nn

logger = logging.getLogger("precision_probes")


class RopeAxes(nn.Module):
    """`range(ids.shape[-1])` over 3 position axes (diffusers' Flux/Bria rope)."""

    def forward(self, ids):
        n_axes = ids.shape[-1]
        pos = ids.float()
        out = []
        for i in range(n_axes):
            out.append(torch.cos(pos[:, i : i + 1] * (i + 1)))
        return torch.cat(out, dim=-1)


class ChunkScan(nn.Module):
    """`range(w.shape[2])` over a static chunk length (diffusers' sana_wm chunk scan)."""

    def forward(self, w):
        c_len = w.shape[2]
        s = torch.zeros_like(w[:, :, 0])
        states = []
        for t in range(c_len):
            s = s * w[:, :, t] + 1
            states.append(s)
        return torch.stack(states, dim=2)


class ZipLists(nn.Module):
    """`zip` over Python lists of tensors and of paddings."""

    def forward(self, x):
        parts = list(x.chunk(3, dim=-1))
        pads = [None, 1.0, 2.0]
        out = []
        for part, pad in zip(parts, pads, strict=True):
            out.append(part if pad is None else part + pad)
        return torch.cat(out, dim=-1)


class BatchRows(nn.Module):
    """`range(x.shape[0])` writing per row: data-sized (kept by FL107)."""

    def forward(self, x):
        out = torch.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] / x[i].norm()
        return out


class SeqSteps(nn.Module):
    """`for t in range(seq_len)` over dim 1 (RWKV-style recurrence): data-sized (kept)."""

    def forward(self, k):
        batch, seq_len, hidden = k.shape
        state = torch.zeros(batch, hidden)
        out = torch.empty_like(k)
        for t in range(seq_len):
            state = state * 0.5 + k[:, t]
            out[:, t] = state
        return out


class GuardedFloatItem(nn.Module):
    """`.item()` under `isinstance(t, torch.Tensor)` on a value computed as a Python float."""

    def forward(self, x):
        time_factor = 1.0 + 1.0 * (x.size(2) > 1)
        if isinstance(time_factor, torch.Tensor):
            time_factor = time_factor.item()
        return x.repeat_interleave(int(time_factor), dim=2)


class OptionalList(nn.Module):
    """`if not kv_caches:` where kv_caches is None or a list."""

    def forward(self, x, kv_caches=None):
        if not kv_caches:
            kv_caches = [None for _ in range(2)]
        return x * len(kv_caches)


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


class EnumIntStr(nn.Module):
    """Comparisons of an enum, an int and a string passed as arguments."""

    def forward(self, x, mode=Mode.FAST, stride=2, padding_kind="zeros"):
        x = x.relu()
        if mode == Mode.SLOW:
            x = x * 2
        if stride == 1:
            x = x + 1
        if padding_kind == "reflect":
            x = x - 1
        return x


class ViewPythonInt(nn.Module):
    """`x.view(B, ...)` where B is a Python int read off the shape."""

    def forward(self, x):
        B = x.shape[0]
        return x.view(B, -1)


class BoolAll(nn.Module):
    """`if bool(mask.all()):`: one break, one site."""

    def forward(self, x):
        mask = x > 0
        if bool(mask.all()):
            return x * 2
        return x


class DeprecatedWarning(nn.Module):
    """`logger.warning` only when a deprecated argument is passed."""

    def forward(self, x, cross_attention_kwargs=None):
        x = x.relu()
        if cross_attention_kwargs is not None:
            if cross_attention_kwargs.get("scale", None) is not None:
                logger.warning("Passing `scale` is deprecated and will be ignored.")
        return x + 1


PROBES = [
    (RopeAxes(), lambda n: (torch.randint(0, 8, (n, 3)),), {}),
    (ChunkScan(), lambda n: (torch.rand(n, 2, 4, 3),), {}),
    (ZipLists(), lambda n: (torch.rand(n, 6),), {}),
    (BatchRows(), lambda n: (torch.rand(n, 5),), {}),
    (SeqSteps(), lambda n: (torch.rand(2, n, 4),), {}),
    (GuardedFloatItem(), lambda n: (torch.rand(n, 2, 3, 4),), {}),
    (OptionalList(), lambda n: (torch.rand(n, 4),), {}),
    (EnumIntStr(), lambda n: (torch.rand(n, 4),), {}),
    (ViewPythonInt(), lambda n: (torch.rand(n, 2, 3),), {}),
    (BoolAll(), lambda n: (torch.rand(n, 4),), {}),
    (DeprecatedWarning(), lambda n: (torch.rand(n, 4),), {}),
    (DeprecatedWarning(), lambda n: (torch.rand(n, 4),), {"cross_attention_kwargs": {"scale": 1.0}}),
]


def probe(module: nn.Module, inputs, kwargs: dict) -> str:
    torch._dynamo.reset()
    nodes: list[int] = []

    def backend(gm, _example):
        nodes.append(sum(1 for n in gm.graph.nodes if n.op == "call_function" or n.op == "call_method"))
        return gm.forward

    compiled = torch.compile(module, backend=backend, dynamic=False)
    explain = torch._dynamo.explain(module)(*inputs(3), **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*inputs(3), **kwargs)
        first = list(nodes)
        compiled(*inputs(5), **kwargs)
    second = nodes[len(first) :]
    breaks = "; ".join(sorted({str(b.reason).splitlines()[0][:70] for b in explain.break_reasons})) or "-"
    return (
        f"| {type(module).__name__}{' (kwargs)' if kwargs else ''} | {explain.graph_break_count} | "
        f"{len(first)} graph(s), {sum(first)} ops | {len(second)} new graph(s), {sum(second)} ops | {breaks} |"
    )


def main() -> None:
    logging.getLogger("precision_probes").addHandler(logging.NullHandler())
    logging.getLogger("precision_probes").propagate = False
    print(f"torch {torch.__version__}, backend eager, dynamic=False; sizes 3 then 5 (batch or sequence)\n")
    print("| probe | breaks | size 3 | size 5 (recompiles) | break reasons |")
    print("|---|---|---|---|---|")
    for module, inputs, kwargs in PROBES:
        print(probe(module, inputs, kwargs))


if __name__ == "__main__":
    main()
