"""How close `fuselint check --entry` predictions come to measured GPU kernel time, per model.

    python bench/predict_accuracy.py --measured bench/results/models-h100.json \\
        --md bench/results/predict_accuracy-cpu.md --json bench/results/predict_accuracy-cpu.json
    python bench/predict_accuracy.py --md $OUT/predict.md --json $OUT/predict.json   # on a GPU

For each model of bench/models.py's suite (its own builders, bf16, inference) the predicted
side traces the model twice, on CPU and on the meta device, plans it and prices eager and
fused time on a device table (default: the table measured on the GPU that the measured side
ran on, `H100-measured`). The measured side is torch.profiler's summed GPU kernel time per
call under eager and under the fuselint backend: measured here when a GPU is present, else
read from a bench/models.py JSON (`gpu_us` of its `eager` and `fuselint` rows). Error is
(predicted - measured) / measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from fuselint.fusion.devices import device as device_table  # noqa: E402
from fuselint.fusion.model import analyse  # noqa: E402
from fuselint.graph.capture import capture  # noqa: E402
from fuselint.graph.entry import Entry  # noqa: E402

# The HF part of bench/models.py (timm does not import on the CPU machines), and BERT as torch
# 2.11's environment ran it: with an all-true boolean mask broadcast over keys, strides
# (0, 256, 1, 0), made only under compile (`bert-tracemask`, see TracingMask).
SUITE = ("gpt2", "llama", "bert", "bert-tracemask", "t5enc")
TRACES = ("cpu", "meta")


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
    """(model, args) of bench/models.py, on CPU in float32."""
    import models

    if name == "bert-tracemask":
        model, args = models.build("bert", small=small)
        return TracingMask(model).eval(), args
    return models.build(name, small=small)


def _entry(name: str, dtype: torch.dtype, small: bool) -> Entry:
    def factory():
        model, args = build(name, small)
        return model.to(dtype), args

    return Entry(spec=f"bench/models.py:{name}", factory=factory, path=str(ROOT / "bench" / "models.py"))


def predict(name: str, trace: str, target: str, dtype: torch.dtype, small: bool = False) -> dict:
    """Predicted eager and fused µs per call of one model traced on `trace` ("cpu" or "meta")."""
    t0 = time.perf_counter()
    cap = capture(_entry(name, dtype, small), device=trace)
    analysis = analyse(cap, device_table(target))
    findings = sorted({f.code for f in analysis.findings})
    return {
        "model": name,
        "trace": trace,
        "device": analysis.cost.device,
        "graphs": len(cap.graphs),
        "eager_us": round(analysis.cost.eager.time_us, 1),
        "fused_us": round(analysis.cost.fused.time_us, 1),
        "eager_launches": analysis.cost.eager.launches,
        "fused_launches": analysis.cost.fused.launches,
        "findings": findings,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def measured_from_json(path: Path) -> tuple[dict[str, dict[str, float]], str]:
    """(model -> {"eager": µs, "fuselint": µs}, environment) from a bench/models.py JSON or
    from this script's own JSON (rows with measured_eager / measured_fused)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[str, float]] = {}
    for row in data["rows"]:
        if "measured_eager" in row:
            if row["measured_eager"] and row["measured_fused"]:
                out[row["model"]] = {"eager": row["measured_eager"], "fuselint": row["measured_fused"]}
        elif not row.get("train") and "gpu_us" in row and row["backend"] in ("eager", "fuselint"):
            out.setdefault(row["model"], {})[row["backend"]] = row["gpu_us"]
    if "bert" in out and "bert-tracemask" not in out and "torch 2.11" in data.get("env", ""):
        # bench/models.py's BERT on torch 2.11 got the tracing-only mask that bert-tracemask recreates
        out["bert-tracemask"] = out["bert"]
    return out, data.get("env", str(path))


def measure_on_gpu(name: str, dtype: torch.dtype) -> dict[str, float]:
    """Summed GPU kernel µs per call under eager and the fuselint backend (bench/models.py's way)."""
    import models

    model, args = build(name)
    model, args = models._to(model, args, "cuda", dtype)
    out = {}
    for backend in ("eager", "fuselint"):
        torch._dynamo.reset()
        compiled = models.compile_with(backend, model)

        def call(compiled=compiled):
            with torch.no_grad():
                return compiled(*args)

        for _ in range(4):
            call()
        torch.cuda.synchronize()
        out[backend] = models.gpu_profile(call)[1]
    return out


def _err(pred: float, meas: float | None) -> float | None:
    return None if not meas else round(100 * (pred - meas) / meas, 1)


def _pct(e: float | None) -> str:
    return "n/a" if e is None else f"{e:+.0f}%"


def markdown(rows: list[dict], env: str, target: str, command: str) -> str:
    lines = [
        f"Predicted on the `{target}` device table; measured: {env}. Command: `{command}`.",
        "",
        "eager / fused: µs of GPU kernel time per call (fused: the fuselint backend's plan); "
        "error = (predicted − measured) / measured.",
        "",
        "| model | trace | predicted eager → fused µs | measured eager → fuselint µs | error eager | error fused |"
        " predicted speedup | measured speedup | findings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        me, mf = r.get("measured_eager"), r.get("measured_fused")
        meas = f"{me:.0f} → {mf:.0f}" if me and mf else "n/a"
        ms = f"{me / mf:.2f}×" if me and mf else "n/a"
        lines.append(
            f"| {r['model']} | {r['trace']} | {r['eager_us']:.0f} → {r['fused_us']:.0f} | {meas} | "
            f"{_pct(r.get('error_eager'))} | {_pct(r.get('error_fused'))} | "
            f"{r['eager_us'] / r['fused_us']:.2f}× | {ms} | {', '.join(r['findings']) or '–'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(SUITE))
    p.add_argument("--traces", default=",".join(TRACES))
    p.add_argument(
        "--target",
        help="device table the prediction prices on (default: the measured table of the GPU here, else H100-measured)",
    )
    p.add_argument("--measured", help="bench/models.py JSON with per-model gpu_us (no GPU needed)")
    p.add_argument("--small", action="store_true", help="tiny inputs (a quick check; no measured side)")
    p.add_argument("--md")
    p.add_argument("--json")
    a = p.parse_args(argv)
    dtype = torch.bfloat16
    names = [m for m in a.models.split(",") if m]
    on_gpu = torch.cuda.is_available() and not a.measured and not a.small
    if a.target is None:
        a.target = "H200-measured" if on_gpu and "H200" in torch.cuda.get_device_name() else "H100-measured"
    if a.measured:
        measured, env = measured_from_json(Path(a.measured))
    elif on_gpu:
        measured = {m: measure_on_gpu(m, dtype) for m in names}
        env = f"{torch.cuda.get_device_name()}, torch {torch.__version__} (measured in this run)"
    else:
        measured, env = {}, "nothing (no GPU, no --measured)"
    rows = []
    for name in names:
        for trace in a.traces.split(","):
            row = predict(name, trace, a.target, dtype, a.small)
            m = measured.get(name, {})
            row["measured_eager"], row["measured_fused"] = m.get("eager"), m.get("fuselint")
            row["error_eager"] = _err(row["eager_us"], row["measured_eager"])
            row["error_fused"] = _err(row["fused_us"], row["measured_fused"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    command = "python bench/predict_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = markdown(rows, env, a.target, command.strip())
    if a.md:
        Path(a.md).write_text(md, encoding="utf-8")
    if a.json:
        payload = {"env": env, "target": a.target, "command": command.strip(), "rows": rows}
        Path(a.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
