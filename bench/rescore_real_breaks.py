"""Re-score the judged samples of bench/results/real_breaks_precision.md against a newer lint, without
judging again: each finding keeps its verdict, and is looked up as kept, marked (kept on a side
road, which `--paths normal` leaves out) or gone.

    PYTHONPATH=. python bench/real_breaks.py --scope packages --cache gt.json \\
        --sample 100000 --seed 24 --sample-out all.json      # every finding, in the sample format
    python bench/rescore_real_breaks.py all.json

Prints, per sample table and for all of them, the findings left, how many were newly marked or are
gone (by verdict), and the real share of what `--paths normal` keeps.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

TABLES = Path(__file__).resolve().parent / "results" / "real_breaks_precision.md"
# | 9 | FL102 | `diffusers/pipelines/...py:235` | `source` | - | side road | why |
ROW = re.compile(
    r"^\| (\d+) \| (FL\d+) \| `([^`]+\.py):(\d+)` \| .* \| ([^|]+) \| (real|side road|false) \| "
)


def judged(text: str) -> dict[str, list[tuple[str, int, str, str]]]:
    """Per sample heading (`## The 50`, `### The 50 (seed 25)`): (file, line, code, verdict) of each row."""
    samples: dict[str, list[tuple[str, int, str, str]]] = {}
    heading = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("# ").strip() if "The 50" in line else None
            continue
        match = ROW.match(line)
        if heading and match:
            _, code, file, row, _path, verdict = match.groups()
            samples.setdefault(heading, []).append((file, int(row), code, verdict))
    return samples


def rescore(rows: list[tuple[str, int, str, str]], found: dict[tuple[str, int, str], str | None]) -> dict:
    out: Counter = Counter()
    for file, line, code, verdict in rows:
        key = (file, line, code)
        if key not in found:
            out[f"gone {verdict}"] += 1
        elif found[key] is not None:
            out[f"marked {verdict}"] += 1
        else:
            out[f"kept {verdict}"] += 1
    return out


def main() -> None:
    payload = json.loads(Path(sys.argv[1]).read_text())
    found = {(f["file"], f["line"], f["code"]): f["path"] for f in payload["sample"]}
    samples = judged(TABLES.read_text())
    samples["all"] = [row for sample in samples.values() for row in sample]
    for heading, rows in samples.items():
        counts = rescore(rows, found)
        kept = sum(v for k, v in counts.items() if k.startswith("kept"))
        real = counts["kept real"]
        moved = {k: v for k, v in sorted(counts.items()) if not k.startswith("kept")}
        print(
            f"{heading}: {len(rows)} judged; kept by --paths normal {kept}, real {real} ({100 * real / max(kept, 1):.1f}%)"
        )
        print(f"  kept by verdict: { {k[5:]: v for k, v in sorted(counts.items()) if k.startswith('kept')} }")
        print(f"  marked or gone: {moved or 'none'}")


if __name__ == "__main__":
    main()
