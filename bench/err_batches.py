"""Errors over many input batches: is one backend's error above another's on most batches, or on a few?

`bench/models.py --err-batches N` measures, per model and backend, each batch's max abs error and
mean abs error against the same model in IEEE float32 (and float64, and eager in the same dtype);
its table shows only the median over the batches. This script reads those per-batch errors from
models.py's `--json` and summarises them per model: for each backend the mean over the batches of
the mean error and of the max error, the largest max; and, batch by batch, how often one backend's
error is above the other's (fuselint against Inductor by default).

    python3 bench/models.py --models mobilenetv3,vit --backends eager,fuselint,inductor --rounds 2 --rep 5 \\
        --err-batches 24 --json err24.json          # on a GPU
    python bench/err_batches.py err24.json --md err_batches.md --json err_batches.json   # no GPU needed
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

# models.py's per-batch tuple: (max vs eager in the same dtype, max vs float32, mean vs float32, max vs float64,
# mean vs float64); runs before session 25 have the first four only
MAX32, MEAN32, MEAN64 = 1, 2, 4


def per_model(rows: list[dict]) -> dict[str, dict[str, list[list[float]]]]:
    """{model: {backend: per-batch errors}} for the inference rows that measured errors. A run of
    several dtypes keys each model as `model dtype` (a bf16 and a float32 row are two models here)."""
    measured = [r for r in rows if not r.get("train") and "error" not in r and r.get("err_batches")]
    several = len({r.get("dtype") for r in measured}) > 1
    found: dict[str, dict[str, list[list[float]]]] = {}
    for row in measured:
        name = f"{row['model']} {row.get('dtype')}" if several else row["model"]
        found.setdefault(name, {})[row["backend"]] = row["err_batches"]
    return found


def backend_summary(batches: list[list[float]]) -> dict:
    maxima = [b[MAX32] for b in batches]
    means = [b[MEAN32] for b in batches]
    return {
        "batches": len(batches),
        "mean_of_means": statistics.fmean(means),
        "mean_of_maxima": statistics.fmean(maxima),
        "median_of_maxima": statistics.median(maxima),
        "largest_max": max(maxima),
    }


def above(mine: list[list[float]], theirs: list[list[float]], column: int) -> int:
    """On how many batches my error (this column) is strictly above theirs; the batches pair up in order."""
    if len(mine) != len(theirs):
        raise ValueError(f"{len(mine)} batches against {len(theirs)}: not the same batches")
    return sum(a[column] > b[column] for a, b in zip(mine, theirs, strict=True))


def summarize(rows: list[dict], mine: str = "fuselint", theirs: str = "inductor") -> dict:
    """Per model: each backend's summary and, where both are there, `mine` against `theirs` batch by batch."""
    out = {}
    for model, backends in per_model(rows).items():
        entry: dict = {"backends": {b: backend_summary(errs) for b, errs in backends.items()}}
        if mine in backends and theirs in backends:
            a, b = backends[mine], backends[theirs]
            entry["compare"] = {
                "mine": mine,
                "theirs": theirs,
                "batches": len(a),
                "mean_above": above(a, b, MEAN32),
                "max_above": above(a, b, MAX32),
                "mean_ratio": statistics.fmean(x[MEAN32] for x in a) / statistics.fmean(x[MEAN32] for x in b),
            }
            # a float32 model's float32 reference is eager, as rounded as the backends: float64 is the exact answer
            if all(len(x) > MEAN64 for x in a + b):
                entry["compare"]["mean64_above"] = above(a, b, MEAN64)
                entry["compare"]["mean64_ratio"] = statistics.fmean(x[MEAN64] for x in a) / statistics.fmean(
                    x[MEAN64] for x in b
                )
        out[model] = entry
    return out


def markdown(summary: dict, source: str) -> str:
    lines = [
        f"Errors against the same model in IEEE float32 over many batches, from `{source}` (bench/models.py",
        "`--err-batches`: the timed batch and fresh normal draws of its shapes). mean: mean abs error of a",
        "batch, averaged over the batches; max: a batch's max abs error, averaged over the batches, their",
        "median and the largest. above: on how many batches the first backend's error is above the second's.",
        "",
        "| model | backend | batches | mean | max: mean | max: median | max: largest |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, entry in summary.items():
        for backend, s in entry["backends"].items():
            lines.append(
                f"| {model} | {backend} | {s['batches']} | {s['mean_of_means']:.4e} | {s['mean_of_maxima']:.4g} "
                f"| {s['median_of_maxima']:.4g} | {s['largest_max']:.4g} |"
            )
    compares = [(m, e["compare"]) for m, e in summary.items() if e.get("compare")]
    f64 = any("mean64_ratio" in c for _, c in compares)
    head = "| model | backends | mean above | max above | mean error ratio |"
    lines += [
        "",
        head + (" vs float64: mean above | mean error ratio |" if f64 else ""),
        "|---" * (5 + 2 * f64) + "|",
    ]
    for model, c in compares:
        line = (
            f"| {model} | {c['mine']} / {c['theirs']} | {c['mean_above']} of {c['batches']} "
            f"| {c['max_above']} of {c['batches']} | {c['mean_ratio']:.4f} |"
        )
        if f64:
            line += (
                f" {c['mean64_above']} of {c['batches']} | {c['mean64_ratio']:.4f} |"
                if "mean64_ratio" in c
                else " – | – |"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="bench/models.py --json files measured with --err-batches")
    p.add_argument(
        "--mine", default="fuselint", help="the backend compared batch by batch (default fuselint)"
    )
    p.add_argument("--theirs", default="inductor", help="the backend it is compared with (default inductor)")
    p.add_argument("--md", help="write the Markdown summary here")
    p.add_argument("--json", help="write the summary here")
    a = p.parse_args(argv)
    missing = [f for f in a.runs if not Path(f).is_file()]
    if missing:
        print(f"err_batches: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    rows = [row for f in a.runs for row in json.loads(Path(f).read_text())["rows"]]
    try:
        summary = summarize(rows, a.mine, a.theirs)
    except ValueError as exc:
        print(f"err_batches: {exc}", file=sys.stderr)
        return 2
    if not summary:
        print(
            "err_batches: no row with per-batch errors (run bench/models.py with --err-batches)",
            file=sys.stderr,
        )
        return 2
    text = markdown(summary, ", ".join(Path(f).name for f in a.runs))
    if a.md:
        Path(a.md).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
