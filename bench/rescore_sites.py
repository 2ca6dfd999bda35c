"""Re-score a judged census against a later lint: which judged findings it still reports.

    PYTHONPATH=. python bench/rescore_sites.py bench/results/precision_untuned28_sites.json LINT.json

The sites file's `findings` hold each judged finding's key (`file`, `line`, `rule`) and `verdict`
(real / side road / false); LINT.json is `fuselint check --format json` run from the same folder
(paths relative to it). A judged finding is kept (its code on its line), marked (kept with a
`details.path` road, which `--paths normal` drops), or gone. Prints the counts per verdict and the
real share of what `--paths normal` keeps. A verdict stays its verdict: nothing is judged again.
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(sites_path: str, lint_path: str) -> int:
    judged = json.load(open(sites_path))["findings"]
    lint = json.load(open(lint_path))
    findings = lint["findings"] if isinstance(lint, dict) else lint
    reported = {}
    for f in findings:
        key = (f["filename"], f["location"]["row"], f["code"])
        marked = bool((f.get("details") or {}).get("path"))
        reported[key] = reported.get(key, True) and marked  # marked only if every copy is
    states = Counter()
    for j in judged:
        key = (j["file"], j["line"], j["rule"])
        state = "gone" if key not in reported else ("marked" if reported[key] else "kept")
        states[(j["verdict"], state)] += 1
    verdicts = sorted({v for v, _ in states})
    for v in verdicts:
        print(
            f"{v:10s} kept {states[(v, 'kept')]:3d}  marked {states[(v, 'marked')]:3d}  gone {states[(v, 'gone')]:3d}"
        )
    kept = sum(n for (v, s), n in states.items() if s == "kept")
    real = states[("real", "kept")]
    share = f"{100 * real / kept:.1f}%" if kept else "-"
    print(f"--paths normal keeps {kept} of {len(judged)} judged: {real} real ({share})")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
