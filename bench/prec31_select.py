"""The seed-30 and seed-31 draws of bench/results/real_breaks_precision.md (prec31, issue 11), each disjoint
from the samples before it.

    PYTHONPATH=. python bench/real_breaks.py --scope packages --cache gt.json \\
        --sample 100000 --seed 30 --sample-out all30.json     # every finding in seed-30 rank order
    python bench/prec31_select.py all30.json > bench/results/real_breaks_sample30.json

The first 50 of the seed-30 ranking are what `--sample 50 --seed 30` draws; a finding already judged in an
earlier sample (same file, line and rule as a `real_breaks_sample*.json` row) is skipped and the next rank
taken, as seed 29 did, so the samples stay distinct findings. Seed 31 is drawn the same way from the lint of
branch prec31 (`--seed 31`, into real_breaks_sample31.json), skipping seeds 24-30.

    python bench/prec31_select.py all32.json --paths normal > bench/results/real_breaks_sample32.json

`--paths normal` draws only from the findings `fuselint check --paths normal` keeps (no `path` marker):
seed 32 (moe21) is drawn so, from branch moe21's lint, skipping seeds 24-31.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SIZE = 50


def judged_keys(seed: int) -> set[tuple[str, int, str]]:
    """(file, line, rule) of every finding judged in an earlier sample (not the one of `seed` itself)."""
    keys = set()
    for path in sorted(RESULTS.glob("real_breaks_sample*.json")):
        if path.name == f"real_breaks_sample{seed}.json":
            continue
        for row in json.loads(path.read_text())["sample"]:
            keys.add((row["file"], row["line"], row["code"]))
    return keys


def main(path: str, normal_only: bool = False) -> None:
    ranked = json.loads(Path(path).read_text())
    seen = judged_keys(ranked["seed"])
    drawn, skipped = [], []
    for rank, row in enumerate(ranked["sample"], 1):
        if normal_only and row["path"] is not None:
            continue
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
    if normal_only:
        out["paths"] = "normal"
    out[f"skipped_as_in_seed_24_to_{ranked['seed'] - 1}"] = skipped
    out["sample"] = drawn
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ranked", help="a --sample 100000 file of bench/real_breaks.py")
    parser.add_argument(
        "--paths", choices=("all", "normal"), default="all", help="normal: draw from kept findings"
    )
    args = parser.parse_args()
    main(args.ranked, args.paths == "normal")
