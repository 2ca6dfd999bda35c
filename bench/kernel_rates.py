"""Kernel classes the cost model prices without a sweep, measured on a GPU; prints JSON.

    python bench/kernel_rates.py --out $OUT/kernel_rates.json      # one GPU, about 2-3 minutes

`bench/calibrate.py --efficiency` sweeps GEMMs, dense and depthwise convolutions, BatchNorm and
a vectorised add; the rates below were fit to the kernels of whole models instead (docs/NOTES.md,
"pred6" and "pred7") or are not priced yet, and this script measures each class on its own, with
the same timer (`calibrate.kernel_ms`: summed GPU kernel time per call, torch.profiler):
- "stem": convolutions with 3 input channels (image stems), as timm's and torchvision's models
  run them on an NCHW image, and in channels_last: µs in total and per kernel name (cuDNN pads or
  converts the image first; the conv itself runs on CUDA cores); and the max-pool after ResNet's stem;
- "unvectorised": PyTorch's elementwise kernel on broadcast or strided operands (a per-channel
  scale, a permuted residual, an fp32 row scale) and `cat` of non-contiguous halves (RoPE), beside
  the vectorised add of the same bytes: GB/s of bytes read + written (the table's `strided`);
- "gelu": GELU(erf) in bf16, G elements/s (the cost model's OPS_PER_ELEMENT for erf);
- "attention": F.scaled_dot_product_attention (bf16, no mask, causal or not) over a grid of
  sequence lengths and head dims: µs and TFLOP/s over the exact scores (the table's `attention`);
- "fuselint_bn": the fuselint backend's inference BatchNorm(+activation) kernels, channels_last and
  NCHW, and BatchNorm + SiLU + the spatial mean of a squeeze-excite block: GB/s of the image read
  and written (pred6 measured 2.0-3.3 TB/s of them in models, where plain pointwise kernels reach ~4;
  EfficientNet's 49 take 888 µs against 456 priced).
Each entry records its kernels by name so that a wrong kernel choice shows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DTYPE = torch.bfloat16
# (model, out channels, kernel, stride, padding, bias, batch): the stems of bench/models.py's suite
# and bench/predict_accuracy.py's held-out models, on 224 x 224 images
STEMS = (
    ("vit", 768, 16, 16, 0, True, 32),
    ("resnet50", 64, 7, 2, 3, False, 32),
    ("efficientnet", 32, 3, 2, 1, False, 64),
    ("mobilenetv3", 16, 3, 2, 1, False, 64),
    ("convnext", 96, 4, 4, 0, True, 32),
)
MB = (8, 32, 128)  # bytes moved by the elementwise probes, MiB
ATTENTION = ((256, 64), (197, 64), (512, 64), (1024, 64), (2048, 64), (1024, 128))  # (L, head dim)


def profile_us(fn, calls: int = 10) -> tuple[float, dict[str, float]]:
    """(summed GPU kernel µs per call, µs per call by kernel name) of fn, memsets left out."""
    from calibrate import cuda_events

    names: dict[str, float] = {}
    for e in cuda_events(fn, calls):
        if "Memset" in e.name:
            continue
        t = e.device_time if hasattr(e, "device_time") else e.cuda_time
        names[e.name[:100]] = names.get(e.name[:100], 0.0) + t / calls
    return round(sum(names.values()), 2), {
        k: round(v, 2) for k, v in sorted(names.items(), key=lambda kv: -kv[1])
    }


def stems() -> list[dict]:
    out = []
    for model, cout, k, stride, pad, bias, batch in STEMS:
        for layout in ("contiguous", "channels_last"):
            fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            conv = torch.nn.Conv2d(3, cout, k, stride, pad, bias=bias).cuda().to(DTYPE).to(memory_format=fmt)
            x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=DTYPE)  # the image as a loader gives it
            with torch.no_grad():
                us, kernels = profile_us(lambda conv=conv, x=x: conv(x))
            out.append({"model": model, "layout": layout, "cout": cout, "k": k, "stride": stride, "batch": batch,
                        "us": us, "kernels": kernels})  # fmt: skip
    for layout in (
        "contiguous",
        "channels_last",
    ):  # the max-pool after ResNet's stem (NCHW: 107 µs on the H200)
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        x = torch.randn(32, 64, 112, 112, device="cuda", dtype=DTYPE).to(memory_format=fmt)
        us, kernels = profile_us(lambda x=x: F.max_pool2d(x, 3, 2, 1))
        out.append({"model": "resnet max_pool 3x3/2", "layout": layout, "us": us, "kernels": kernels})
    return out


def _elementwise_probes(mb: int) -> dict:
    """name -> (fn, bytes read + written) of the elementwise probes moving about `mb` MiB."""
    n = (mb << 20) // 4  # bf16 elements read (= written)
    c, hw = 256, 56
    b = max(n // (c * hw * hw), 1)
    x = torch.randn(b, c, hw, hw, device="cuda", dtype=DTYPE)
    s = torch.randn(b, c, 1, 1, device="cuda", dtype=DTYPE)
    nhwc = torch.randn(b, hw, hw, c, device="cuda", dtype=DTYPE)
    rows = torch.randn(max(n // 1024, 1), 512, device="cuda", dtype=torch.float32)
    scale = torch.randn(rows.shape[0], 1, device="cuda", dtype=torch.float32)
    q = torch.randn(max(n // (16 * 1024 * 64), 1), 16, 1024, 64, device="cuda", dtype=DTYPE)
    return {
        "vectorised add": (lambda: x + x, 3 * x.numel() * 2),
        "per-channel scale x * s": (lambda: x * s, 2 * x.numel() * 2),
        "permuted residual": (lambda: nhwc.permute(0, 3, 1, 2) + x, 3 * x.numel() * 2),
        "fp32 row scale": (lambda: rows * scale, 2 * rows.numel() * 4),
        "cat of RoPE halves": (lambda: torch.cat((-q[..., 32:], q[..., :32]), dim=-1), 2 * q.numel() * 2),
    }


def unvectorised() -> list[dict]:
    """The RoPE probe runs two kernels (the neg, then the cat): its kernels say which is which."""
    out = []
    for mb in MB:
        for name, (fn, nbytes) in _elementwise_probes(mb).items():
            us, kernels = profile_us(fn)
            out.append(
                {
                    "probe": name,
                    "bytes": nbytes,
                    "us": us,
                    "gbs": round(nbytes / us / 1e3, 1),
                    "kernels": kernels,
                }
            )
    return out


def gelu() -> list[dict]:
    out = []
    for mb in (50, 200, 800):
        x = torch.randn((mb << 20) // 4, device="cuda", dtype=DTYPE)
        us, kernels = profile_us(lambda x=x: F.gelu(x))
        out.append(
            {
                "elements": x.numel(),
                "us": us,
                "g_elements_per_s": round(x.numel() / us / 1e3, 1),
                "kernels": kernels,
            }
        )
    return out


def attention() -> list[dict]:
    out = []
    for length, d in ATTENTION:
        bh = max((64 * 1024 * 1024) // (length * length), 16)
        q, k, v = (torch.randn(1, bh, length, d, device="cuda", dtype=DTYPE) for _ in range(3))
        for causal in (False, True):
            us, kernels = profile_us(
                lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c)
            )
            flops = 4 * bh * length * length * d / (2 if causal else 1)
            out.append({"batch_heads": bh, "length": length, "head_dim": d, "causal": causal, "us": us,
                        "tflops": round(flops / us / 1e6, 1), "kernels": kernels})  # fmt: skip
    return out


class _SiLUAndMean(torch.nn.Module):
    """SiLU and a squeeze-excite block's spatial mean of it: the BatchNorm + SiLU + mean kernel
    (a reduction over H and W) that EfficientNet's fused plan runs 16 times."""

    def forward(self, x):
        y = F.silu(x)
        return y, y.mean((2, 3), keepdim=True)


