"""The seed-30 draw of bench/results/real_breaks_precision.md (prec31, issue 11), disjoint from seeds 24-29.

    PYTHONPATH=. python bench/real_breaks.py --scope packages --cache gt.json \\
        --sample 100000 --seed 30 --sample-out all30.json     # every finding in seed-30 rank order
    python bench/prec31_select.py all30.json > bench/results/real_breaks_sample30.json

The first 50 of the seed-30 ranking are what `--sample 50 --seed 30` draws; a finding already judged in an
earlier sample (same file, line and rule as a `real_breaks_sample*.json` row) is skipped and the next rank
taken, as seed 29 did, so the seven samples stay distinct findings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SIZE = 50


def judged_keys() -> set[tuple[str, int, str]]:
    keys = set()
    for path in sorted(RESULTS.glob("real_breaks_sample*.json")):
        if path.name == "real_breaks_sample30.json":
            continue
        for row in json.loads(path.read_text())["sample"]:
            keys.add((row["file"], row["line"], row["code"]))
    return keys


def main(path: str) -> None:
    ranked = json.loads(Path(path).read_text())
    seen = judged_keys()
    drawn, skipped = [], []
    for rank, row in enumerate(ranked["sample"], 1):
        row = {**row, "rank": rank}
        key = (row["file"], row["line"], row["code"])
        if key in seen:
            skipped.append(
                {"rank": row["rank"], "file": row["file"], "line": row["line"], "code": row["code"]}
            )
            continue
        drawn.append(row)
        if len(drawn) == SIZE:
            break
    out = {key: ranked[key] for key in ("findings", "off_path", "seed", "scope")}
    out["skipped_as_in_seed_24_to_29"] = skipped
    out["sample"] = drawn
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
