"""How close `fuselint check --entry` predictions come to measured GPU kernel time, per model.

    python bench/predict_accuracy.py --measured bench/results/models-h100.json \\
        --md bench/results/predict_accuracy-cpu.md --json bench/results/predict_accuracy-cpu.json
    python bench/predict_accuracy.py --md $OUT/predict.md --json $OUT/predict.json   # on a GPU

For each model of bench/models.py's suite (its own builders, bf16, inference: the Hugging Face
models, and the timm ones where timm imports) the predicted side traces the model on CPU and on
the meta device (`--traces`; `cuda` too on a GPU), plans it and prices eager and fused time on a
device table (default: the table measured on the GPU that the measured side ran on,
`H100-measured`). The measured side is torch.profiler's summed GPU kernel time per call under
eager and under the fuselint backend: measured here when a GPU is present, else read from
bench/models.py JSONs (`gpu_us` of their `eager` and `fuselint` rows). Error is
(predicted - measured) / measured.

Both sides are also split by kernel class (gemm, conv, attention, other: `fuselint.fusion.cost.
cost_by_class` and `kernel_class` below), and a GPU run keeps each backend's largest kernels, so
that an error can be traced to the kernels the cost model misprices. A model that cannot be built
(timm missing) or traced is one row with the reason, and the run goes on; rows are printed and
the files rewritten after every model, so a run cut short keeps what it measured; --budget skips
models that would start after that many seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from fuselint.fusion.cost import cost_by_class  # noqa: E402
from fuselint.fusion.devices import device as device_table  # noqa: E402
from fuselint.fusion.model import analyse  # noqa: E402
from fuselint.graph.capture import capture  # noqa: E402
from fuselint.graph.entry import Entry  # noqa: E402

# bench/models.py's suite, and BERT as torch 2.11's environment ran it: with an all-true boolean
# mask broadcast over keys, strides (0, 256, 1, 0), made only under compile (`bert-tracemask`,
# see TracingMask). The timm models need timm (the GPU machine has it; the CPU machines do not).
HF_SUITE = ("gpt2", "llama", "bert", "bert-tracemask", "t5enc")
TIMM_SUITE = ("resnet50", "vit", "convnext", "efficientnet", "mobilenetv3")
SUITE = HF_SUITE + TIMM_SUITE
# Models the cost model was not tuned on, to check its prices on a second package: image models
# of transformers (`hf-`, the library's default config of each) and of torchvision (`tv-`), bf16,
# 32 images of 224x224, random weights.
HOLDOUT_SUITE = (
    "hf-resnet", "hf-convnext", "hf-mobilenetv2", "hf-efficientnet", "hf-regnet",
    "tv-resnet18", "tv-mobilenet_v2", "tv-convnext_tiny", "tv-efficientnet_b0",
)  # fmt: skip
_HF_VISION = {
    "hf-resnet": ("ResNetConfig", "ResNetModel"),
    "hf-convnext": ("ConvNextConfig", "ConvNextModel"),
    "hf-mobilenetv2": ("MobileNetV2Config", "MobileNetV2Model"),
    "hf-efficientnet": ("EfficientNetConfig", "EfficientNetModel"),
    "hf-regnet": ("RegNetConfig", "RegNetModel"),
}
TRACES = ("cpu", "meta")
CLASSES = ("gemm", "conv", "attention", "other")
# what a row carries of a GPU measurement besides its two totals
_MEASURED_KEYS = ("measured_kernels", "measured_classes", "top_kernels", "measure_error")


class TracingMask(torch.nn.Module):
    """BERT given the attention mask it got under torch.compile on the GPU machine (torch 2.11):
    all true, (B, 1, S, S) bool with strides (0, S, 1, 0); in eager, no mask (transformers drops
    an all-true mask outside tracing). The installed transformers (5.23) skips the mask under
    compile too, so this wrapper recreates the measured setting."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor):
        b, s = ids.shape
        mask = None
        if torch.compiler.is_compiling():
            mask = torch.ones(s, 1, dtype=torch.bool, device=ids.device).expand(b, 1, s, s)
        return self.model(ids, attention_mask=mask)


