"""What eager code passes to scaled_dot_product_attention: one eager run of the entry on meta.

A traced graph shows the SDPA calls the compiled model makes, which are not always the ones its
eager code makes: libraries build masks only while tracing (transformers 5.23 on torch 2.11
builds GPT-2's and LLaMA's causal mask in the graph, where eager passes `is_causal=True` and no
mask; BERT's all-true mask likewise). The graph cannot tell such a mask from one the user builds
in eager too (nanoGPT's `tril`). So the entry is built once more on the meta device (no weight
memory, no math) and run eagerly, and each SDPA call records what it was given: the query and
key sizes, the dtype, the mask's sizes, strides and dtype (or none), and `is_causal`.

The probe is best effort: a factory that cannot build on meta, or eager code that reads a value
(`.item()`, `if t:`), which a meta tensor does not hold, gives no record (None), and the cost
model then reads eager's calls off the graph as before.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from fuselint.graph.entry import Entry, build

_SDPA = torch.nn.functional.scaled_dot_product_attention


@dataclass(frozen=True)
class EagerSdpa:
    """One eager call of scaled_dot_product_attention: sizes, dtype, mask, causality."""

    query: tuple[int, ...]
    key: tuple[int, ...]
    dtype: torch.dtype
    # the mask's sizes, strides and dtype as eager passed it; None: no mask
    mask: tuple[tuple[int, ...], tuple[int, ...], torch.dtype] | None
    is_causal: bool


def _argument(args: tuple, kwargs: dict, position: int, name: str, default=None):
    return args[position] if len(args) > position else kwargs.get(name, default)


class _Recording(TorchFunctionMode):
    """Records each SDPA call and lets it run (on meta: shapes only)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[EagerSdpa] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _SDPA:
            q, k = args[0], args[1]
            mask = _argument(args, kwargs, 3, "attn_mask")
            self.calls.append(
                EagerSdpa(
                    query=tuple(int(s) for s in q.shape),
                    key=tuple(int(s) for s in k.shape),
                    dtype=q.dtype,
                    mask=None
                    if mask is None
                    else (
                        tuple(int(s) for s in mask.shape),
                        tuple(int(s) for s in mask.stride()),
                        mask.dtype,
                    ),
                    is_causal=bool(_argument(args, kwargs, 5, "is_causal", False)),
                )
            )
        return func(*args, **kwargs)


def probe_sdpa(entry: Entry, *, train: bool = False) -> tuple[EagerSdpa, ...] | None:
    """The SDPA calls one eager run of the entry makes, built and run on the meta device, in call
    order; None when the entry cannot be built or run there (see the module docstring)."""
    try:
        with torch.device("meta"):
            built = build(entry)
        model = built.model.to("meta") if isinstance(built.model, torch.nn.Module) else built.model
        if isinstance(model, torch.nn.Module):
            model.train(train)
        meta = tree_map(
            lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, (built.args, built.kwargs)
        )
        recording = _Recording()
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad(), recording:
            model(*meta[0], **meta[1])
    except Exception:  # a probe only: no record, and the graph's own calls stand
        return None
    return tuple(recording.calls)
