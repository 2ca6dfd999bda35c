"""bench/predict_accuracy.py: kernel classes of measured kernel names, measured JSONs, and a small
run of the suite (timm rows say why they are missing where timm does not import)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from bench_loader import bench_module


@pytest.fixture(scope="module")
def acc():
    return bench_module("predict_accuracy")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        # names as torch.profiler printed them on the H100 (bench/results/kernel_profile_h100.md, issue 15)
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x64x32", "conv"),
        ("conv2d_c1_k1_nhwc_specialized", "conv"),
        ("nvjet_sm90_tst_128x256_64x4_2x1_v_ssched_bz_coopA_TNN", "gemm"),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3", "gemm"),
        ("fuselint_sub_mul_add_convert_element_type_sigmoid", "other"),
        ("triton_poi_fused_convolution_0", "other"),
        ("triton_red_fused__native_batch_norm_legit_no_training_mean_mul_sigmoid_2", "other"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>(Flash_fwd_params)",
            "attention",
        ),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)", "attention"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>",
            "other",
        ),
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "other"),
    ],
)
def test_kernel_classes(acc, name, cls):
    assert acc.kernel_class(name) == cls


def _models_json(path: Path, env: str, rows: list[tuple[str, str, float]]) -> Path:
    data = {
        "env": env,
        "rows": [{"model": m, "backend": b, "train": False, "gpu_us": us, "kernels": 10} for m, b, us in rows]
        + [{"model": "gpt2", "backend": "fuselint", "train": True, "gpu_us": 1.0}],
    }
    path.write_text(json.dumps(data))
    return path


def test_measured_json_later_files_win(acc, tmp_path):
    old = _models_json(
        tmp_path / "a.json",
        "H100, torch 2.11.0",
        [
            ("gpt2", "eager", 100.0),
            ("gpt2", "fuselint", 50.0),
            ("bert", "eager", 70),
            ("bert", "fuselint", 90),
        ],
    )
    new = _models_json(
        tmp_path / "b.json", "H100, torch 2.11.0", [("gpt2", "eager", 110.0), ("gpt2", "fuselint", 55.0)]
    )
    measured, env = acc.measured_from_json([old, new])
    assert measured["gpt2"]["eager"] == 110.0 and measured["gpt2"]["fuselint"] == 55.0  # not the train row
    assert measured["bert"]["fuselint"] == 90 and measured["bert-tracemask"] == measured["bert"]
    assert env == "H100, torch 2.11.0"


def test_small_run_prices_by_class_and_reports_missing_models(acc, tmp_path, capsys):
    tf = pytest.importorskip("transformers")
    assert tf
    md, js = tmp_path / "acc.md", tmp_path / "acc.json"
    assert acc.main(["--small", "--models", "gpt2,resnet50", "--md", str(md), "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["rows"]
    gpt2 = [r for r in rows if r["model"] == "gpt2"]
    assert [r["trace"] for r in gpt2] == ["cpu", "meta"]
    for r in gpt2:  # the classes add up to the totals
        assert sum(r["eager_classes"].values()) == pytest.approx(r["eager_us"], abs=0.5)
        assert sum(r["fused_classes"].values()) == pytest.approx(r["fused_us"], abs=0.5)
        assert r["fused_classes"]["gemm"] > 0 and r["eager_launches"] > r["fused_launches"]
    assert gpt2[0]["eager_us"] == gpt2[1]["eager_us"] and gpt2[0]["fused_us"] == gpt2[1]["fused_us"]
    resnet = [r for r in rows if r["model"] == "resnet50"]
    if importlib.util.find_spec("timm") is None:
        assert [r["error"] for r in resnet] == ["timm is not installed here"] * 2
        assert "| resnet50 | cpu | timm is not installed here |" in md.read_text()
    else:
        assert all("error" not in r for r in resnet)
    assert re.search(
        r"^gpt2 +cpu +predicted +\d+ -> +\d+ µs", capsys.readouterr().out, re.M
    )  # printed as it came


def test_unknown_model_is_a_usage_error(acc, capsys):
    assert acc.main(["--small", "--models", "gpt3"]) == 2
    assert "unknown model(s) gpt3" in capsys.readouterr().err


def test_gpu_measurements_reach_every_row_and_a_later_run(acc, tmp_path, monkeypatch):
    # measure_on_gpu stands in for the GPU: its totals, counts, classes and top kernels go into
    # each row, a failed prediction's too, and --measured reads them back from the JSON
    import argparse

    import torch

    fake = {
        "eager": 300.0,
        "fuselint": 150.0,
        "measured_kernels": {"eager": 20, "fuselint": 8},
        "measured_classes": {"eager": {"gemm": 200.0, "other": 100.0}, "fuselint": {"gemm": 150.0}},
        "top_kernels": {"eager": [[200.0, 4, "nvjet_sm90"]], "fuselint": [[150.0, 4, "nvjet_sm90"]]},
    }
    monkeypatch.setattr(acc, "measure_on_gpu", lambda name, dtype: dict(fake))

    def fail(name, trace, *args):
        if trace == "meta":
            raise RuntimeError("no meta kernel")
        return {
            "model": name,
            "trace": trace,
            "eager_us": 330.0,
            "fused_us": 120.0,
            "eager_launches": 20,
            "fused_launches": 9,
            "eager_classes": {"gemm": 230.0, "other": 100.0},
            "fused_classes": {"gemm": 120.0},
            "findings": [],
            "seconds": 0.1,
        }

    monkeypatch.setattr(acc, "predict", fail)
    a = argparse.Namespace(target="H100-measured", small=False)
    rows = acc._rows_for("gpt2", ["cpu", "meta"], a, torch.bfloat16, {}, True)
    assert rows[0]["error_eager"] == 10.0 and rows[0]["error_fused"] == -20.0
    assert rows[1]["error"] == "RuntimeError: no meta kernel"
    for r in rows:
        assert r["measured_eager"] == 300.0 and r["measured_classes"] == fake["measured_classes"]
    only = acc._rows_for("gpt2", [], a, torch.bfloat16, {}, True)
    assert [r["trace"] for r in only] == ["-"] and only[0]["top_kernels"] == fake["top_kernels"]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"env": "made-up GPU", "rows": only}))
    measured, env = acc.measured_from_json([path])
    assert env == "made-up GPU"
    assert measured["gpt2"]["eager"] == 300.0 and measured["gpt2"]["measured_kernels"] == {
        "eager": 20,
        "fuselint": 8,
    }
    md = acc.markdown(rows, env, "H100", "cmd")
    assert "| gpt2 | cpu | 330 → 120 | 300 → 150 | +10% | -20% | 2.75× | 2.00× | 20/20, 9/8 | – |" in md
    assert "| gpt2 | gemm 230/200, other 100/100 | gemm 120/150 |" in md
    assert "gpt2, fuselint:\n\n       150.0  x4    nvjet_sm90" in md
    # a measurement whose predictions all failed still shows its kernel classes
    md_only = acc.markdown(only, env, "H100", "cmd")
    assert "| gpt2 | gemm 0/200, other 0/100 | gemm 0/150 |" in md_only
