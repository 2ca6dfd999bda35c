"""Lint speed on a real tree: transformers' `models/` folder (2,500+ files, ~1M lines).

    python bench/lint_speed.py [--version 5.23.0] [--workdir .corpus] [--checkout PATH]

Downloads the transformers wheel with pip (not committed), unpacks it, then times
`fuselint check` cold (empty cache), warm (unchanged tree, cache filled) and on a single
file (what a pre-commit run on one changed file costs, process start included).
Prints files/s and lines/s for each. `--checkout` times another checkout's fuselint (main's,
for a comparison run by the same script). The checkout's modules are byte-compiled first, as
an installed package's are: with PYTHONDONTWRITEBYTECODE set and no .pyc, every run would
compile them again (~0.2 s of a one-file run).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = ROOT  # whose fuselint runs (--checkout)


def fetch(version: str, workdir: Path) -> Path:
    tree = workdir / f"transformers-{version}"
    models = tree / "transformers" / "models"
    if models.is_dir():
        return models
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            f"transformers=={version}",
            "-d",
            str(workdir),
        ],
        check=True,
    )
    wheel = next(workdir.glob(f"transformers-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tree)
    return models


CPU: list[float] = []  # CPU seconds (user + system, workers included) of each run, in order


def run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "fuselint", *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fuselint failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, proc


def _start(statement: str) -> tuple[float, float]:
    """Wall and CPU seconds of `python -c statement`: the floor under a one-file run."""
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], env=env, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="5.23.0")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the fuselint checkout to time")
    args = parser.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CHECKOUT / "fuselint")], check=True)

    models = fetch(args.version, args.workdir)
    files = sorted(models.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    cwd = models.parent.parent
    rel = models.relative_to(cwd)
    print(f"transformers {args.version} models/: {len(files)} files, {lines:,} lines, {os.cpu_count()} cores")

    # The tree is its own project: fuselint keeps its cache beside the nearest pyproject.toml,
    # which must be this one (not a checkout above it) for "cold" to mean an empty cache.
    if not (cwd / "pyproject.toml").exists():
        (cwd / "pyproject.toml").write_text("[tool.fuselint]\n")
    cache = cwd / ".fuselint_cache"
    colds, warms, cpu_cold, cpu_warm = [], [], [], []
    for _ in range(args.repeat):
        shutil.rmtree(cache, ignore_errors=True)
        cold, proc = run(["check", "--exit-zero", "--statistics", str(rel)], cwd)
        cpu_cold.append(CPU[-1])
        warm, proc_warm = run(["check", "--exit-zero", "--statistics", str(rel)], cwd)
        cpu_warm.append(CPU[-1])
        assert proc.stdout == proc_warm.stdout, "warm run must report what the cold run did"
        colds.append(cold)
        warms.append(warm)
    single_file = str(rel / "llama" / "modeling_llama.py")
    singles = [run(["check", "--no-cache", "--exit-zero", single_file], cwd)[0] for _ in range(5)]
    cpu_single = statistics.median(CPU[-5:])
    # What pre-commit runs on one staged file: the cache holds the whole tree (filled above), so
    # the file's callers in other files still count.
    warm_singles = [run(["check", "--exit-zero", single_file], cwd)[0] for _ in range(5)]
    cpu_warm_single = statistics.median(CPU[-5:])
    # The same after an edit of the staged file (a comment line added, a new one each run): the
    # file is linted again and the cache written, as when a commit changes it.
    path = cwd / single_file
    original = path.read_bytes()
    try:
        edited = []
        for n in range(5):
            path.write_bytes(original + f"# edited {n}\n".encode())
            edited.append(run(["check", "--exit-zero", single_file], cwd)[0])
    finally:
        path.write_bytes(original)
    cpu_edited = statistics.median(CPU[-5:])
    floors = {}
    for what, statement in (("python -c pass", "pass"), ("import fuselint.cli", "import fuselint.cli")):
        times = [_start(statement) for _ in range(5)]
        floors[what] = (statistics.median(t for t, _c in times), statistics.median(c for _t, c in times))

    cold, warm, single = statistics.median(colds), statistics.median(warms), statistics.median(singles)
    findings = sum(int(line.split()[0]) for line in proc.stdout.splitlines() if line.strip())
    print(f"findings: {findings}")
    print(proc.stdout.rstrip())
    print()
    warm_single = statistics.median(warm_singles)
    print("| run | seconds | CPU seconds | files/s | lines/s |")
    print("| --- | --- | --- | --- | --- |")
    c, w = statistics.median(cpu_cold), statistics.median(cpu_warm)
    print(f"| cold (empty cache) | {cold:.2f} | {c:.2f} | {len(files) / cold:,.0f} | {lines / cold:,.0f} |")
    print(f"| warm (cache filled) | {warm:.2f} | {w:.2f} | {len(files) / warm:,.0f} | {lines / warm:,.0f} |")
    print(
        f"| one file, no cache (modeling_llama.py, process start included) | {single:.3f} | {cpu_single:.3f} | | |"
    )
    print(f"| one file, tree cached (pre-commit) | {warm_single:.3f} | {cpu_warm_single:.3f} | | |")
    print(
        f"| one edited file, tree cached (pre-commit) | {statistics.median(edited):.3f} | {cpu_edited:.3f} | | |"
    )
    for what, (wall, cpu) in floors.items():
        print(f"| floor: `{what}` | {wall:.3f} | {cpu:.3f} | | |")
    print(f"(checkout: {CHECKOUT.name}, byte-compiled)")
    print(
        f"(medians of {args.repeat} cold/warm runs and 5 runs of each single-file case; load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
