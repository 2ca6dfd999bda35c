"""The devices the cost model prices kernels on: memory bandwidth, compute rates, launch cost.

H200's bandwidth and launch cost are measured (KNOWLEDGE.md: device-to-device copy 4140-4300
GB/s counting bytes read + written; a tiny eager op ~4 us of GPU time). The other devices use
datasheet numbers (peak HBM/GDDR bandwidth, dense FP32 / BF16 tensor-core TFLOPS), which real
kernels reach only in part (~85-92% for a copy), and the H200's launch cost; `calibrate`
replaces them with what `verify` measures.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path


def _log_interp(x: float, points: list[tuple[float, float]]) -> float:
    """y at x from (x, y) points sorted by x, linear in log x and log y, clamped at both ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            f = math.log(x / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))
    return points[-1][1]


def _cell(v: float, grid: tuple[int, ...]) -> tuple[int, float]:
    """(index of the grid interval holding v, v's position in it in log space), clamped."""
    v = min(max(v, grid[0]), grid[-1])
    for i in range(len(grid) - 1):
        if v <= grid[i + 1]:
            return i, math.log(v / grid[i]) / math.log(grid[i + 1] / grid[i])
    return len(grid) - 2, 1.0


@dataclass(frozen=True)
class Efficiency:
    """What kernels reach on a device at the sizes models run, swept by `bench/calibrate.py
    --efficiency` (each rate includes the kernel's fixed cost, as a profiler times it):
    - gemm: (M, N, K, TFLOP/s) of a half-precision matmul over a grid of M, N and K;
    - depthwise: (layout, k, flops, TFLOP/s) of k x k depthwise convolutions, which run on CUDA
      cores (one input channel per output: no tensor-core tile to fill), by layout: cuDNN's
      channels_last kernel or PyTorch's own NCHW one, several times slower;
    - bandwidth: (bytes moved, GB/s) of an elementwise kernel, from 64 KiB to 1 GiB;
    - batch_norm: (layout, H x W, bytes moved, GB/s) of eager inference BatchNorm, all its kernels:
      PyTorch's NCHW kernel works plane by plane and reaches a fraction of the copy bandwidth;
    - dense_conv: (k, Cin, Cout, H = W, batch, µs) of dense k x k convolutions in channels_last (the
      layout cuDNN's kernels run in): with few channels they run several times slower than the
      GEMM of their implicit dims (16 -> 16 channels, 3x3: 4.5x on the H200);
    - layer_norm: (ns per row, ns per element) of PyTorch's eager LayerNorm kernel, which runs one
      block per row and so pays per row as well as per element: not swept but fit to the model
      kernels measured on the H200 (bench/results/h200-eff/pa.json: ViT's 9 and ConvNeXt's 23
      LayerNorms, rows of 96 to 768 elements; GPT-2's and BERT's within 7%). Empty: by bandwidth;
    - strided: (GB/s of PyTorch's non-vectorised elementwise kernel, GB/s of its non-vectorised cat
      kernel[, GB/s of the elementwise kernel where an operand's dims are permuted]), which eager runs
      where an operand is broadcast or strided unlike the output (a per-channel scale, RoPE's halves,
      a permuted residual): measured by `bench/kernel_rates.py` (H100) or fit to the model kernels
      measured on the H200 (`elementwise_kernel<128, 4>` and `CatArrayBatchedCopy`, see docs/NOTES.md
      "pred7", "pred9"), several times below the vectorised kernel's rate; a permuted operand
      (reads uncoalesced) is the slowest. Two values: permuted as the first. Empty: by bandwidth;
    - attention: the fraction of the dense half-precision rate (half_tflops) that fused attention
      kernels without a mask (flash) reach over their whole score tiles; fit to the eager flash
      kernels measured on the device (H200: BERT's, LLaMA's and ViT's cuDNN kernels, 0.378-0.385)
      or measured by `bench/kernel_rates.py` (H100). 0, and masked calls: the cost model's default
      (attention.FUSED_ATTENTION_EFFICIENCY, from an H100 kernel);
    - attention_causal: the same for causal flash calls, over the half of the tiles
      `attention.fused_work` counts for them (cuDNN's causal kernel saves far less than half: H100,
      0.32-0.36 where the same shapes without the mask reach 0.52-0.57). 0: as `attention`;
    - max_pool: (GB/s of PyTorch's NCHW max-pool kernel, GB/s of its channels_last one), bytes of
      input read and output written: both run a thread per output reading its window, far below
      copy bandwidth (H100, 3x3/2 over 32x64x112x112: 604 and 538 GB/s). Empty: by bandwidth;
    - stem_copy: (GB/s of cuDNN's NCHW -> NHWC conversion of an image of few channels before a
      tensor-core stem, GB/s of the kernel that pads such an image's channels when it comes in
      channels_last), bytes = the image read and written: a 3-channel row converts far below copy
      bandwidth (H100, 32x3x224x224 bf16: 72-80 µs and 17-19 µs). CUDA-core stems (fewer taps) read
      NCHW data as it is: no conversion. Empty: by bandwidth, as any conv's conversions;
    - outer_reduction: how many times the vectorised memory time a planned reduction over the
      spatial dims of a channels_last image takes (a squeeze-excite mean fused with its BatchNorm
      and activation: the channels are the innermost dim, so each program walks H x W down a
      column); measured on fuselint's own kernel (H100: 28.1 µs where the same kernel on NCHW data,
      a row reduction, takes 21.0). 0: at the vectorised rate;
    - stem: (TFLOP/s of cuDNN's CUDA-core kernels on NCHW data, the same on channels_last data,
      TFLOP/s of its tensor-core kernels) reached by dense convolutions with few input channels
      (an image's 3), counting the work of output channels rounded up to 32: cuDNN runs those
      with fewer than 32 taps (3x3, 4x4) on CUDA cores (`implicit_convolve_sgemm`,
      `convolve_common_engine_float_NHWC`) and those with more (7x7, 16x16) on tensor cores at a
      small share of the GEMM rate; not swept but fit to the image stems measured on the H200
      (bench/results/h200-eff/pa.json, see docs/NOTES.md "pred8"). Empty: as any dense conv;
    - broadcast: how many times the vectorised kernel's time of its size a planned pointwise kernel
      takes when it reads an operand through a broadcast (fuselint's BatchNorm, squeeze-excite
      gates), as the device's measured kernels of that kind took it; not swept but fit to the
      H200's fuselint kernels (see docs/NOTES.md "pred8"). 0: at the vectorised rate."""

    gemm: tuple[tuple[int, int, int, float], ...]
    depthwise: tuple[tuple[str, int, float, float], ...]
    bandwidth: tuple[tuple[float, float], ...]
    batch_norm: tuple[tuple[str, int, float, float], ...] = ()
    dense_conv: tuple[tuple[int, int, int, int, int, float], ...] = ()
    layer_norm: tuple[float, ...] = ()
    strided: tuple[float, ...] = ()
    attention: float = 0.0
    stem: tuple[float, ...] = ()
    broadcast: float = 0.0
    attention_causal: float = 0.0
    max_pool: tuple[float, ...] = ()
    stem_copy: tuple[float, ...] = ()
    outer_reduction: float = 0.0

    @functools.cached_property
    def _gemm_grid(self) -> tuple[dict, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        rates = {(a, b, c): r for a, b, c, r in self.gemm}
        axes = (tuple(sorted({key[i] for key in rates})) for i in range(3))
        return (rates, *axes)

    def gemm_tflops(self, m: float, n: float, k: float) -> float:
        """The measured rate at (m, n, k): trilinear in log space over the grid, clamped."""
        rates, ms, ns, ks = self._gemm_grid
        (i, fi), (j, fj), (q, fq) = _cell(m, ms), _cell(n, ns), _cell(k, ks)
        log_rate = 0.0
        for di, wi in ((0, 1 - fi), (1, fi)):
            for dj, wj in ((0, 1 - fj), (1, fj)):
                for dq, wq in ((0, 1 - fq), (1, fq)):
                    log_rate += wi * wj * wq * math.log(rates[(ms[i + di], ns[j + dj], ks[q + dq])])
        return math.exp(log_rate)

    def depthwise_tflops(self, layout: str, k: int, flops: float) -> float | None:
        """The measured rate of a depthwise convolution: the nearest kernel size swept in that
        layout, interpolated over the work done; None when none was swept."""
        mine = [(kk, f, r) for lay, kk, f, r in self.depthwise if lay == layout]
        if not mine:
            return None
        near = min({kk for kk, _f, _r in mine}, key=lambda kk: (abs(kk - k), kk))
        return _log_interp(flops, sorted((f, r) for kk, f, r in mine if kk == near))

    def bandwidth_gbs(self, nbytes: float) -> float:
        return _log_interp(nbytes, sorted(self.bandwidth))

    def batch_norm_gbs(self, layout: str, hw: int, nbytes: float) -> float | None:
        """The rate of eager inference BatchNorm: the nearest image size swept in that layout,
        interpolated over the bytes moved; None when none was swept."""
        mine = [(h, b, g) for lay, h, b, g in self.batch_norm if lay == layout]
        if not mine or hw < 1:
            return None
        near = min({h for h, _b, _g in mine}, key=lambda h: (abs(math.log(h / hw)), h))
        points: dict[float, list[float]] = {}
        for h, b, g in mine:
            if h == near:
                points.setdefault(b, []).append(g)
        # one rate per size: the geometric mean of the channel counts swept at that size
        return _log_interp(nbytes, sorted((b, math.prod(gs) ** (1 / len(gs))) for b, gs in points.items()))

    def nearest_dense_conv(self, k: int, cin: float, cout: float, hw: float) -> tuple | None:
        """The swept dense convolution nearest to one of k x k taps (1x1 apart from the rest), Cin,
        Cout and output size hw: nearest in log channels and log size; None when none was swept."""
        mine = [r for r in self.dense_conv if (r[0] == 1) == (k == 1)]
        if not mine or min(cin, cout, hw) <= 0:
            return None

        def distance(r: tuple) -> tuple:
            d = sum(math.log(a / b) ** 2 for a, b in ((r[1], cin), (r[2], cout), (r[3], hw)))
            return (d, abs(r[0] - k), r)

        return min(mine, key=distance)

    @staticmethod
    def from_sweep(sweep: dict) -> Efficiency:
        """From `bench/calibrate.py --efficiency`'s JSON."""
        depthwise = [
            (layout, k, 2.0 * batch * hw * hw * cout * k * k, rate)
            for batch, cin, cout, k, hw, groups, layout, _us, rate in sweep["conv"]
            if groups == cin and cin > 1
        ]
        return Efficiency(
            gemm=tuple(tuple(r) for r in sweep["gemm"]),
            depthwise=tuple(sorted(depthwise)),
            bandwidth=tuple(tuple(r) for r in sweep["bandwidth"]),
            batch_norm=tuple(
                sorted(
                    (layout, hw * hw, moved, gbs)
                    for layout, _c, hw, moved, gbs in sweep.get("batch_norm", [])
                )
            ),
            dense_conv=tuple(
                sorted(
                    (k, cin, cout, hw, batch, us)
                    for batch, cin, cout, k, hw, groups, layout, us, _rate in sweep["conv"]
                    if groups == 1 and layout == "channels_last"
                )
            ),
        )


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth_gbs: float  # achievable DRAM bandwidth, GB/s of bytes read + written
    fp32_tflops: float  # dense FP32 (CUDA cores; PyTorch keeps TF32 off for matmul by default)
    half_tflops: float  # dense FP16/BF16 tensor cores
    launch_us: float  # cost of one kernel launch in an eager stream of small ops
    source: str  # where the numbers come from
    # rates measured at the sizes models run (None: every kernel at the peak rates above)
    efficiency: Efficiency | None = field(default=None, compare=False, repr=False)

    def tflops(self, dtype: str) -> float:
        return self.half_tflops if dtype in ("float16", "bfloat16") else self.fp32_tflops

    def time_us(
        self,
        nbytes: float,
        flops: float = 0.0,
        dtype: str = "float32",
        launches: float = 1,
        compute_us: float | None = None,
        memory_us: float | None = None,
    ) -> float:
        """Roofline time of kernels moving nbytes and doing flops (or taking compute_us of math and
        memory_us of memory traffic, where the caller priced them by shape), plus their launches."""
        compute = flops / (self.tflops(dtype) * 1e6) if compute_us is None else compute_us
        memory = self.memory_us(nbytes, launches) if memory_us is None else memory_us
        return max(memory, compute) + launches * self.launch_us

    def memory_us(self, nbytes: float, launches: float = 1) -> float:
        """Time to move nbytes in `launches` kernels: at the bandwidth measured for kernels of
        that size where the table has it (small kernels do not reach the 1 GiB copy's rate),
        less the launch that `time_us` adds; never faster than the peak bandwidth."""
        peak = nbytes / (self.bandwidth_gbs * 1e3)  # GB/s -> bytes per us
        if self.efficiency is None or nbytes <= 0:
            return peak
        each = nbytes / max(launches, 1)
        swept = each / (self.efficiency.bandwidth_gbs(each) * 1e3) - self.launch_us
        return max(peak, swept * max(launches, 1))

    def _at_rate(self, flops: float, tflops: float, peak: float) -> float:
        """Time of flops at a swept rate (which includes the kernel's launch, added by
        time_us), never faster than the peak rate."""
        return max(flops / (peak * 1e6), flops / (tflops * 1e6) - self.launch_us)

    def _at_gbs(self, nbytes: float, gbs: float) -> float:
        """Time to move nbytes at a measured rate (which includes the kernel's launch, added by
        time_us), never faster than the peak bandwidth."""
        return max(nbytes / (self.bandwidth_gbs * 1e3), nbytes / (gbs * 1e3) - self.launch_us)

    def gemm_us(self, m: float, n: float, k: float, dtype: str) -> float:
        """Math time of an (m x k) @ (k x n) matmul: at the rate swept for its shape (scaled to
        dtype's peak: the sweep is half precision), else at the peak rate."""
        peak = self.tflops(dtype)
        flops = 2.0 * m * n * k
        if self.efficiency is None:
            return flops / (peak * 1e6)
        rate = self.efficiency.gemm_tflops(m, n, k) * peak / self.half_tflops
        return self._at_rate(flops, rate, peak)

    def conv_us(self, m: float, cin: float, cout: float, taps: int, hw: float, dtype: str) -> float:
        """Math time of a dense convolution run as an implicit GEMM (M = batch x output pixels,
        N = cout, K = cin x taps): that GEMM's time, scaled by how the nearest swept convolution
        compared with its own GEMM (time as measured, with its launch, over the GEMM's), so that
        the swept shapes are priced at their measured time. Without a conv sweep: the GEMM's."""
        gemm = self.gemm_us(m, cout, cin * taps, dtype)
        near = (
            self.efficiency.nearest_dense_conv(round(math.sqrt(taps)), cin, cout, hw)
            if self.efficiency
            else None
        )
        if near is None:
            return gemm
        k, c_in, c_out, size, batch, us = near
        swept = self.gemm_us(batch * size * size, c_out, c_in * k * k, "bfloat16") + self.launch_us
        peak = 2.0 * m * cout * cin * taps / (self.tflops(dtype) * 1e6)
        return max(peak, (gemm + self.launch_us) * us / swept - self.launch_us)

    def stem_us(self, m: float, cin: float, cout: float, taps: int, layout: str) -> float | None:
        """Math time of a dense convolution over an image of few channels (cin <= STEM_CHANNELS,
        more than one tap) at the rate the table holds for the kernel family cuDNN picks for its
        tap count (Efficiency.stem), its output channels rounded up to a 32-wide tile (None: not
        in the table, or not such a convolution)."""
        eff = self.efficiency
        family = stem_family(cin, taps)
        if eff is None or len(eff.stem) != 3 or family is None:
            return None
        work = 2.0 * m * 32 * math.ceil(cout / 32) * cin * taps
        if family == "tensor-core":
            return self._at_rate(work, eff.stem[2], self.half_tflops)
        return self._at_rate(work, eff.stem[0 if layout == "contiguous" else 1], self.fp32_tflops)

    def stem_copy_us(self, nbytes: float, padding: bool = False) -> float | None:
        """Memory time of cuDNN's conversion (or, `padding`, its channel padding) of an image of few
        channels before a tensor-core stem, moving nbytes, less the launch time_us adds (None: not
        in the table)."""
        if self.efficiency is None or len(self.efficiency.stem_copy) != 2:
            return None
        gbs = self.efficiency.stem_copy[1 if padding else 0]
        return self._at_gbs(nbytes, gbs)

    def outer_reduction_us(self, nbytes: float, launches: float = 1) -> float | None:
        """Memory time of a planned reduction over a channels_last image's spatial dims: memory_us
        scaled by the table's factor for them (None: not in the table)."""
        if self.efficiency is None or not self.efficiency.outer_reduction:
            return None
        return self.memory_us(nbytes, launches) * self.efficiency.outer_reduction

    def broadcast_us(self, nbytes: float, launches: float = 1) -> float | None:
        """Memory time of planned pointwise kernels that read an operand through a broadcast:
        memory_us scaled by the table's factor for them (None: not in the table)."""
        if self.efficiency is None or not self.efficiency.broadcast:
            return None
        return self.memory_us(nbytes, launches) * self.efficiency.broadcast

    def batch_norm_us(self, nbytes: float, layout: str, hw: int) -> float | None:
        """Memory time of eager inference BatchNorm at the rate swept for its layout and image size,
        less the launch time_us adds (None: no sweep)."""
        gbs = self.efficiency.batch_norm_gbs(layout, hw, nbytes) if self.efficiency else None
        if gbs is None:
            return None
        return self._at_gbs(nbytes, gbs)

    def layer_norm_us(self, nbytes: float, rows: int, width: int) -> float | None:
        """Memory time of eager LayerNorm over `rows` rows of `width` elements, at the per-row and
        per-element cost the table holds, less the launch time_us adds (None: not in the table)."""
        if self.efficiency is None or len(self.efficiency.layer_norm) != 2:
            return None
        per_row, per_element = self.efficiency.layer_norm
        fit = rows * (per_row + width * per_element) / 1e3
        return max(nbytes / (self.bandwidth_gbs * 1e3), fit - self.launch_us)

    def strided_us(self, nbytes: float, cat: bool = False, permuted: bool = False) -> float | None:
        """Memory time of an eager elementwise (or `cat`) kernel that PyTorch runs unvectorised (one
        with a permuted operand at that rate where the table has one), at the rate the table holds
        for it, less the launch time_us adds (None: not in the table)."""
        rates = self.efficiency.strided if self.efficiency else ()
        if len(rates) not in (2, 3):
            return None
        gbs = rates[1] if cat else rates[2] if permuted and len(rates) == 3 else rates[0]
        return self._at_gbs(nbytes, gbs)

    def max_pool_us(self, nbytes: float, layout: str) -> float | None:
        """Memory time of PyTorch's eager max-pool kernel for its layout moving nbytes (input read,
        output written), less the launch time_us adds (None: not in the table)."""
        if self.efficiency is None or len(self.efficiency.max_pool) != 2:
            return None
        gbs = self.efficiency.max_pool[0 if layout == "contiguous" else 1]
        return self._at_gbs(nbytes, gbs)

    def depthwise_us(self, flops: float, k: int, layout: str) -> float | None:
        """Math time of a depthwise convolution at the rate swept for its layout and kernel size
        (None: no sweep; the caller prices it on the roofline)."""
        rate = self.efficiency.depthwise_tflops(layout, k, flops) if self.efficiency else None
        return None if rate is None else self._at_rate(flops, rate, self.fp32_tflops)


# Input channels up to which a dense convolution is an image stem (Device.stem_us), and the tap
# count from which cuDNN runs one on tensor cores: measured stems of 3 channels with 9 and 16
# taps ran CUDA-core kernels, those with 49 and 256 tensor-core ones (bench/results/h200-eff).
STEM_CHANNELS = 4
STEM_TENSOR_CORE_TAPS = 32


def stem_family(cin: float, taps: int) -> str | None:
    """ "tensor-core" or "cuda-core": the cuDNN kernel family of a dense convolution over an image
    of few channels (cin <= STEM_CHANNELS, more than one tap) by its tap count; None for any other
    convolution."""
    if cin > STEM_CHANNELS or taps <= 1:
        return None
    return "tensor-core" if taps >= STEM_TENSOR_CORE_TAPS else "cuda-core"


H200 = Device(
    "H200",
    bandwidth_gbs=4200.0,
    fp32_tflops=67.0,
    half_tflops=989.0,
    launch_us=4.0,
    source="measured copy 4140-4300 GB/s and ~4 us per tiny eager op (torch 2.11); TFLOPS: datasheet",
)
H100_SXM = Device(
    "H100 SXM",
    bandwidth_gbs=3350.0,
    fp32_tflops=67.0,
    half_tflops=989.0,
    launch_us=4.0,
    source="datasheet (HBM3 3.35 TB/s, FP32 67, BF16 989 dense TFLOPS); launch cost as measured on H200",
)
A100_80GB = Device(
    "A100 80GB",
    bandwidth_gbs=2039.0,
    fp32_tflops=19.5,
    half_tflops=312.0,
    launch_us=4.0,
    source="datasheet (HBM2e 2039 GB/s, FP32 19.5, BF16 312 dense TFLOPS); launch cost as measured on H200",
)
L4 = Device(
    "L4",
    bandwidth_gbs=300.0,
    fp32_tflops=30.3,
    half_tflops=121.0,
    launch_us=4.0,
    source="datasheet (GDDR6 300 GB/s, FP32 30.3, BF16 121 dense TFLOPS); launch cost as measured on H200",
)

DEVICES = {d.name: d for d in (H200, H100_SXM, A100_80GB, L4)}
# Tables measured on real GPUs by bench/calibrate.py: `--target H100-measured`, `H200-measured`.
MEASURED = Path(__file__).parent / "measured"
DEFAULT = H200


def device(name: str) -> Device:
    """Look a device up by name, forgiving case and spaces ("h100", "a100-80gb"), or read a
    device table written by `bench/calibrate.py` when `name` is the path of a .json file."""
    if name.endswith(".json"):
        return device_from_file(Path(name))
    key = name.lower().replace("-", " ").replace("_", " ")
    if key.endswith(" measured") and (MEASURED / f"{key.split()[0]}.json").is_file():
        return device_from_file(MEASURED / f"{key.split()[0]}.json")
    for d in DEVICES.values():
        if d.name.lower() == key or d.name.lower().split()[0] == key:
            return d
    measured = ", ".join(f"{p.stem.upper()}-measured" for p in sorted(MEASURED.glob("*.json")))
    raise KeyError(
        f"unknown device {name!r}; known: {', '.join(DEVICES)}, {measured}, or a table's .json path"
    )


def calibrate(
    base: Device,
    *,
    copy_bytes: float | None = None,
    copy_us: float | None = None,
    launch_us: float | None = None,
    name: str | None = None,
) -> Device:
    """A Device with bandwidth (from a measured copy moving copy_bytes, read + written, in
    copy_us) and launch cost replaced by measured values; the rest kept from `base`."""
    changes: dict = {"source": f"calibrated from measurement (base: {base.name})"}
    if copy_bytes is not None and copy_us is not None:
        if copy_us <= 0 or copy_bytes <= 0:
            raise ValueError("a copy measurement needs positive bytes and time")
        changes["bandwidth_gbs"] = copy_bytes / copy_us / 1e3
    if launch_us is not None:
        if launch_us < 0:
            raise ValueError("launch cost cannot be negative")
        changes["launch_us"] = launch_us
    if name is not None:
        changes["name"] = name
    return replace(base, **changes)


def device_to_json(d: Device) -> str:
    data = asdict(d)
    if d.efficiency is None:
        del data["efficiency"]
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def device_from_file(path: Path) -> Device:
    """A device table measured on a real GPU (`bench/calibrate.py`); KeyError names what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KeyError(f"{path}: cannot read the device table: {exc}") from None
    names = {f.name for f in fields(Device)} - {"efficiency"}
    if not isinstance(data, dict) or set(data) - {"efficiency"} != names:
        raise KeyError(
            f"{path}: a device table has exactly the keys {', '.join(sorted(names))} (and optionally efficiency)"
        )
    numbers = names - {"name", "source"}
    if not all(isinstance(data[k], (int, float)) and data[k] >= 0 for k in numbers):
        raise KeyError(f"{path}: {', '.join(sorted(numbers))} must be non-negative numbers")
    swept = data.pop("efficiency", None)
    try:
        efficiency = _efficiency(swept) if swept is not None else None
    except (TypeError, ValueError, KeyError) as exc:
        raise KeyError(f"{path}: efficiency: {exc}") from None
    return Device(**data, efficiency=efficiency)


def _efficiency(data: dict) -> Efficiency:
    """An Efficiency from a device table's `efficiency` entry (as device_to_json writes it)."""
    eff = Efficiency(
        gemm=tuple((int(m), int(n), int(k), float(r)) for m, n, k, r in data["gemm"]),
        depthwise=tuple((str(lay), int(k), float(f), float(r)) for lay, k, f, r in data["depthwise"]),
        bandwidth=tuple((float(b), float(g)) for b, g in data["bandwidth"]),
        batch_norm=tuple(
            (str(lay), int(h), float(b), float(g)) for lay, h, b, g in data.get("batch_norm", [])
        ),
        dense_conv=tuple(
            (int(k), int(ci), int(co), int(hw), int(b), float(us))
            for k, ci, co, hw, b, us in data.get("dense_conv", [])
        ),
        layer_norm=tuple(float(v) for v in data.get("layer_norm", [])),
        strided=tuple(float(v) for v in data.get("strided", [])),
        attention=float(data.get("attention", 0.0)),
        stem=tuple(float(v) for v in data.get("stem", [])),
        broadcast=float(data.get("broadcast", 0.0)),
        attention_causal=float(data.get("attention_causal", 0.0)),
        max_pool=tuple(float(v) for v in data.get("max_pool", [])),
        stem_copy=tuple(float(v) for v in data.get("stem_copy", [])),
        outer_reduction=float(data.get("outer_reduction", 0.0)),
    )
    rates = [r for *_x, r in eff.gemm] + [r for *_x, r in eff.depthwise] + [g for _b, g in eff.bandwidth]
    rates += [g for *_x, g in eff.batch_norm] + [us for *_x, us in eff.dense_conv] + list(eff.layer_norm)
    rates += list(eff.strided) + list(eff.stem) + list(eff.max_pool) + list(eff.stem_copy)
    if (eff.broadcast and eff.broadcast < 1) or (eff.outer_reduction and eff.outer_reduction < 1):
        raise ValueError(
            "broadcast and outer_reduction are factors of at least 1 on the vectorised time (0: none)"
        )
    if not (0 <= eff.attention <= 1 and 0 <= eff.attention_causal <= 1):
        raise ValueError("attention and attention_causal are fractions of half_tflops (0: the default)")
    if (
        len(eff.strided) not in (0, 2, 3)
        or len(eff.max_pool) not in (0, 2)
        or len(eff.stem_copy) not in (0, 2)
    ):
        raise ValueError("strided holds 2 or 3 rates, max_pool and stem_copy 2 (or none)")
    if not eff.gemm or not eff.bandwidth or min(rates) <= 0:
        raise ValueError("needs gemm and bandwidth rows with positive rates")
    return eff
