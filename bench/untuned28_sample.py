"""The draw for bench/results/precision_untuned28.md (ho28, issue 11), fixed before the lint ran.

    python bench/untuned28_sample.py bench/results/precision_untuned28.json > bench/results/precision_untuned28_sample.json

Reads `fuselint check --format json` output and prints the findings to judge as JSON: all of them when
there are at most 60 (a census), else 60 drawn by `random.Random(28).sample` from the findings sorted by
(file, line, column, rule), so the draw depends on neither the output order nor the hash seed. Each row is
a finding's stable key (file, line, rule) and its `details.path` marker (empty when it has none).
"""

from __future__ import annotations

import json
import random
import sys

SEED = 28
SIZE = 60


def key(finding: dict) -> tuple:
    return (finding["filename"], finding["location"]["row"], finding["location"]["column"], finding["code"])


def draw(findings: list[dict]) -> list[dict]:
    ordered = sorted(findings, key=key)
    if len(ordered) <= SIZE:
        return ordered
    return sorted(random.Random(SEED).sample(ordered, SIZE), key=key)


def main(path: str) -> None:
    with open(path) as fh:
        findings = json.load(fh)
    rows = [{"file": f["filename"], "line": f["location"]["row"], "rule": f["code"],
             "path": f.get("details", {}).get("path", "")} for f in draw(findings)]  # fmt: skip
    json.dump({"seed": SEED, "of": len(findings), "drawn": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
