"""Which transformers model families enter the fix-rate corpus as UNTUNED19: fixes17's rule, the rest of its walk.

The amendment, written and committed before any candidate past fixes17's cut was traced (fixes19):
- The rule is `bench/untuned17_select.py`'s (its docstring): the same transformers (5.23.0), the same
  seeded walk order (`families()`), the same tiny model, input, break sites and time limits per step.
  No fuselint fix is written while these families are walked.
- Candidates: positions CUT..514 of that order (fixes17 stopped at CUT = 260), in order. A candidate
  fixes17 already traced past its cut (bench/results/untuned17_select_past_cut.jsonl, 54 rows: 260-265
  and 350-397, none breaking) keeps its row and is not traced again; the others are traced one at a
  time.
- The first 10 that log a break site inside transformers enter, as in fixes17's rule.
- A time cut, written down before the walk: no candidate is started after STOP_AT (13:40 UTC on the
  day of the walk, 2026-11-27), whatever the walk found; the one in progress then is finished. The row
  after the last one printed says where the walk stopped.

    PYTHONPATH=. python bench/untuned19_select.py > bench/results/untuned19_select.jsonl

prints each candidate's row (fixes17's form, with its walk position `at` and `kept` where fixes17's
row is reused), one JSON line each, and a last line `{"stopped": ...}`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from untuned17_select import CUT, LIMIT, _alarm, candidate_row, families  # noqa: E402

STOP_AT = "13:40"  # UTC; the time cut of the amendment (see the docstring)
PAST_CUT = Path(__file__).resolve().parent / "results" / "untuned17_select_past_cut.jsonl"


def kept_rows(path: Path) -> dict[str, dict]:
    """fixes17's rows of candidates past its cut, by family."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["family"]: row for row in rows}


def past_stop(now: datetime.datetime, stop_at: str) -> bool:
    """True once the UTC clock time of `now` is at or past `stop_at` ("HH:MM")."""
    hour, minute = (int(n) for n in stop_at.split(":"))
    return (now.hour, now.minute) >= (hour, minute)


def walk(order: list[str], kept: dict[str, dict], trace, clock, stop_at: str = STOP_AT):
    """Rows of the walk from CUT on: kept rows reused, the others traced by `trace`, until LIMIT
    candidates enter, the order ends, or `clock()` is past `stop_at` before a trace starts; the last
    row says why the walk stopped."""
    chosen = 0
    for at in range(CUT, len(order)):
        family = order[at]
        if chosen == LIMIT:
            yield {"stopped": f"{LIMIT} entered", "at": at}
            return
        if family in kept:
            row = {**kept[family], "kept": True}
            row.pop("enters", None)
        else:
            if past_stop(clock(), stop_at):
                yield {"stopped": f"time cut {stop_at} UTC", "at": at}
                return
            row = trace(family)
        row["at"] = at
        if row.get("sites"):
            chosen += 1
            row["enters"] = True
        yield row
    yield {"stopped": "end of the walk", "at": len(order)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    rows = walk(
        families(),
        kept_rows(PAST_CUT),
        candidate_row,
        lambda: datetime.datetime.now(datetime.timezone.utc),
    )
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
