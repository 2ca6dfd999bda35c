"""The gain of a removed graph break: original vs fixed source under torch.compile, timed.

For the corpus models whose breaks `bench/fix_rate.py` removes (all of them, or `--models`):
1. trace the installed packages with dynamo to find the files that hold break sites
   (`real_corpus.run_child`), and fix a copy of them (`fix_rate.fix_copy`, what a user runs:
   `fuselint check --fix --unsafe-fixes`);
2. for each backend (eager as the reference, `fuselint`, Inductor) start two child processes of
   this script, one with the installed packages and one with the fixed copy first on sys.path;
   each builds the same seeded model (`--scale` multiplies its widths and batch) and answers the
   parent's commands on stdin:
   - `first`: one eager call, then `torch.compile` and the first compiled call, timed (cold:
     the child is a fresh process and the compile caches are off, see bench/bench_env.py); the
     graphs dynamo compiled and its break events; the outputs saved for the comparison;
   - `calls N`: N calls, each timed on its own (CUDA synchronized before and after);
   the parent runs `first` in one child then the other, a few warm-up calls, then rounds of
   `calls N` alternating original/fixed (ABBA) so machine noise hits both; steady state is the
   median over all the rounds' calls;
3. compare the fixed outputs with the original's (max abs diff, same seed, same weights and
   inputs), and write the ratios fixed/original side by side.

A model whose package is missing, whose fix changed none of its files, or that does not fit in
the time left (`--budget`) is a recorded row, never a crash.

A run that one time limit cannot hold is split by `--models` (and `--backends`); `--merge` joins the
runs' JSONs into one table with one set of geomeans (no torch needed).

    PYTHONPATH=. python bench/fix_gain.py --device cpu --budget 900 --md out.md --json out.json
    python3 bench/fix_gain.py --device cuda --scale 8 --budget 400 --md $OUT/fix_gain.md --json $OUT/fix_gain.json
    python bench/fix_gain.py --merge a.json,b.json --md all.md --json all.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from fix_rate import fix_copy, max_diff, tensors_diff  # noqa: E402
from real_corpus import MODELS, ROOT, build, child_env, listen_breaks, package_dirs, run_child, short_path  # noqa: E402

# The models whose breaks bench/results/fix_rate.md shows removed (all or in part).
DEFAULT_MODELS = (
    "hf_big_bird",
    "hf_reformer",
    "hf_vits",
    "esm2",
    "hf_switch",
    "df_ddpm_step",
    "df_euler_step",
)
BACKENDS = ("eager", "fuselint", "inductor")
VARIANTS = ("original", "fixed")
MIN_PAIR_S = 30  # a pair (two children, two compiles, the rounds) needs at least this long
TAG = "@@fix_gain "  # a child's answer lines; anything else on its stdout is the model's own printing


# ---------------------------------------------------------------- child: one model, one backend, one source


def _emit(payload: dict) -> None:
    print(TAG + json.dumps(payload), flush=True)


def child(model_name: str, backend: str, device: str, scale: int, outputs: str, threads: int) -> None:
    """Build the model, then answer `first` / `calls N` / `quit` on stdin, one JSON line each."""
    from bench_env import caches_off

    caches_off("fuselint-fix-gain-")  # before torch and triton load
    import torch

    if threads:
        # a shared CPU: two OpenMP threads per process made each tiny op wait ~20 ms (BigBird 1.2 s
        # per eager call instead of 3-8 ms); Inductor's C++ kernels take the same count
        torch.set_num_threads(threads)

    try:
        model, args = build(model_name, scale)
    except ModuleNotFoundError as exc:
        _emit({"error": f"missing package {exc.name}: {exc}"})
        return
    from fuselint.verify.numerics import flatten

    model.eval().to(device)
    # 0-d tensors (a scheduler's timestep) stay on the CPU, as the scheduler's own tables do.
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) and a.dim() else a for a in args)
    reset = getattr(model, "reset_state", lambda: None)
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    graphs: list[int] = []
    breaks = listen_breaks()

    def tensors(out) -> list:
        return [t.detach().float().cpu() for _p, t in flatten(out) if isinstance(t, torch.Tensor)]

    def timed(fn) -> tuple[float, object]:
        reset()
        # the same random draws every call: VITS's noise sets its output length, and a new length
        # is a new shape (a recompile under dynamic=False), so unseeded calls never reach a steady state
        torch.manual_seed(0)
        sync()
        started = time.perf_counter()
        out = fn(*args)
        sync()
        return time.perf_counter() - started, out

    def compiler():
        import torch._inductor.config

        # random ops (VITS samples noise) draw the numbers eager draws, so outputs compare; the
        # fuselint backend takes Inductor's decomposition table, which follows the same switch
        torch._inductor.config.fallback_random = True
        if backend == "fuselint":
            from fuselint.backend import fuselint_backend as inner
        else:
            from torch._inductor.compile_fx import compile_fx as inner

        def counted(gm, example_inputs):
            graphs.append(len(gm.graph.nodes))
            return inner(gm, example_inputs)

        return counted

    def dynamo_stats() -> dict:
        return {"graphs": len(graphs), "breaks": len(breaks.texts)}

    params = sum(p.numel() for p in model.parameters())
    shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
    _emit({"ready": True, "params": params, "inputs": shapes, "torch": torch.__version__})
    run = model
    with torch.no_grad():
        for line in sys.stdin:
            verb, *rest = line.split()
            if verb == "first":
                eager_s, eager_out = timed(model)
                reference = tensors(eager_out)
                first_s = eager_s
                out = eager_out
                if backend != "eager":
                    torch._dynamo.reset()
                    breaks.texts.clear()
                    sync()
                    started = time.perf_counter()
                    run = torch.compile(model, backend=compiler(), dynamic=False)
                    out = timed(run)[1]
                    first_s = time.perf_counter() - started
                got = tensors(out)
                torch.save(got, outputs)
                vs_eager = tensors_diff(got, reference)
                _emit({"first_s": first_s, "eager_first_s": eager_s, "vs_eager": vs_eager, **dynamo_stats()})
            elif verb == "calls":
                times = [timed(run)[0] for _ in range(int(rest[0]))]
                _emit({"times": times, **dynamo_stats()})
            else:
                return


# ---------------------------------------------------------------- parent: children, rounds, budget


class ChildError(RuntimeError):
    pass


class Child:
    """A child process of this script and the line protocol to it."""

    def __init__(self, model: str, backend: str, variant: str, pythonpath: str, a, work: Path) -> None:
        self.name = f"{model}/{backend}/{variant}"
        self.outputs = work / f"{model}.{backend}.{variant}.pt"
        self.log = work / f"{model}.{backend}.{variant}.log"
        cmd = [sys.executable, str(HERE), "--child", model, "--backend", backend]
        cmd += ["--device", a.device, "--scale", str(a.scale), "--outputs", str(self.outputs)]
        cmd += ["--threads", str(a.threads)]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=child_env(pythonpath),
                cwd=ROOT,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                self.lines.put(line[len(TAG) :])
        self.lines.put(None)

    def answer(self, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=max(timeout, 1.0))
        except queue.Empty:
            raise ChildError(f"no answer within {timeout:.0f} s (budget)") from None
        if line is None:
            tail = [t for t in self.log.read_text(errors="replace").splitlines() if t.strip()]
            raise ChildError(f"child exited: {(tail or ['no output'])[-1][:200]}")
        payload = json.loads(line)
        if "error" in payload:
            raise ChildError(payload["error"])
        return payload

    def ask(self, command: str, timeout: float) -> dict:
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone; answer() says why
        return self.answer(timeout)

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def measure_pair(model: str, backend: str, fixed: Path, a, work: Path, deadline: float) -> dict:
    """One backend on one model: original and fixed, first call then interleaved steady rounds."""
    left = lambda: deadline - time.monotonic()  # noqa: E731
    kids = {"original": Child(model, backend, "original", "", a, work)}
    kids["fixed"] = Child(model, backend, "fixed", str(fixed), a, work)
    result: dict = {v: {} for v in VARIANTS}
    try:
        for v in VARIANTS:
            result[v].update(kids[v].answer(left()))
        for v in VARIANTS:  # one compile at a time
            result[v].update(kids[v].ask("first", left()))
        for v in VARIANTS:
            kids[v].ask(f"calls {a.warmup}", left())
        probe = kids["original"].ask("calls 3", left())["times"]
        per_round = max(1, min(a.max_calls, round(a.round_s / max(statistics.median(probe), 1e-6))))
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in range(a.rounds):
            for v in VARIANTS if r % 4 in (0, 3) else VARIANTS[::-1]:
                answer = kids[v].ask(f"calls {per_round}", left())
                times[v] += answer["times"]
                result[v]["graphs_end"] = answer["graphs"]
                result[v]["breaks_end"] = answer["breaks"]
        for v in VARIANTS:
            result[v]["median_s"] = statistics.median(times[v])
            result[v]["calls"] = len(times[v])
            q = statistics.quantiles(times[v], n=4) if len(times[v]) > 1 else [times[v][0]] * 3
            result[v]["iqr_s"] = q[2] - q[0]
        result["diff"] = max_diff(str(kids["original"].outputs), str(kids["fixed"].outputs))
    except ChildError as exc:
        result["error"] = str(exc)
    finally:
        for kid in kids.values():
            kid.close()
    return result


# ---------------------------------------------------------------- the table (pure: tested on made-up numbers)


def ratio(after: float | None, before: float | None) -> float | None:
    if after is None or not before:
        return None
    return after / before


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _arrow(before, after) -> str:
    return f"{'-' if before is None else before} → {'-' if after is None else after}"


def summarize(measured: dict) -> list[dict]:
    """One row per model and backend from the raw measurements: before → after and the ratios."""
    rows = []
    for model, entry in measured["models"].items():
        if entry.get("skipped"):
            rows.append({"model": model, "backend": "-", "note": entry["skipped"]})
            continue
        if "backends" not in entry:  # a table written before this model's turn
            rows.append({"model": model, "backend": "-", "note": "not measured yet"})
            continue
        for backend, pair in entry["backends"].items():
            o, f = pair.get("original", {}), pair.get("fixed", {})
            row = {
                "model": model,
                "backend": backend,
                "graphs": (o.get("graphs_end", o.get("graphs")), f.get("graphs_end", f.get("graphs"))),
                "breaks": (o.get("breaks_end", o.get("breaks")), f.get("breaks_end", f.get("breaks"))),
                "first_s": (o.get("first_s"), f.get("first_s")),
                "steady_ms": tuple(
                    None if x.get("median_s") is None else 1e3 * x["median_s"] for x in (o, f)
                ),
                "calls": o.get("calls"),
                "diff": pair.get("diff", "-"),
                "vs_eager": f.get("vs_eager", "-") if backend != "eager" else "",
                "note": pair.get("skipped") or pair.get("error") or "",
            }
            for side, x in (("original", o), ("fixed", f)):
                if x.get("graphs_end", 0) > x.get("graphs", 0):
                    more = x["graphs_end"] - x["graphs"]
                    row["note"] = (
                        f"{side} recompiled after the first call (+{more} graphs); {row['note']}".strip("; ")
                    )
            row["first_ratio"] = ratio(*row["first_s"][::-1])
            row["steady_ratio"] = ratio(*row["steady_ms"][::-1])
            if backend == "eager":
                row["graphs"] = row["breaks"] = (None, None)
            rows.append(row)
    return rows


def markdown(measured: dict) -> str:
    rows = summarize(measured)
    lines = [
        "The gain of removed graph breaks: original vs fixed source (`fuselint check --fix --unsafe-fixes` on a",
        "copy of the packages, as in bench/fix_rate.py), each in its own process, under eager, the `fuselint`",
        "backend and Inductor (`torch.compile(dynamic=False)`, eval, no_grad).",
        f"{measured['env']}; config: {measured['config']}",
        f"command: `{measured['command']}`; commit {measured['commit']}",
        *(
            [f"fixed: {measured['fixed_files']} files (the models' break sites and bench/fix_rate.py's list)"]
            if measured.get("fixed_files")
            else []
        ),
        "",
        "first call: a fresh process after one eager call, compile caches off: dynamo + backend compile + the",
        "call. steady: median of the per-call times over interleaved original/fixed rounds, after warm-up.",
        "ratio = fixed / original (< 1: the fix made it faster). graphs and break events are dynamo's counts",
        "at the end (a recompile shows as more graphs). diff: max abs diff of fixed vs original outputs;",
        "vs eager: of the fixed source compiled vs the same source in eager.",
        "",
    ]
    for backend in BACKENDS[1:]:
        steady = geomean(
            [r["steady_ratio"] for r in rows if r["backend"] == backend and r.get("steady_ratio")]
        )
        first = geomean([r["first_ratio"] for r in rows if r["backend"] == backend and r.get("first_ratio")])
        n = sum(1 for r in rows if r["backend"] == backend and r.get("steady_ratio"))
        lines.append(
            f"- {backend}: geomean fixed/original steady {_num(steady, '.2f')}, "
            f"first call {_num(first, '.2f')} over {n} models"
        )
    lines += [
        "",
        "| model | inputs | backend | graphs | break events | first call s | ratio | steady ms | ratio "
        "| calls | diff | vs eager | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        entry = measured["models"][r["model"]]
        shapes = entry.get("inputs", "")
        if r["backend"] == "-":
            lines.append(f"| {r['model']} | {shapes} | - | | | | | | | | | | {r['note']} |")
            continue
        first = " → ".join(_num(v, ".2f") for v in r["first_s"])
        steady = " → ".join(_num(v, ".3f") for v in r["steady_ms"])
        lines.append(
            f"| {r['model']} | {shapes} | {r['backend']} | {_arrow(*r['graphs'])} | {_arrow(*r['breaks'])} "
            f"| {first} | {_num(r['first_ratio'], '.2f')} | {steady} | {_num(r['steady_ratio'], '.2f')} "
            f"| {r['calls'] or '-'} | {r['diff']} | {r['vs_eager']} | {r['note'][:120]} |"
        )
    return "\n".join(lines) + "\n"


def _measured_pair(pair: dict) -> bool:
    """A pair that ran (timed, or failed while running), not one the budget skipped."""
    return not pair.get("skipped")


def listed_files(listing: str | None, dirs: dict[str, str]) -> list[str]:
    """The files of `listing` (bench/fix_rate.py's `-files.txt`: `package/...` one a line) in the
    installed packages `dirs` (name -> folder): fixing them too makes the copy fix_rate's, whose lint
    sees every corpus model's callers (the DDPM pipeline tells it that `step`'s timestep is a tensor)."""
    if not listing:
        return []
    found = []
    for line in Path(listing).read_text().splitlines():
        package, _, rest = line.strip().partition("/")
        if package in dirs and rest and Path(dirs[package], rest).is_file():
            found.append(str(Path(dirs[package], rest)))
    return found


def merge_runs(runs: list[dict]) -> dict:
    """One measurement from several runs (each a `--json`): models in the order they first appear;
    per model and backend, a pair that ran wins over one the budget skipped, and of two that ran the
    later run's (a rerun) wins. A model skipped in one run (not traced, nothing fixed) keeps a run's
    measured entry if any run has one."""
    models: dict[str, dict] = {}
    for run in runs:
        for model, entry in run["models"].items():
            have = models.setdefault(model, {})
            if entry.get("skipped"):
                if not have:
                    have.update(entry)
                continue
            if have.get("skipped"):
                have.clear()
            backends = {**have.get("backends", {})}
            for backend, pair in entry.get("backends", {}).items():
                if _measured_pair(pair) or backend not in backends or not _measured_pair(backends[backend]):
                    backends[backend] = pair
            have.update({k: v for k, v in entry.items() if k != "backends" and v is not None})
            have["backends"] = backends
    first = runs[0]
    return {
        "env": first["env"],
        "config": first["config"],
        "command": " ; ".join(run["command"] for run in runs),
        "commit": ", ".join(dict.fromkeys(run["commit"] for run in runs)),
        "models": models,
    }


# ---------------------------------------------------------------- main


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _env(device: str) -> str:
    import torch

    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    return f"{name}, torch {torch.__version__}, Python {platform.python_version()}"


def _write(measured: dict, a: argparse.Namespace) -> str:
    """The table so far, written to --md / --json (each replaced whole); its Markdown."""
    text = markdown(measured)
    if a.md:
        Path(a.md).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps(measured, indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--models", help=f"comma-separated corpus models (default: {','.join(DEFAULT_MODELS)})")
    p.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated subset of eager,fuselint,inductor"
    )
    p.add_argument(
        "--budget", type=float, default=1800, help="seconds for the whole run; what won't fit is skipped"
    )
    p.add_argument(
        "--scale", type=int, default=1, help="multiply the tiny configs' widths and batch (1: as in fix_rate)"
    )
    p.add_argument(
        "--threads", type=int, help="torch CPU threads in each child (default: 1 on cpu, torch's own on cuda)"
    )
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds per model and backend")
    p.add_argument("--round-s", type=float, default=0.25, help="about this many seconds of calls per round")
    p.add_argument("--max-calls", type=int, default=200, help="at most this many calls per round")
    p.add_argument("--warmup", type=int, default=3, help="calls after the first one, before the rounds")
    p.add_argument("--md", help="write the Markdown table here")
    p.add_argument("--json", help="write the measurements here")
    p.add_argument("--keep", help="keep the work folder (fixed copy, outputs, child logs) here")
    p.add_argument(
        "--files",
        default=str(ROOT / "bench" / "results" / "fix_rate-files.txt"),
        help="also fix these files (bench/fix_rate.py's list, the default), so the copy is the one fix_rate "
        "counts; '' fixes only the chosen models' break-site files",
    )
    p.add_argument("--merge", help="comma list of --json files: write them as one table (no model runs)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--outputs", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.child, a.backend, a.device, a.scale, a.outputs, a.threads)
        return 0
    if a.merge:
        names = [f for f in a.merge.split(",") if f]
        missing = [f for f in names if not Path(f).is_file()]
        if missing or not names:
            print(f"fix_gain: --merge: no such file: {', '.join(missing) or repr(a.merge)}", file=sys.stderr)
            return 2
        print(_write(merge_runs([json.loads(Path(f).read_text()) for f in names]), a))
        return 0
    if a.threads is None:
        a.threads = 1 if a.device == "cpu" else 0
    models = a.models.split(",") if a.models else list(DEFAULT_MODELS)
    backends = a.backends.split(",")
    unknown = [m for m in models if m not in MODELS] + [b for b in backends if b not in BACKENDS]
    if unknown:
        print(f"fix_gain: unknown model or backend: {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        import torch
    except ModuleNotFoundError:
        print("fix_gain: torch is not installed", file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("fix_gain: --device cuda but no CUDA device", file=sys.stderr)
        return 2
    deadline = time.monotonic() + a.budget
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="fuselint-fix-gain-"))
    work.mkdir(parents=True, exist_ok=True)
    measured: dict = {
        "env": _env(a.device),
        "config": f"device {a.device}, scale {a.scale} (bench/real_corpus.py configs, widths and batch × {a.scale})"
        + (f", {a.threads} CPU thread(s) per process" if a.threads else ""),
        "command": "python bench/fix_gain.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": _commit(),
        "models": {},
    }
    # 1. where the breaks are, and a fixed copy of those files
    for model in models:
        left = deadline - time.monotonic()
        truth = run_child(model, timeout=max(int(left), 1))
        entry = {"package": MODELS[model], "sites_before": len(truth["sites"])}
        entry["files"] = sorted({short_path(s["file"]) for s in truth["sites"]})
        entry["_paths"] = sorted({s["file"] for s in truth["sites"]})
        if truth.get("error") and not truth["sites"]:
            entry["skipped"] = f"not traced: {truth['error']}"
        elif not truth["sites"]:
            entry["skipped"] = "no break site to fix"
        measured["models"][model] = entry
        print(f"{model}: {entry.get('skipped') or str(entry['sites_before']) + ' sites'}", file=sys.stderr)
    files = sorted({f for e in measured["models"].values() if not e.get("skipped") for f in e["_paths"]})
    files = sorted(set(files) | set(listed_files(a.files, package_dirs()))) if files else files
    packages = {p: d for p, d in package_dirs().items() if any(f.startswith(d + "/") for f in files)}
    fixed = work / "fixed"
    if fixed.exists():
        shutil.rmtree(fixed)
    moved, summary = fix_copy(files, packages, fixed) if files else ({}, "nothing to fix")
    measured["fix_summary"] = summary
    measured["fixed_files"] = len(files)
    changed = {f for f, copy in moved.items() if Path(f).read_bytes() != Path(copy).read_bytes()}
    for entry in measured["models"].values():
        paths = entry.pop("_paths")
        if not entry.get("skipped") and not changed.intersection(paths):
            entry["skipped"] = f"the fix changed none of its files ({summary[:120]})"
    # 2. original vs fixed, per backend
    for model, entry in measured["models"].items():
        if entry.get("skipped"):
            continue
        entry["backends"] = {}
        for backend in backends:
            left = deadline - time.monotonic()
            if left < MIN_PAIR_S:
                entry["backends"][backend] = {"skipped": f"budget: {max(left, 0):.0f} s left"}
                continue
            started = time.monotonic()
            pair = measure_pair(model, backend, fixed, a, work, deadline)
            pair["wall_s"] = round(time.monotonic() - started, 1)
            entry["backends"][backend] = pair
            entry.setdefault("inputs", pair.get("original", {}).get("inputs"))
            entry.setdefault("params", pair.get("original", {}).get("params"))
            print(f"{model} {backend}: {pair.get('error') or 'ok'} ({pair['wall_s']} s)", file=sys.stderr)
            _write(measured, a)  # after every pair: a run stopped from outside keeps what it measured
    print(_write(measured, a))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
