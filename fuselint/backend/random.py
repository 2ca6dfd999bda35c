"""Uniform random numbers drawn inside the kernels that use them (dropout's masks).

A training graph draws dropout's uniforms with `aten.rand`, each an ATen kernel of its own
(nine per GPT-2 step, docs/NOTES.md). Inductor draws them inside the fused kernels from
per-call seeds; so does this pass: the graph's `aten.rand` calls become `fuselint::philox_rand`
of one seed each, all seeds drawn by one `randint` per call (from torch's generator, so
`torch.manual_seed` makes a run repeatable), and the lowering writes `tl.rand(seed, i)` at
each element's row-major position i. The numbers differ from eager's stream, as Inductor's
do; they are uniform on [0, 1) and fresh on every call. Where a group does not lower, the op
runs through ATen as a counter hash of the same seed (no host read).
"""

from __future__ import annotations

import torch
import torch.fx

from fuselint.backend.runtime import direct_impl

aten = torch.ops.aten

# Seeds are drawn below 2**31 so that they stay non-negative int32 values for tl.rand.
SEED_BOUND = 2**31 - 1


@torch.library.custom_op("fuselint::philox_rand", mutates_args=())
@direct_impl("fuselint::philox_rand")
def philox_rand(seed: torch.Tensor, size: list[int], dtype: torch.dtype) -> torch.Tensor:
    """Uniform [0, 1) numbers of `size` from the 0-d int64 `seed`, computed on its device."""
    n = 1
    for s in size:
        n *= s
    i = torch.arange(n, device=seed.device, dtype=torch.int64)
    # a splitmix-style mix of (seed, i) kept to 63 bits (torch has no unsigned 64-bit shifts)
    x = (seed.to(torch.int64) * 0x1E3779B97F4A7C15 + i * 0x3F58476D1CE4E5B9) & 0x7FFFFFFFFFFFFFFF
    x = ((x ^ (x >> 31)) * 0x14D049BB133111EB) & 0x7FFFFFFFFFFFFFFF
    x = x ^ (x >> 29)
    u = (x >> 39).to(torch.float32) * (1.0 / (1 << 24))  # 24 bits: exact in float32, below 1
    return u.reshape(size).to(dtype)


@philox_rand.register_fake
def _(seed: torch.Tensor, size: list[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(size, dtype=dtype, device=seed.device)


def _static_rand(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten.rand.default:
        return False
    val = node.meta.get("val")
    size = node.args[0] if node.args else None
    return (
        isinstance(val, torch.Tensor)
        and val.dtype.is_floating_point
        and isinstance(size, (list, tuple))
        and all(isinstance(s, int) for s in size)
        and not node.kwargs.get("generator")
    )


def seed_random(gm: torch.fx.GraphModule) -> int:
    """Turn gm's `aten.rand` calls into per-call-seeded `philox_rand`; how many were."""
    rands = [n for n in gm.graph.nodes if _static_rand(n)]
    if not rands:
        return 0
    device = rands[0].meta["val"].device
    rands = [n for n in rands if n.meta["val"].device == device]
    graph = gm.graph
    first = next(n for n in graph.nodes if n.op != "placeholder")
    with graph.inserting_before(first):
        seeds = graph.call_function(
            aten.randint.low, (0, SEED_BOUND, [len(rands)]), {"dtype": torch.int64, "device": device}
        )
    # a fake tensor of the graph's own fake mode (or a meta one), for the passes that follow
    fake = getattr(rands[0].meta["val"], "fake_mode", None)
    with fake if fake is not None else torch.device("meta"):
        seeds.meta["val"] = torch.empty(len(rands), dtype=torch.int64, device=device if fake else "meta")
    for i, node in enumerate(rands):
        val = node.meta["val"]
        with graph.inserting_before(node):
            seed = graph.call_function(aten.select.int, (seeds, 0, i))
            rand = graph.call_function(
                torch.ops.fuselint.philox_rand.default, (seed, list(val.shape), val.dtype)
            )
        for new in (seed, rand):
            new.meta.update({k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta")})
        seed.meta["val"] = seeds.meta["val"].select(0, i)  # at storage offset i, as the view is
        rand.meta["val"] = val
        node.replace_all_uses_with(rand)
        graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return len(rands)