def fuselint_bn() -> list[dict]:
    try:
        import fuselint.backend  # noqa: F401  (registers "fuselint")
    except Exception as exc:  # triton missing: say so and go on
        return [{"error": f"{type(exc).__name__}: {exc}"[:200]}]
    out = []
    for c, hw, act in (
        (256, 56, "relu"),
        (96, 112, "silu"),
        (144, 56, "silu"),
        (512, 28, "relu"),
        (144, 56, "se"),
    ):
        for layout in ("channels_last", "contiguous"):
            fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            act_fn = {"relu": torch.nn.ReLU(), "silu": torch.nn.SiLU(), "se": _SiLUAndMean()}[act]
            model = torch.nn.Sequential(torch.nn.BatchNorm2d(c), act_fn).cuda().to(DTYPE).eval()
            x = torch.randn(32, c, hw, hw, device="cuda", dtype=DTYPE).to(memory_format=fmt)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="fuselint")
            with torch.no_grad():
                try:
                    us, kernels = profile_us(lambda compiled=compiled, x=x: compiled(x))
                except Exception as exc:
                    out.append(
                        {"c": c, "hw": hw, "layout": layout, "error": f"{type(exc).__name__}: {exc}"[:200]}
                    )
                    continue
            moved = 2 * x.numel() * 2
            out.append({"c": c, "hw": hw, "act": act, "layout": layout, "us": us, "gbs": round(moved / us / 1e3, 1),
                        "kernels": kernels})  # fmt: skip
    torch._dynamo.reset()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--only", help="comma list of: stem, unvectorised, gelu, attention, fuselint_bn")
    a = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/kernel_rates.py needs a CUDA GPU", file=sys.stderr)
        return 2
    parts = {
        "stem": stems,
        "unvectorised": unvectorised,
        "gelu": gelu,
        "attention": attention,
        "fuselint_bn": fuselint_bn,
    }
    chosen = a.only.split(",") if a.only else list(parts)
    result: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name in chosen:
        result[name] = parts[name]()
        print(f"{name}: done", file=sys.stderr, flush=True)
    text = json.dumps(result, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
