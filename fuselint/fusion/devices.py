"""The devices the cost model prices kernels on: memory bandwidth, compute rates, launch cost.

H200's bandwidth and launch cost are measured (KNOWLEDGE.md: device-to-device copy 4140-4300
GB/s counting bytes read + written; a tiny eager op ~4 us of GPU time). The other devices use
datasheet numbers (peak HBM/GDDR bandwidth, dense FP32 / BF16 tensor-core TFLOPS), which real
kernels reach only in part (~85-92% for a copy), and the H200's launch cost; `calibrate`
replaces them with what `verify` measures.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth_gbs: float  # achievable DRAM bandwidth, GB/s of bytes read + written
    fp32_tflops: float  # dense FP32 (CUDA cores; PyTorch keeps TF32 off for matmul by default)
    half_tflops: float  # dense FP16/BF16 tensor cores
    launch_us: float  # cost of one kernel launch in an eager stream of small ops
    source: str  # where the numbers come from

    def tflops(self, dtype: str) -> float:
        return self.half_tflops if dtype in ("float16", "bfloat16") else self.fp32_tflops

    def time_us(
        self, nbytes: float, flops: float = 0.0, dtype: str = "float32", launches: float = 1
    ) -> float:
        """Roofline time of kernels moving nbytes and doing flops, plus their launches."""
        memory = nbytes / (self.bandwidth_gbs * 1e3)  # GB/s -> bytes per us
        compute = flops / (self.tflops(dtype) * 1e6)  # TFLOP/s -> flops per us
        return max(memory, compute) + launches * self.launch_us


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
    return json.dumps(asdict(d), indent=1, sort_keys=True) + "\n"


def device_from_file(path: Path) -> Device:
    """A device table measured on a real GPU (`bench/calibrate.py`); KeyError names what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KeyError(f"{path}: cannot read the device table: {exc}") from None
    names = {f.name for f in fields(Device)}
    if not isinstance(data, dict) or set(data) != names:
        raise KeyError(f"{path}: a device table has exactly the keys {', '.join(sorted(names))}")
    numbers = names - {"name", "source"}
    if not all(isinstance(data[k], (int, float)) and data[k] >= 0 for k in numbers):
        raise KeyError(f"{path}: {', '.join(sorted(numbers))} must be non-negative numbers")
    return Device(**data)
