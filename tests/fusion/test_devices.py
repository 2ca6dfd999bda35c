"""Device tables: the built-in ones, the ones measured by bench/calibrate.py, and a user's file."""

from __future__ import annotations

import json

import pytest

from fuselint.fusion.devices import H200, device, device_from_file, device_to_json


def test_measured_tables_ship_with_the_package():
    for name, bandwidth in (("H100-measured", 3003.7), ("h200-measured", 4251.7)):
        d = device(name)
        assert d.bandwidth_gbs == bandwidth and "bench/calibrate.py" in d.source
        assert d.half_tflops > d.fp32_tflops > 0 and d.launch_us > 0


def test_a_table_written_by_calibrate_is_read_back(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(device_to_json(H200))
    assert device(str(path)) == H200


@pytest.mark.parametrize(
    "text,problem",
    [
        ("{not json", "cannot read"),
        (json.dumps({"name": "X"}), "exactly the keys"),
        (json.dumps({**json.loads(device_to_json(H200)), "launch_us": -1}), "non-negative"),
    ],
)
def test_a_bad_table_is_named(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(KeyError, match=problem):
        device_from_file(path)


def _rejects(tmp_path, d, key: str, value) -> None:
    """d's table with efficiency[key] set to `value` fails to load, naming the key."""
    data = json.loads(device_to_json(d))
    data["efficiency"][key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(KeyError, match=key):
        device_from_file(path)


def test_an_unknown_name_lists_what_is_known():
    with pytest.raises(KeyError, match="H200-measured"):
        device("Z9000")


def test_calibrate_curves_time_the_suites_shapes(monkeypatch):
    # bench/calibrate.py --curves on a CPU with a stand-in timer (the GPU run uses do_bench):
    # every suite matmul shape and elementwise size is timed, with the rates worked out
    import importlib.util
    from pathlib import Path

    import torch

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("fuselint_bench_calibrate", root / "bench" / "calibrate.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    monkeypatch.setattr(cal, "SUITE_MATMULS", ((64, 32, 16), (128, 64, 32)))
    monkeypatch.setattr(cal, "ELEMENTWISE_MB", (1, 2))
    calls = []

    def timer(fn):
        calls.append(fn())
        return 0.5  # ms

    out = cal.curves("cpu", torch.float32, timer)
    assert [r[:3] for r in out["matmul"]] == [[64, 32, 16], [128, 64, 32]]
    assert out["matmul"][1][3] == 500.0 and out["matmul"][1][4] == round(2 * 128 * 64 * 32 / 500 / 1e6, 1)
    assert calls[1].shape == (128, 64)  # the timed function is the matmul itself
    assert [r[0] for r in out["elementwise"]] == [1.05, 2.1]  # MB read + written
    assert out["elementwise"][0][2] == round(1.05e6 / 500 / 1e3, 1)


def _swept() -> dict:
    """A small sweep as `bench/calibrate.py --efficiency` writes it."""
    gemm = [
        [m, n, k, 100.0 if min(m, n, k) >= 1024 else 10.0]
        for m in (256, 4096)
        for n in (64, 1024)
        for k in (64, 1024)
    ]
    conv = [
        [32, 64, 64, 3, 56, 64, "channels_last", 12.8, 9.0],
        [32, 64, 64, 3, 56, 64, "contiguous", 63.0, 1.8],
        [32, 64, 64, 7, 56, 64, "channels_last", 49.2, 12.8],
        [32, 64, 64, 3, 56, 1, "channels_last", 23.8, 310.0],  # dense: not a depthwise row
    ]
    return {"gemm": gemm, "conv": conv, "bandwidth": [[1 << 16, 70.0], [1 << 30, 4200.0]]}


def test_efficiency_interpolates_the_sweep_and_clamps_outside_it():
    from fuselint.fusion.devices import Efficiency

    eff = Efficiency.from_sweep(_swept())
    assert eff.gemm_tflops(4096, 1024, 1024) == pytest.approx(100.0)
    assert eff.gemm_tflops(256, 64, 64) == pytest.approx(10.0)
    assert eff.gemm_tflops(1 << 20, 8192, 8192) == pytest.approx(100.0)  # past the grid: its edge
    assert 10.0 < eff.gemm_tflops(4096, 1024, 256) < 100.0
    # depthwise: by layout and the nearest kernel size swept; dense convolutions are not in it
    assert [row[:2] for row in eff.depthwise] == [
        ("channels_last", 3),
        ("channels_last", 7),
        ("contiguous", 3),
    ]
    assert eff.depthwise_tflops("contiguous", 5, 1e9) == pytest.approx(1.8)
    assert eff.depthwise_tflops("channels_last", 6, 1e9) == pytest.approx(12.8)
    assert eff.depthwise_tflops("channels_first", 3, 1e9) is None
    assert eff.bandwidth_gbs(1 << 10) == pytest.approx(70.0)
    assert 70.0 < eff.bandwidth_gbs(1 << 23) < 4200.0


def test_a_table_with_an_efficiency_sweep_prices_small_kernels_slower(tmp_path):
    from dataclasses import replace

    from fuselint.fusion.devices import Efficiency

    swept = replace(H200, launch_us=0.5, efficiency=Efficiency.from_sweep(_swept()))
    path = tmp_path / "swept.json"
    path.write_text(device_to_json(swept))
    back = device_from_file(path)
    assert back.efficiency == swept.efficiency
    # a small GEMM runs far below the peak rate; a big one at its swept rate, never above peak
    assert back.gemm_us(4096, 64, 64, "bfloat16") > 10 * H200.gemm_us(4096, 64, 64, "bfloat16")
    big = 2.0 * 8192**3
    assert back.gemm_us(8192, 8192, 8192, "bfloat16") == pytest.approx(big / 100e6 - back.launch_us)
    # a small kernel moves its bytes at the rate swept for its size, less the launch time_us adds
    assert H200.memory_us(1 << 20) < back.memory_us(1 << 20)
    assert back.memory_us(1 << 40) == pytest.approx(H200.memory_us(1 << 40))  # big: peak bandwidth
    # PyTorch's NCHW depthwise kernel is slower than cuDNN's channels_last one
    assert back.depthwise_us(1e9, 3, "contiguous") > 4 * back.depthwise_us(1e9, 3, "channels_last")
    assert H200.depthwise_us(1e9, 3, "contiguous") is None
    bad = json.loads(device_to_json(swept))
    bad["efficiency"]["gemm"] = []
    path.write_text(json.dumps(bad))
    with pytest.raises(KeyError, match="efficiency"):
        device_from_file(path)


@pytest.mark.parametrize("name", ["H100-measured", "H200-measured"])
def test_the_measured_tables_carry_their_sweeps(name):
    d = device(name)
    eff = d.efficiency
    assert eff is not None and len(eff.gemm) >= 100 and eff.depthwise and eff.batch_norm
    # the sweep's own largest GEMM runs near the 8192^3 matmul's rate; a 64-wide one far below
    assert eff.gemm_tflops(65536, 4096, 4096) > 0.9 * d.half_tflops
    assert eff.gemm_tflops(4096, 64, 64) < 0.05 * d.half_tflops
    # PyTorch's NCHW depthwise kernel is the slowest way to run one; eager NCHW BatchNorm stays
    # below the copy bandwidth
    assert eff.depthwise_tflops("contiguous", 3, 1e9) < eff.depthwise_tflops("channels_last", 3, 1e9)
    assert eff.batch_norm_gbs("contiguous", 56 * 56, 5e7) < d.bandwidth_gbs
    # dense convolutions with few channels run well below the GEMM of their implicit dims
    m = 32 * 56 * 56
    assert d.conv_us(m, 16, 16, 9, 56, "bfloat16") > 3 * d.gemm_us(m, 16, 16 * 9, "bfloat16")
    # eager LayerNorm over ConvNeXt's short rows runs far below the copy bandwidth
    moved = 4 * 100352 * 96
    assert d.layer_norm_us(moved, 100352, 96) > 5 * moved / (d.bandwidth_gbs * 1e3)


def test_dense_convolutions_are_priced_at_the_swept_conv_time():
    from dataclasses import replace

    from fuselint.fusion.devices import Efficiency

    d = replace(H200, launch_us=0.5, efficiency=Efficiency.from_sweep(_swept()))
    m = 32 * 56 * 56
    # the swept shape itself (64 -> 64 channels, 3x3, 56x56): at its measured time, with its launch
    assert d.conv_us(m, 64, 64, 9, 56, "bfloat16") + d.launch_us == pytest.approx(23.8)
    # a shape near it: its GEMM scaled as the swept conv compared with its own GEMM
    ratio = 23.8 / (d.gemm_us(m, 64, 64 * 9, "bfloat16") + d.launch_us)
    small = 32 * 28 * 28
    expected = (d.gemm_us(small, 128, 64 * 9, "bfloat16") + d.launch_us) * ratio - d.launch_us
    assert d.conv_us(small, 64, 128, 9, 28, "bfloat16") == pytest.approx(expected)
    # no 1x1 convolution swept: a 1x1 one is its GEMM
    assert d.conv_us(m, 64, 64, 1, 56, "bfloat16") == d.gemm_us(m, 64, 64, "bfloat16")


def test_eager_layer_norm_pays_per_row_and_per_element():
    from dataclasses import replace

    from fuselint.fusion.devices import Efficiency

    eff = replace(Efficiency.from_sweep(_swept()), layer_norm=(1.0, 0.002))
    d = replace(H200, launch_us=0.5, efficiency=eff)
    # 100352 rows of 96 (ConvNeXt's first stage): (1 + 96 * 0.002) ns a row, less the launch
    assert d.layer_norm_us(4 * 100352 * 96, 100352, 96) == pytest.approx(100352 * 1.192 / 1e3 - 0.5)
    # the same elements in rows 8x as long cost less: fewer rows
    assert d.layer_norm_us(4 * 100352 * 96, 100352 // 8, 96 * 8) < d.layer_norm_us(
        4 * 100352 * 96, 100352, 96
    )
    # never faster than the peak bandwidth; no entry, no price
    assert d.layer_norm_us(1e12, 1, 1) == pytest.approx(1e12 / (H200.bandwidth_gbs * 1e3))
    assert replace(d, efficiency=Efficiency.from_sweep(_swept())).layer_norm_us(1e6, 10, 10) is None


def test_the_h200_table_carries_its_unswept_rates_and_rejects_bad_ones(tmp_path):
    # rates fit to the H200's model kernels (docs/NOTES.md, pred7): PyTorch's unvectorised
    # elementwise and cat kernels, and fused attention's share of the dense bf16 rate
    h200 = device("H200-measured")
    assert h200.efficiency.strided == (1300.0, 600.0) and h200.efficiency.attention == 0.38
    assert h200.strided_us(1e8) > 2 * h200.memory_us(1e8)  # 100 MB: several times the vectorised time
    assert h200.strided_us(1e8, cat=True) > h200.strided_us(1e8)
    assert device("H100-measured").efficiency.attention == 0.46  # measured there (pred9)
    _rejects(tmp_path, h200, "attention", 1.5)


def test_image_stems_are_priced_by_the_kernel_family_their_tap_count_gets():
    # stems with 3 input channels measured on the H200 (bench/results/h200-eff/pa.json, µs):
    # 3x3 runs on CUDA cores, 7x7 and 16x16 on tensor cores far below the GEMM rate
    d = device("H200-measured")

    def us(m, cout, taps, layout="contiguous"):
        return d.stem_us(m, 3, cout, taps, layout) + d.launch_us

    assert us(64 * 112 * 112, 32, 9) == pytest.approx(107.8, rel=0.15)  # EfficientNet-B0, eager
    assert us(64 * 112 * 112, 32, 9, "channels_last") == pytest.approx(124.6, rel=0.15)  # compiled
    assert us(32 * 112 * 112, 64, 49) == pytest.approx(195.1, rel=0.15)  # ResNet-50's 7x7
    assert us(32 * 14 * 14, 768, 256) == pytest.approx(232.3, rel=0.15)  # ViT-B/16's patches
    # a 16-wide output fills a 32-wide tile as a 32-wide one does (MobileNetV3: 105.0 vs 107.8)
    assert us(64 * 112 * 112, 16, 9) == us(64 * 112 * 112, 32, 9)
    assert us(64 * 112 * 112, 32, 9) > 5 * d.gemm_us(64 * 112 * 112, 32, 27, "bfloat16")
    # more input channels, a 1x1 kernel, or a table without the entry: not a stem
    assert d.stem_us(64 * 112 * 112, 16, 32, 9, "contiguous") is None
    assert d.stem_us(64 * 112 * 112, 3, 32, 1, "contiguous") is None
    from dataclasses import replace

    assert replace(d, efficiency=replace(d.efficiency, stem=())).stem_us(1e6, 3, 32, 9, "contiguous") is None


def test_broadcast_reading_kernels_take_the_tables_factor_on_the_vectorised_time(tmp_path):
    from dataclasses import replace

    d = device("H200-measured")
    assert d.efficiency.broadcast == pytest.approx(1.13)
    assert d.broadcast_us(1e8) == pytest.approx(1.13 * d.memory_us(1e8))
    assert replace(d, efficiency=replace(d.efficiency, broadcast=0.0)).broadcast_us(1e8) is None
    _rejects(tmp_path, d, "broadcast", 0.5)


def test_the_h100_table_carries_the_rates_kernel_rates_measured(tmp_path):
    # bench/results/h100-s4/kernel_rates.json (H100, torch 2.11): 3-channel stems by kernel
    # family, PyTorch's unvectorised kernels by operand kind, flash attention with and without
    # is_causal, max-pool by layout, fuselint's BatchNorm kernels over the vectorised price
    d = device("H100-measured")
    eff = d.efficiency
    assert eff.stem == (14.3, 12.1, 34.8) and eff.broadcast == pytest.approx(1.09)
    assert eff.outer_reduction == pytest.approx(1.4) and d.outer_reduction_us(1e8) == pytest.approx(
        1.4 * d.memory_us(1e8)
    )
    # a permuted operand (717-824 GB/s) is slower than a broadcast one (1311-1696) or a cat (838-964)
    assert eff.strided == (1426.0, 906.0, 787.0)
    assert d.strided_us(1e8, permuted=True) > d.strided_us(1e8, cat=True) > d.strided_us(1e8)
    assert (eff.attention, eff.attention_causal) == (0.46, 0.34)
    # a 3-channel image converted for a tensor-core stem: 71.7 (ResNet) and 79.8 µs (ViT); padded 17.3, 18.9
    image = 2 * 32 * 3 * 224 * 224 * 2
    assert eff.stem_copy == (255.0, 1066.0)
    assert d.stem_copy_us(image) + d.launch_us == pytest.approx(75.5, rel=0.07)
    assert d.stem_copy_us(image, padding=True) + d.launch_us == pytest.approx(18.1, rel=0.07)
    # ResNet's 3x3/2 max-pool over 32x64x112x112 bf16: 106.35 µs NCHW, 119.39 channels_last
    moved = 2 * 32 * 64 * (112 * 112 + 56 * 56)
    assert d.max_pool_us(moved, "contiguous") + d.launch_us == pytest.approx(106.35, rel=0.01)
    assert d.max_pool_us(moved, "channels_last") + d.launch_us == pytest.approx(119.39, rel=0.01)
    assert d.max_pool_us(moved, "contiguous") > 4 * d.memory_us(moved)
    # the EfficientNet stem's conv kernel: 107.7 µs NCHW, 129.4 channels_last (within the geomean's spread)
    assert d.stem_us(64 * 112 * 112, 3, 32, 9, "contiguous") + d.launch_us == pytest.approx(107.7, rel=0.15)
    assert d.stem_us(64 * 112 * 112, 3, 32, 9, "channels_last") + d.launch_us == pytest.approx(
        129.4, rel=0.15
    )
    # a table without them prices by bandwidth; two strided rates price a permuted operand as the first
    from dataclasses import replace

    bare = replace(d, efficiency=replace(eff, max_pool=(), strided=(1300.0, 600.0)))
    assert bare.max_pool_us(moved, "contiguous") is None
    assert bare.strided_us(1e8, permuted=True) == bare.strided_us(1e8)
    for key, bad in (
        ("max_pool", [600.0]),
        ("strided", [1.0]),
        ("attention_causal", 2.0),
        ("stem_copy", [1.0]),
    ):
        _rejects(tmp_path, d, key, bad)