def build(name: str, small: bool = False):
    """(model, args) of bench/models.py (or of HOLDOUT_SUITE), on CPU in float32."""
    import models

    if name in HOLDOUT_SUITE:
        torch.manual_seed(0)
        images = (torch.randn(2 if small else 32, 3, 224, 224),)
        if name.startswith("tv-"):
            import torchvision

            return getattr(torchvision.models, name[3:])(weights=None).eval(), images
        import transformers as tf

        config, model = _HF_VISION[name]
        return getattr(tf, model)(getattr(tf, config)()).eval(), images

    if name == "bert-tracemask":
        model, args = models.build("bert", small=small)
        return TracingMask(model).eval(), args
    return models.build(name, small=small)


def _entry(name: str, dtype: torch.dtype, small: bool) -> Entry:
    def factory():
        model, args = build(name, small)
        # images are cast like the weights (bench/models.py's `_to`); token ids stay integers
        return model.to(dtype), tuple(a.to(dtype) if a.is_floating_point() else a for a in args)

    return Entry(spec=f"bench/models.py:{name}", factory=factory, path=str(ROOT / "bench" / "models.py"))


def predict(name: str, trace: str, target: str, dtype: torch.dtype, small: bool = False) -> dict:
    """Predicted eager and fused µs per call of one model traced on `trace` ("cpu", "meta" or
    "cuda"), in total and by kernel class."""
    t0 = time.perf_counter()
    cap = capture(_entry(name, dtype, small), device=trace)
    table = device_table(target)
    analysis = analyse(cap, table)
    findings = sorted({f.code for f in analysis.findings})
    by_class = cost_by_class(list(analysis.plans), table)
    return {
        "model": name,
        "trace": trace,
        "device": analysis.cost.device,
        "graphs": len(cap.graphs),
        "eager_us": round(analysis.cost.eager.time_us, 1),
        "fused_us": round(analysis.cost.fused.time_us, 1),
        "eager_launches": analysis.cost.eager.launches,
        "fused_launches": analysis.cost.fused.launches,
        "eager_classes": {c: round(v.time_us, 1) for c, v in by_class["eager"].items()},
        "fused_classes": {c: round(v.time_us, 1) for c, v in by_class["fused"].items()},
        "findings": findings,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def measured_from_json(paths: list[Path]) -> tuple[dict[str, dict], str]:
    """(model -> {"eager": µs, "fuselint": µs, ...}, environment) from bench/models.py JSONs or
    from this script's own JSON (rows with measured_eager / measured_fused); a later file's
    model replaces an earlier one's."""
    out: dict[str, dict] = {}
    envs: list[str] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        env = data.get("env", str(path))
        if env not in envs:
            envs.append(env)
        found: dict[str, dict] = {}
        for row in data["rows"]:
            if "measured_eager" in row:
                if row["measured_eager"] and row["measured_fused"]:
                    found[row["model"]] = {
                        "eager": row["measured_eager"],
                        "fuselint": row["measured_fused"],
                        **{k: row[k] for k in _MEASURED_KEYS if k in row},
                    }
            elif not row.get("train") and "gpu_us" in row and row["backend"] in ("eager", "fuselint"):
                m = found.setdefault(row["model"], {})
                m[row["backend"]] = row["gpu_us"]
                m.setdefault("measured_kernels", {})[row["backend"]] = row.get("kernels")
        if "bert" in found and "bert-tracemask" not in found and "torch 2.11" in env:
            # bench/models.py's BERT on torch 2.11 got the tracing-only mask that bert-tracemask recreates
            found["bert-tracemask"] = found["bert"]
        out.update(found)
    return out, "; ".join(envs)


# Kernel names as torch.profiler reports them on an H100/H200 (cuBLAS, cuDNN, ATen, Triton).
# Generated kernels (Triton, the fuselint backend's) are "other" whatever ops their names list.
_GENERATED = re.compile(r"^(triton_|fuselint_)")
_ATTENTION = re.compile(r"fmha|flash|attention|_attn|mha_|sdpa")
_CONV = re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|implicit_gemm|depthwise|winograd")
_GEMM = re.compile(r"gemm|nvjet|cublas|cutlass|xmma|splitk|gemv")


def kernel_class(name: str) -> str:
    """The class (cost.KERNEL_CLASSES) of a GPU kernel, by its name."""
    n = name.lower()
    if _GENERATED.match(n):
        return "other"
    for cls, pattern in (("attention", _ATTENTION), ("conv", _CONV), ("gemm", _GEMM)):
        if pattern.search(n):
            return cls
    return "other"


def kernel_profile(fn, calls: int = 5, top: int = 25) -> dict:
    """Summed GPU kernel µs per call (Memset/Memcpy left out, as bench/models.py counts), kernels
    per call, µs per kernel class, and the `top` kernels by time."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per_name: dict[str, list[float]] = {}
    for ev in prof.events():
        if getattr(ev, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        if "Memset" in ev.name or "Memcpy" in ev.name:
            continue
        t = ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
        entry = per_name.setdefault(ev.name, [0.0, 0.0])
        entry[0] += t / calls
        entry[1] += 1 / calls
    classes: dict[str, float] = {}
    for kname, (us, _n) in per_name.items():
        classes[kernel_class(kname)] = classes.get(kernel_class(kname), 0.0) + us
    ranked = sorted(per_name.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return {
        "gpu_us": round(sum(us for us, _n in per_name.values()), 1),
        "kernels": round(sum(n for _us, n in per_name.values()), 1),
        "classes": {c: round(classes[c], 1) for c in CLASSES if c in classes},
        "top": [[round(us, 1), round(n, 1), kname[:120]] for kname, (us, n) in ranked],
    }


def measure_on_gpu(name: str, dtype: torch.dtype) -> dict:
    """GPU kernel µs per call under eager and the fuselint backend (bench/models.py's way), with
    kernel counts, µs by kernel class and the largest kernels of each."""
    import models

    model, args = build(name)
    model, args = models._to(model, args, "cuda", dtype)
    out: dict = {"measured_kernels": {}, "measured_classes": {}, "top_kernels": {}}
    for backend in ("eager", "fuselint"):
        torch._dynamo.reset()
        compiled = models.compile_with(backend, model)

        def call(compiled=compiled):
            with torch.no_grad():
                return compiled(*args)

        for _ in range(4):
            call()
        torch.cuda.synchronize()
        prof = kernel_profile(call)
        out[backend] = prof["gpu_us"]
        out["measured_kernels"][backend] = prof["kernels"]
        out["measured_classes"][backend] = prof["classes"]
        out["top_kernels"][backend] = prof["top"]
    torch._dynamo.reset()  # the compiled code holds the model: freed when this returns
    return out


def _err(pred: float, meas: float | None) -> float | None:
    return None if not meas else round(100 * (pred - meas) / meas, 1)


def _pct(e: float | None) -> str:
    return "n/a" if e is None else f"{e:+.0f}%"


def _classes(pred: dict | None, meas: dict | None) -> str:
    """'gemm 171/224' for each class either side has (predicted/measured µs)."""
    pred, meas = pred or {}, meas or {}
    cells = []
    for c in CLASSES:
        if c in pred or c in meas:
            p = f"{pred[c]:.0f}" if c in pred else "0"
            m = f"/{meas[c]:.0f}" if meas else ""
            cells.append(f"{c} {p}{m}")
    return ", ".join(cells) or "–"


def markdown(rows: list[dict], env: str, target: str, command: str) -> str:
    lines = [
        f"Predicted on the `{target}` device table (traced with torch {torch.__version__}); measured: {env}. "
        f"Command: `{command}`.",
        "",
        "eager / fused: µs of GPU kernel time per call (fused: the fuselint backend's plan); "
        "error = (predicted − measured) / measured; kernels: predicted / measured per call.",
        "",
        "| model | trace | predicted eager → fused µs | measured eager → fuselint µs | error eager | error fused |"
        " predicted speedup | measured speedup | kernels eager, fused | findings |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['trace']} | {r['error'][:100]} ||||||||")
            continue
        me, mf = r.get("measured_eager"), r.get("measured_fused")
        meas = f"{me:.0f} → {mf:.0f}" if me and mf else "n/a"
        ms = f"{me / mf:.2f}×" if me and mf else "n/a"
        mk = r.get("measured_kernels") or {}
        kern = (
            f"{r['eager_launches']:.0f}/{mk['eager']:.0f}, {r['fused_launches']:.0f}/{mk['fuselint']:.0f}"
            if mk.get("eager") and mk.get("fuselint")
            else f"{r['eager_launches']:.0f}, {r['fused_launches']:.0f}"
        )
        lines.append(
            f"| {r['model']} | {r['trace']} | {r['eager_us']:.0f} → {r['fused_us']:.0f} | {meas} | "
            f"{_pct(r.get('error_eager'))} | {_pct(r.get('error_fused'))} | "
            f"{r['eager_us'] / r['fused_us']:.2f}× | {ms} | {kern} | {', '.join(r['findings']) or '–'} |"
        )
    by_class: dict[str, dict] = {}  # model -> its first row with a prediction or measured classes
    for r in rows:
        if "eager_classes" in r or r.get("measured_classes"):
            if r["model"] not in by_class or (
                "eager_classes" in r and "eager_classes" not in by_class[r["model"]]
            ):
                by_class[r["model"]] = r
    if by_class:
        lines += [
            "",
            "By kernel class, µs per call, predicted/measured where measured (classes of measured "
            "kernels by name: `kernel_class`; predicted 0 where the prediction failed):",
            "",
            "| model | eager | fused |",
            "|---|---|---|",
        ]
        for model, r in by_class.items():
            mc = r.get("measured_classes") or {}
            lines.append(
                f"| {model} | {_classes(r.get('eager_classes'), mc.get('eager'))} | "
                f"{_classes(r.get('fused_classes'), mc.get('fuselint'))} |"
            )
    tops = {r["model"]: r["top_kernels"] for r in rows if r.get("top_kernels")}
    if tops:
        lines += ["", "Largest kernels per call (µs, launches, name), as measured:"]
        for model, top in tops.items():
            for backend in ("eager", "fuselint"):
                lines += ["", f"{model}, {backend}:", ""]
                lines += [
                    f"    {us:8.1f}  x{n:<4g} {name[:100]}" for us, n, name in top.get(backend, [])[:12]
                ]
    return "\n".join(lines) + "\n"


def _rows_for(name: str, traces: list[str], a: argparse.Namespace, dtype, measured: dict, on_gpu: bool):
    """The rows of one model: measured on the GPU here when there is one, then one per trace
    (none: one row with the measurement alone, for a later --measured run to price). Every row,
    a failed prediction's too, carries the measurement."""
    m = measured.get(name, {})
    needs = "timm" if name in TIMM_SUITE else "torchvision" if name.startswith("tv-") else None
    if needs and importlib.util.find_spec(needs) is None:
        return [
            {"model": name, "trace": t, "error": f"{needs} is not installed here"} for t in traces or ["-"]
        ]
    if on_gpu:
        try:
            m = measure_on_gpu(name, dtype)
            torch.cuda.empty_cache()
        except Exception as exc:  # one model failing must not lose the others
            traceback.print_exc(limit=-4)
            m = {"measure_error": f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]}
    base = {"measured_eager": m.get("eager"), "measured_fused": m.get("fuselint")}
    base.update({k: m[k] for k in _MEASURED_KEYS if k in m})
    if not traces:
        return [{"model": name, "trace": "-", "error": "not predicted (--traces none)", **base}]
    rows = []
    for trace in traces:
        try:
            row = {**predict(name, trace, a.target, dtype, a.small), **base}
        except Exception as exc:
            traceback.print_exc(limit=-4)
            why = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
            rows.append({"model": name, "trace": trace, "error": why, **base})
            continue
        row["error_eager"] = _err(row["eager_us"], row["measured_eager"])
        row["error_fused"] = _err(row["fused_us"], row["measured_fused"])
        rows.append(row)
    return rows


def _summary_line(r: dict) -> str:
    if "error" in r:
        meas = (
            f" (measured {r['measured_eager']:.0f} -> {r['measured_fused']:.0f} µs)"
            if r.get("measured_eager") and r.get("measured_fused")
            else ""
        )
        return f"{r['model']:15s} {r['trace']:5s} {r['error'][:120]}{meas}"
    line = f"{r['model']:15s} {r['trace']:5s} predicted {r['eager_us']:7.0f} -> {r['fused_us']:6.0f} µs"
    if r.get("measured_eager") and r.get("measured_fused"):
        line += (
            f", measured {r['measured_eager']:7.0f} -> {r['measured_fused']:6.0f} µs, "
            f"error {_pct(r.get('error_eager'))} / {_pct(r.get('error_fused'))}"
        )
    return line + f"  ({r['seconds']} s)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(SUITE))
    p.add_argument(
        "--traces", default=",".join(TRACES), help="cpu, meta, cuda (on a GPU); none: measure only"
    )
    p.add_argument(
        "--target",
        help="device table the prediction prices on (default: the measured table of the GPU here, else H100-measured)",
    )
    p.add_argument(
        "--measured", help="comma list of bench/models.py JSONs with per-model gpu_us (no GPU needed)"
    )
    p.add_argument("--small", action="store_true", help="tiny inputs (a quick check; no measured side)")
    p.add_argument(
        "--budget", type=float, default=0, help="seconds; models that would start later are skipped"
    )
    p.add_argument("--md")
    p.add_argument("--json")
    a = p.parse_args(argv)
    dtype = torch.bfloat16
    names = [m for m in a.models.split(",") if m]
    unknown = [m for m in names if m not in SUITE + HOLDOUT_SUITE]
    if unknown:
        print(
            f"unknown model(s) {', '.join(unknown)}; the suite: {', '.join(SUITE + HOLDOUT_SUITE)}",
            file=sys.stderr,
        )
        return 2
    traces = [t for t in a.traces.split(",") if t and t != "none"]
    on_gpu = torch.cuda.is_available() and not a.measured and not a.small
    if "cuda" in traces and not torch.cuda.is_available():
        print("--traces cuda needs a CUDA GPU", file=sys.stderr)
        return 2
    if a.target is None:
        a.target = "H200-measured" if on_gpu and "H200" in torch.cuda.get_device_name() else "H100-measured"
    if a.measured:
        measured, env = measured_from_json([Path(f) for f in a.measured.split(",") if f])
    elif on_gpu:
        measured = {}
        env = f"{torch.cuda.get_device_name()}, torch {torch.__version__} (measured in this run)"
    else:
        measured, env = {}, "nothing (no GPU, no --measured)"
    command = "python bench/predict_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    rows: list[dict] = []
    for name in names:
        if a.budget and time.perf_counter() - start > a.budget:
            rows += [{"model": name, "trace": t, "error": "skipped: over --budget"} for t in traces]
            print(_summary_line(rows[-1]), flush=True)
            continue
        for row in _rows_for(name, traces, a, dtype, measured, on_gpu):
            rows.append(row)
            print(_summary_line(row), flush=True)
        md = markdown(rows, env, a.target, command.strip())
        if a.md:  # after every model: a run cut short keeps what it measured
            Path(a.md).write_text(md, encoding="utf-8")
        if a.json:
            payload = {"env": env, "target": a.target, "command": command.strip(), "rows": rows}
            Path(a.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(markdown(rows, env, a.target, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
