"""BatchNorm (training) + residual add + ReLU, forward and backward, channels_last bf16 at ResNet-50's
shapes (batch 32): GPU time of the generated kernels per step (torch.profiler, the best of 3 x 5
steps), fuselint against Inductor, and fuselint with other tiles for the chunks of its split outer
reductions (the BatchNorm statistics and gradient sums over N, H, W).

    python bench/bn_block.py                          # fuselint's own tiles against Inductor
    python bench/bn_block.py --tiles 64x16,32x32,64x64 --shapes 112,14
    python bench/bn_block.py --shapes 512x7,256x14 --split-min 131072   # CxS: C channels, SxS pixels

Needs a CUDA device. Prints one line per shape and variant; --json writes them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import caches_off  # noqa: E402

caches_off("bn-block-")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import fuselint.backend  # noqa: E402, F401  (registers the backend)
from fuselint.backend import heuristics  # noqa: E402

SHAPES = [(32, 64, 112, 112), (32, 256, 56, 56), (32, 512, 28, 28), (32, 1024, 14, 14), (32, 2048, 7, 7)]
_UNSPLIT = heuristics._unsplit_config


class Block(torch.nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(channels)

    def forward(self, x, r):
        return torch.relu(self.bn(x) + r)


def with_tile(tile: tuple[int, int] | None) -> None:
    """Chunks of split outer reductions `tile` = (columns, rows) wide and deep; None: fuselint's."""
    heuristics.SPLIT_OUTER_RBLOCK = tile[1] if tile else 16

    def unsplit(ir, interpret, max_persistent):
        cfg = _UNSPLIT(ir, interpret, max_persistent)
        if tile is None or not ir.rdims or ir.tile_dim is not None or heuristics._reduces_inner(ir):
            return cfg
        xblock = min(tile[0], heuristics.next_pow2(ir.xnumel))
        return heuristics.LaunchConfig(
            xblock, cfg.rblock, cfg.persistent, cfg.num_warps, heuristics._cdiv(ir.xnumel, xblock)
        )

    heuristics._unsplit_config = unsplit


def step_us(backend: str, shape: tuple[int, ...]) -> tuple[float, dict[str, float]]:
    torch._dynamo.reset()
    cl = torch.channels_last

    def tensor(grad: bool) -> torch.Tensor:
        t = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        return t.requires_grad_(grad)

    model = Block(shape[1]).cuda().to(torch.bfloat16).train()
    x, r, g = tensor(True), tensor(True), tensor(False)
    f = torch.compile(model, backend="fuselint") if backend == "fuselint" else torch.compile(model)

    def step() -> None:
        f(x, r).backward(g)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    best: tuple[float, dict[str, float]] | None = None
    for _ in range(3):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        kernels: dict[str, float] = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA and e.name.startswith(
                ("fuselint_", "triton_")
            ):
                kernels[e.name] = kernels.get(e.name, 0.0) + (e.time_range.end - e.time_range.start) / 5
        total = sum(kernels.values())
        if best is None or total < best[0]:
            best = (total, kernels)
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiles", default="", help="comma list of COLUMNSxROWS chunk tiles to try too")
    p.add_argument(
        "--shapes",
        default="",
        help="comma list of spatial sizes (112,56,28,14,7) or CxS (512x7: 512 channels, 7x7)",
    )
    p.add_argument("--split-min", default="", help="comma list of split thresholds (elements) to try too")
    p.add_argument("--json")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bn_block: needs a CUDA device", file=sys.stderr)
        return 2
    shapes = SHAPES
    if args.shapes:
        picked = [v.split("x") for v in args.shapes.split(",")]
        wanted = {int(v[0]) for v in picked if len(v) == 1}
        shapes = [s for s in SHAPES if s[2] in wanted]
        shapes += [(32, int(c), int(s), int(s)) for c, s in (v for v in picked if len(v) == 2)]
    tiles = [None] + [tuple(int(a) for a in t.split("x")) for t in args.tiles.split(",") if t]
    default_min = heuristics.SPLIT_MIN_NUMEL, heuristics.SPLIT_MIN_OUTER_NUMEL
    split_mins = [int(v) for v in args.split_min.split(",") if v]
    rows = []
    for shape in shapes:
        us, kernels = step_us("inductor", shape)
        rows.append({"shape": shape, "backend": "inductor", "us": us, "kernels": kernels})
        print(f"{shape} inductor {us:.1f} us", flush=True)
        for tile in tiles:
            with_tile(tile)
            us, kernels = step_us("fuselint", shape)
            rows.append({"shape": shape, "backend": "fuselint", "tile": tile, "us": us, "kernels": kernels})
            print(f"{shape} fuselint {tile or 'default'} {us:.1f} us", flush=True)
        with_tile(None)
        for numel in split_mins:
            heuristics.SPLIT_MIN_NUMEL = heuristics.SPLIT_MIN_OUTER_NUMEL = numel
            us, kernels = step_us("fuselint", shape)
            rows.append(
                {"shape": shape, "backend": "fuselint", "split_min": numel, "us": us, "kernels": kernels}
            )
            print(f"{shape} fuselint split_min={numel} {us:.1f} us", flush=True)
        heuristics.SPLIT_MIN_NUMEL, heuristics.SPLIT_MIN_OUTER_NUMEL = default_min
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
