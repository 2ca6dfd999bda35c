"""The draw for bench/results/precision_untuned30.md (prec30, issue 11), fixed before the lint ran.

    python bench/untuned30_sample.py bench/results/precision_untuned30.json > bench/results/precision_untuned30_sample.json

The packages (neuralforecast 3.3.0, torchtune 0.6.1) and folders were chosen before any lint: no rule was
tuned on them and neither is named in docs/, bench/ or the README before this file. Reads `fuselint check
--format json` output and prints the findings to judge: all of them when there are at most 40 (a census),
else 40 drawn by `random.Random(30).sample` from the findings ordered by (file, line, column, rule), so the
draw depends on neither the output order nor the hash seed. Each row is a finding's stable key (file, line,
rule) and its `details.path` marker (empty when it has none).
"""

from __future__ import annotations

import json
import random
import sys

SEED = 30
SIZE = 40


def stable_key(finding: dict) -> tuple:
    return (finding["filename"], finding["location"]["row"], finding["location"]["column"], finding["code"])


def draw(findings: list[dict], seed: int = SEED, size: int = SIZE) -> list[dict]:
    ordered = sorted(findings, key=stable_key)
    if len(ordered) <= size:
        return ordered
    return sorted(random.Random(seed).sample(ordered, size), key=stable_key)


def row(finding: dict) -> dict:
    marker = (finding.get("details") or {}).get("path") or ""
    return {
        "file": finding["filename"],
        "line": finding["location"]["row"],
        "rule": finding["code"],
        "path": marker,
    }


def main(path: str, seed: int = SEED, size: int = SIZE) -> None:
    """Print the draw of `seed` (`size` findings, or all of them when there are no more) as JSON;
    bench/untuned31_sample.py and untuned31b_sample.py draw with their own seeds and sizes."""
    with open(path) as fh:
        findings = json.load(fh)
    drawn = [row(f) for f in draw(findings, seed, size)]
    json.dump({"seed": seed, "of": len(findings), "drawn": drawn}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
