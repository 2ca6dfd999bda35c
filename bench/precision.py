"""Precision of the static source rules on a real model zoo (transformers/models by default).

Downloads the transformers wheel (once, into /tmp/tf; not committed), lints
`transformers/models` (or the folder given with `--target`, e.g. a copy of an installed
package) with `fuselint check --format json`, prints findings per rule and the lint speed, then
draws a seeded, stable sample of findings and prints each with 6 lines of context so a person
can judge it (real blocker or false positive). A finding that sits on a deprecation, misuse or
error path carries `details.path`; it is printed, and `--paths normal` leaves such findings out
of the sample. The judged tables live in bench/results/precision*.md.

    PYTHONPATH=. python bench/precision.py [--sample 30] [--seed 0] [--rules FL1,FL4]
        [--target DIR] [--paths all|normal] [--reached]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

WHEEL_DIR = Path("/tmp/tf")


def models_dir() -> Path:
    target = WHEEL_DIR / "transformers" / "models"
    if target.is_dir():
        return target
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "transformers", "-d", str(WHEEL_DIR)],
        check=True,
    )
    wheel = next(WHEEL_DIR.glob("transformers-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(WHEEL_DIR, [n for n in zf.namelist() if n.startswith("transformers/")])
    return target


def lint(target: Path, rules: str) -> tuple[list[dict], float]:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "fuselint", "check", "--no-cache", "--exit-zero", "--format", "json",
         "--select", rules, str(target)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(result.stdout), time.perf_counter() - start


def stable_sample(findings: list[dict], root: Path, seed: int, size: int) -> list[dict]:
    """A seeded sample where each finding's chance depends only on itself (file, line, rule):
    changing a rule elsewhere in the tree leaves the rest of the sample as it was, so a judged
    sample stays comparable across iterations."""

    def rank(finding: dict) -> str:
        name = Path(finding["filename"]).relative_to(root)
        key = f"{seed}:{name}:{finding['location']['row']}:{finding['code']}"
        return hashlib.sha256(key.encode()).hexdigest()

    return sorted(findings, key=rank)[:size]


def context(finding: dict, lines: int = 6) -> str:
    path = Path(finding["filename"])
    text = path.read_text(encoding="utf-8").splitlines()
    row = finding["location"]["row"]
    begin, end = max(1, row - lines), min(len(text), row + lines)
    return "\n".join(f"{'>' if n == row else ' '}{n:5d} | {text[n - 1]}" for n in range(begin, end + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rules", default="FL1,FL4")
    parser.add_argument("--target", type=Path, help="folder to lint instead of transformers/models")
    parser.add_argument("--paths", choices=("all", "normal"), default="all")
    parser.add_argument(
        "--reached", action="store_true", help="sample only findings that whole-program reach adds"
    )
    args = parser.parse_args()
    target = args.target.resolve() if args.target else models_dir()
    files = sum(1 for _ in target.rglob("*.py"))
    findings, seconds = lint(target, args.rules)
    print(f"{len(findings)} findings in {files} files, {seconds:.1f} s ({files / seconds:.0f} files/s)")
    for code, count in sorted(collections.Counter(f["code"] for f in findings).items()):
        print(f"  {code}  {count}")
    off_path = sum(1 for f in findings if (f.get("details") or {}).get("path"))
    print(f"  on a deprecation/misuse/error path: {off_path}")
    if args.paths == "normal":
        findings = [f for f in findings if not (f.get("details") or {}).get("path")]
    reached = [f for f in findings if "(reached from " in f["message"]]
    print(f"  in a function only another file's entry reaches: {len(reached)}")
    if args.reached:
        findings = reached
    sample = stable_sample(findings, target, args.seed, args.sample)
    for index, finding in enumerate(sample, 1):
        where = f"{Path(finding['filename']).relative_to(target)}:{finding['location']['row']}"
        path = (finding.get("details") or {}).get("path")
        marker = f" [path: {path}]" if path else ""
        print(f"\n#{index} {finding['code']} {where}{marker}\n  {finding['message']}\n{context(finding)}")


if __name__ == "__main__":
    main()
