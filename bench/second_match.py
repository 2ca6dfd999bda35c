"""FL106's second-match fix on every diffusers scheduler that has the idiom, checked in eager.

diffusers' schedulers find a timestep's place in their schedule with

    indices = (schedule_timesteps == timestep).nonzero()
    pos = 1 if len(indices) > 1 else 0
    return indices[pos].item()

(`index_for_timestep`). `fuselint check --fix --unsafe-fixes` rewrites it with
`torch.nonzero_static(..., size=2, fill_value=-1)` and `torch.where` (`break_fixes.second_match`).
This lints each installed scheduler file that holds the idiom with `index_for_timestep` named a
traced function (so the rewrite does not wait on reach), loads the fixed text as a module of
`diffusers.schedulers`, and calls the original and the fixed `index_for_timestep` on the same
scheduler object for every timestep of its schedule after `set_timesteps(n)`, each timestep given as
a 0-d tensor and as a Python number, against the schedule itself and against the schedule repeated
twice (every timestep matching twice: the second-match path). A timestep that is not in the
schedule is the stated difference (IndexError -> -1) and is counted apart.

    PYTHONPATH=. python bench/second_match.py          # the table
    PYTHONPATH=. python bench/second_match.py --json   # the counts, as JSON
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
import types
import warnings
from pathlib import Path

IDIOM = "pos = 1 if len(indices) > 1 else 0"
STEPS = (2, 10, 25)


def _lint(text: str):
    from fuselint.catalog import load_catalog
    from fuselint.config import Config
    from fuselint.source.lint import lint_text

    config = Config(select=("FL106",), traced_functions=("*.index_for_timestep",))
    return lint_text("scheduler.py", text, load_catalog(), config)


def fixed_text(text: str) -> str:
    from fuselint.source.fixer import fix_text

    return fix_text(text, _lint, unsafe=True).text


def idiom_classes(text: str) -> list[str]:
    """The classes whose own `index_for_timestep` holds the idiom."""
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "index_for_timestep":
                    if IDIOM in ast.get_source_segment(text, fn):
                        names.append(node.name)
    return names


def load_fixed(stem: str, text: str) -> types.ModuleType:
    """The fixed text as a sibling module of `diffusers.schedulers` (its relative imports resolve)."""
    name = f"diffusers.schedulers._fixed_{stem}"
    module = types.ModuleType(name)
    module.__package__ = "diffusers.schedulers"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(text, f"<fixed {stem}>", "exec"), module.__dict__)  # noqa: S102 - fuselint's own output
    return module


def _index(fn, scheduler, timestep, schedule):
    try:
        return fn(scheduler, timestep, schedule)
    except IndexError:
        return "IndexError"


def compare(original, fixed, scheduler) -> dict:
    """Lookups equal and differing over the scheduler's current schedule (see the module doc)."""
    import torch

    counts = {"lookups": 0, "equal": 0, "differ": [], "no_match": 0, "no_match_as_stated": 0}
    schedule = scheduler.timesteps
    for candidates in (schedule, torch.cat([schedule, schedule])):
        for t in schedule:
            for timestep in (t, t.item()):
                want = _index(original, scheduler, timestep, candidates)
                got = _index(fixed, scheduler, timestep, candidates)
                counts["lookups"] += 1
                if want == got:
                    counts["equal"] += 1
                else:
                    counts["differ"].append((float(t), want, got))
    missing = schedule.max() + 1  # in no schedule: the stated difference
    counts["no_match"] = 1
    got = _index(fixed, scheduler, missing, schedule)
    counts["no_match_as_stated"] = int(
        _index(original, scheduler, missing, schedule) == "IndexError" and got == -1
    )
    return counts


def run() -> list[dict]:
    import diffusers.schedulers

    folder = Path(diffusers.schedulers.__file__).parent
    rows = []
    for path in sorted(folder.glob("scheduling_*.py")):
        text = path.read_text(encoding="utf-8")
        classes = idiom_classes(text)
        if not classes:
            continue
        stem = path.stem
        fixed = fixed_text(text)
        if idiom_classes(fixed) == classes:
            rows.append({"file": path.name, "classes": classes, "rewritten": False})
            continue
        try:
            original = importlib.import_module(f"diffusers.schedulers.{stem}")
        except ImportError as error:  # an optional dependency (torchsde) that is not installed
            rows.append(
                {"file": path.name, "classes": classes, "rewritten": True, "steps": {0: f"import: {error}"}}
            )
            continue
        patched = load_fixed(stem, fixed)
        for name in classes:
            cls = getattr(original, name)
            row = {"file": path.name, "classes": [name], "rewritten": True, "steps": {}}
            for steps in STEPS:
                scheduler = cls()
                try:
                    scheduler.set_timesteps(steps)
                except Exception as error:  # noqa: BLE001 - a schedule this config cannot make
                    row["steps"][steps] = f"set_timesteps: {type(error).__name__}: {error}"[:120]
                    continue
                row["steps"][steps] = compare(
                    cls.index_for_timestep, getattr(patched, name).index_for_timestep, scheduler
                )
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| file | class | lookups equal | no match: IndexError -> -1 |",
        "|---|---|---|---|",
    ]
    total = equal = 0
    for row in rows:
        if not row["rewritten"]:
            lines.append(f"| {row['file']} | {', '.join(row['classes'])} | not rewritten | - |")
            continue
        done = [c for c in row["steps"].values() if isinstance(c, dict)]
        skipped = [c for c in row["steps"].values() if isinstance(c, str)]
        n, e = sum(c["lookups"] for c in done), sum(c["equal"] for c in done)
        stated = sum(c["no_match_as_stated"] for c in done)
        total, equal = total + n, equal + e
        note = f" (skipped: {'; '.join(skipped)})" if skipped else ""
        lines.append(f"| {row['file']} | {row['classes'][0]} | {e} of {n}{note} | {stated} of {len(done)} |")
    rewritten = sum(1 for r in rows if r["rewritten"])
    head = f"**{equal} of {total} lookups equal** over {rewritten} schedulers rewritten ({len(rows)} with the idiom)"
    return head + "\n\n" + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = run()
    print(json.dumps(rows, indent=1, default=str) if args.json else table(rows))
    if any(isinstance(c, dict) and c["differ"] for r in rows for c in r.get("steps", {}).values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
