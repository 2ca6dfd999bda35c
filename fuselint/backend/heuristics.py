"""Block sizes, warps and the persistent/looped choice for a generated kernel.

GPU choices follow what was measured (KNOWLEDGE.md, bench/results/backend-notes.md): pointwise
kernels take 1024 elements per program with 4 warps (Inductor's choice: it was 1-2% ahead of
our 2048 on every fp32 and bf16 pointwise pattern of H100 run 1, and bf16 cos->sin ran 2.4%
faster with it); window kernels (max-pool) 256 outputs per program; reductions over the
innermost dim run one row per program with the whole row in registers when it fits (the
fused-softmax layout, 91% of copy bandwidth in bf16), warps growing with the row; a pointwise
kernel over tensors of two layouts (NCHW beside channels_last) runs 2-D tiles, as Inductor's
transposes do. Under the CPU interpreter each
program instance costs ~1.7 ms, so blocks there are as large as possible.

A reduction with too few programs for the work (fewer than 2 x 132 SMs, at least
SPLIT_MIN_NUMEL elements: channels_last BatchNorm statistics over N, H, W; weight gradients
summed over all tokens) is *split*, as Inductor splits it: a first kernel reduces chunks of
the reduced extent on a 2-D grid (programs x chunks) into an fp32 workspace, a second
combines the chunks and runs the kernel's per-row epilogue (:attr:`LaunchConfig.combine`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fuselint.backend.lowering import KernelIR

# Rows up to this long stay in registers (one pass over memory); longer rows loop.
MAX_PERSISTENT_RBLOCK = 16384
LOOPED_RBLOCK = 4096
INTERPRET_TILE = 1 << 16
WINDOW_XBLOCK = 256
# Split a reduction that launches fewer programs than this (2 x the SMs of an H100/H200)...
SPLIT_MAX_PROGRAMS = 264
# ...and reads at least this many elements (FUSELINT_SPLIT_MIN_NUMEL overrides it; setting it
# splits under the interpreter too, which tests use; FUSELINT_SPLIT=0 never splits), into
# chunks enough for about this many programs, each at least two blocks long, at most this many.
SPLIT_MIN_NUMEL = 1 << 20
# A reduction over an outer dim splits from fewer elements: BatchNorm statistics over
# 32 x 7 x 7 pixels of 512 channels (800K elements) ran on 8 programs, each looping over all
# 1568 rows: 70 µs a training step (forward and backward) against Inductor's 17.6 on an H100;
# split, 20 µs (bench/bn_block.py --shapes 512x7 --split-min 131072; 256 or more channels at
# 14 x 14 and larger maps split already, and are unchanged).
SPLIT_MIN_OUTER_NUMEL = 1 << 17
SPLIT_TARGET_PROGRAMS = 1024
SPLIT_MAX_CHUNKS = 1024
# The combine kernel holds XBLOCK rows x all chunks in registers: about this many elements.
COMBINE_TILE = 4096
# The chunks of a split reduction over an outer dim (channels_last BatchNorm statistics) loop
# over tiles this many rows deep, 64 columns wide, with 4 warps: BatchNorm's training step on
# the H200 (.gpu/bnsweep.py) ran 14% faster than with 64 x 64 tiles and 8 warps at 32x64x112x112,
# 26% at 32x1024x14x14, level with Inductor's autotuned kernels (32 x 32 was within 2%).
SPLIT_OUTER_RBLOCK = 16
# Short rows reduced along memory's innermost dim go several to a program, about this many
# elements a program (FUSELINT_ROW_TILE overrides it, for side-by-side runs).
ROW_TILE = 2048
# ...with no more warps than one row's 16-byte vectors fill (a warp's 32 threads load 512 bytes of a
# row at once) where rows are 256 lanes or more and the kernel reads a vector along the row (a
# LayerNorm's weight): Triton lays out that [1, RBLOCK] load with every warp along the row, and a
# tile whose warps also split its rows then converts between the two layouts through shared memory
# (two `convert_layout`s in the TTGIR; none at 128 lanes with 8 warps, which stay). ConvNeXt-T's
# LayerNorm over 25088 rows of 192 float32 ran 19.9 µs with 8 rows and 8 warps a program, 7.6 with
# 2 warps, as Inductor's 7.6. Over 16 float32 and 9 bf16 row shapes of 192-512 lanes the rule was
# 1.13-3.4x faster than 8 warps, and against the best of 1-16 rows with 1-8 warps within 1.00-1.03
# from 25088 rows up, 1.00-1.27 at 6272 and 1.08-1.39 at 1568 rows (0.2-0.7 µs) (H200,
# bench/ln_sweep.py, bench/results/h200-s24/).
VECTOR_WARP_BYTES = 512


@dataclass(frozen=True)
class LaunchConfig:
    xblock: int
    rblock: int  # 1 for pointwise kernels
    persistent: bool
    num_warps: int
    grid: int
    # A split reduction: `split` chunks of `chunk` reduced elements each (the last may be
    # shorter) on grid (grid, split), then the launch that combines them.
    split: int = 1
    chunk: int = 0
    combine: LaunchConfig | None = None

    def describe(self) -> str:
        mode = "pointwise" if self.rblock == 1 else ("persistent" if self.persistent else "looped")
        grid = f"({self.grid}, {self.split})" if self.combine else f"({self.grid},)"
        text = f"{mode}: grid={grid}, XBLOCK={self.xblock}, RBLOCK={self.rblock}, num_warps={self.num_warps}"
        if self.combine is None:
            return text
        c = self.combine
        return (
            f"split in {self.split} chunks of {self.chunk}, {text}; "
            f"then combine: grid=({c.grid},), XBLOCK={c.xblock}, RBLOCK={c.rblock}, num_warps={c.num_warps}"
        )


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _row_warps(rblock: int) -> int:
    # More warps as the row grows; 8192-long fp32 RMSNorm rows ran 6% faster with 8 warps than
    # with 16 on an H100 (0.183 vs 0.195 ms), so 16 only past that.
    return 16 if rblock >= 16384 else 8 if rblock >= 2048 else 4


def choose_config(ir: KernelIR, interpret: bool, max_persistent: int | None = None) -> LaunchConfig:
    """The launch configuration for `ir` on the GPU, or under the interpreter."""
    cfg = _unsplit_config(ir, interpret, max_persistent)
    return _split(ir, cfg, interpret) or cfg


def _split(ir: KernelIR, cfg: LaunchConfig, interpret: bool) -> LaunchConfig | None:
    """The split form of reduction config `cfg`, or None when it keeps one launch."""
    env = os.environ.get("FUSELINT_SPLIT_MIN_NUMEL")
    if os.environ.get("FUSELINT_SPLIT") == "0" or (interpret and not env):
        return None
    min_numel = int(env) if env else SPLIT_MIN_NUMEL if _reduces_inner(ir) else SPLIT_MIN_OUTER_NUMEL
    rnumel = ir.rnumel
    if cfg.rblock == 1 or cfg.grid >= SPLIT_MAX_PROGRAMS or ir.xnumel * rnumel < min_numel:
        return None
    if not ir.splittable:
        return None
    if interpret:
        # a few chunks, each one block (tests force the split on small shapes)
        rblock = next_pow2(_cdiv(rnumel, 4))
        xblock = max(1, min(next_pow2(ir.xnumel), INTERPRET_TILE // rblock))
        chunk, warps = rblock, 4
    elif not _reduces_inner(ir):
        rblock, xblock, warps = min(cfg.rblock, SPLIT_OUTER_RBLOCK), cfg.xblock, 4
    else:
        rblock = min(cfg.rblock, LOOPED_RBLOCK)
        xblock = cfg.xblock
        # a persistent row that now loops in 4096-blocks takes the warps of that block
        warps = cfg.num_warps if rblock == cfg.rblock else _row_warps(rblock * xblock)
    if not interpret:
        wanted = _cdiv(SPLIT_TARGET_PROGRAMS, cfg.grid)
        chunk = max(2 * rblock, _cdiv(rnumel, min(wanted, SPLIT_MAX_CHUNKS)))
        chunk = _cdiv(chunk, rblock) * rblock
    split = _cdiv(rnumel, chunk)
    if split < 2:
        return None
    sblock = next_pow2(split)
    budget = INTERPRET_TILE if interpret else COMBINE_TILE
    cx = max(1, min(next_pow2(ir.xnumel), budget // sblock))
    combine = LaunchConfig(cx, sblock, True, 8 if cx * sblock >= 4096 else 4, _cdiv(ir.xnumel, cx))
    return LaunchConfig(xblock, rblock, False, warps, _cdiv(ir.xnumel, xblock), split, chunk, combine)


def _column_vector_bytes(ir: KernelIR) -> int:
    """The element size of the widest tensor the kernel reads along the reduced dims only (a
    LayerNorm's weight and bias, a bias added before the norm), 0 when it reads none."""
    rdims = set(ir.rdims)
    return max(
        (v.dtype.itemsize for v in ir.values if v.kind == "load" and v.dtype and v.dims and v.dims <= rdims),
        default=0,
    )


def _reduces_inner(ir: KernelIR) -> bool:
    """Rows are contiguous when memory's innermost dim is reduced (channels_last makes C, not
    W, innermost: a mean over H and W then reduces columns)."""
    last = ir.contiguous_dim if ir.contiguous_dim is not None else len(ir.space) - 1
    return last in ir.rdims


def _unsplit_config(ir: KernelIR, interpret: bool, max_persistent: int | None) -> LaunchConfig:
    xnumel, rnumel = ir.xnumel, ir.rnumel
    env_cap = os.environ.get("FUSELINT_MAX_PERSISTENT_RBLOCK")
    cap = max_persistent or (int(env_cap) if env_cap else MAX_PERSISTENT_RBLOCK)
    if ir.tile_dim is not None:
        # A transposing tile: the whole tile dim on one axis (<= MAX_TILE), rows on the other,
        # ~2K elements a program, at least 32 rows so that row-contiguous tensors coalesce.
        rblock = next_pow2(ir.ynumel)
        budget = INTERPRET_TILE if interpret else 2048
        xblock = min(next_pow2(ir.xnumel), max(1 if interpret else 32, budget // rblock))
        warps = 8 if xblock * rblock >= 4096 else 4
        return LaunchConfig(xblock, rblock, True, warps, _cdiv(ir.xnumel, xblock))
    if not ir.rdims:
        if interpret:
            xblock = min(next_pow2(xnumel), INTERPRET_TILE)
            warps = 4
        elif any(v.kind == "window" for v in ir.values):
            # Each output reads a whole window: fewer outputs per thread than plain pointwise.
            xblock = min(WINDOW_XBLOCK, max(128, next_pow2(_cdiv(xnumel, 128))))
            warps = 4
        elif xnumel >= 1 << 20:
            xblock, warps = 1024, 4
        else:
            xblock = min(1024, max(128, next_pow2(_cdiv(xnumel, 128))))
            warps = 4 if xblock >= 512 else 2
        return LaunchConfig(xblock, 1, True, warps, _cdiv(xnumel, xblock))

    inner = _reduces_inner(ir)
    full = next_pow2(rnumel)
    persistent = full <= cap
    if interpret:
        rblock = full if persistent else min(LOOPED_RBLOCK, cap)
        xblock = max(1, min(next_pow2(xnumel), INTERPRET_TILE // rblock))
        return LaunchConfig(xblock, rblock, persistent, 4, _cdiv(xnumel, xblock))
    if inner:
        rblock = full if persistent else min(LOOPED_RBLOCK, cap)
        # Short rows: several per program so that each moves ~2K elements.
        tile = int(os.environ.get("FUSELINT_ROW_TILE") or ROW_TILE)
        xblock = 1 if rblock >= 1024 else max(1, min(next_pow2(xnumel), tile // rblock))
        warps = _row_warps(rblock * xblock)
        vector = _column_vector_bytes(ir)
        if xblock > 1 and vector and rblock >= 256:
            warps = min(warps, max(1, rblock * vector // VECTOR_WARP_BYTES))
    else:
        # Reducing an outer dim: the contiguous dim is x; tile it 64 wide.
        rblock = full if full <= 64 else 64
        persistent = full <= 64
        xblock = min(64, next_pow2(xnumel))
        # Enough columns to fill the GPU at 32 a program (EfficientNet's squeeze-excite means over
        # 56x56 channels_last maps, 9216 of them): narrower tiles, one launch, as Inductor runs
        # them; fewer columns split instead (BatchNorm statistics over 64 channels)
        if _cdiv(xnumel, 32) >= SPLIT_MAX_PROGRAMS:
            while _cdiv(xnumel, xblock) < SPLIT_MAX_PROGRAMS:
                xblock //= 2
        warps = 8 if xblock * rblock >= 4096 else 4
    return LaunchConfig(xblock, rblock, persistent, warps, _cdiv(xnumel, xblock))
