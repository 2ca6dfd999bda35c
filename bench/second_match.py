"""FL106's second-match fixes on every diffusers scheduler that has one of the idioms, checked in eager.

diffusers' schedulers find a timestep's place in their schedule in two ways:

    indices = (schedule_timesteps == timestep).nonzero()          # "second": Euler, Heun, CM, ...
    pos = 1 if len(indices) > 1 else 0
    return indices[pos].item()

    index_candidates = (schedule_timesteps == timestep).nonzero()  # "fallback": the DPM-Solvers
    if len(index_candidates) == 0:
        step_index = len(self.timesteps) - 1
    elif len(index_candidates) > 1:
        step_index = index_candidates[1].item()
    else:
        step_index = index_candidates[0].item()

`fuselint check --fix --unsafe-fixes` rewrites both with `torch.nonzero_static(..., size=2,
fill_value=-1)` and `torch.where` (`break_fixes.second_match`). This lints each installed scheduler
file that holds an idiom with the method that holds it named a traced function (so the rewrite does
not wait on reach), loads the fixed text as a module of `diffusers.schedulers`, and calls the
original and the fixed method on the same scheduler object for every timestep of its schedule after
`set_timesteps(n)`, each timestep given as a 0-d tensor and as a Python number, against the schedule
itself and against the schedule repeated twice (every timestep matching twice: the second-match
path). A timestep that is not in the schedule: for "fallback" one more lookup that must be equal;
for "second" the stated difference (IndexError -> -1), counted apart.

    PYTHONPATH=. python bench/second_match.py          # the table
    PYTHONPATH=. python bench/second_match.py --json   # the counts, as JSON
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import sys
import types
import warnings
from pathlib import Path

IDIOMS = {"pos = 1 if len(indices) > 1 else 0": "second", "if len(index_candidates) == 0:": "fallback"}
METHODS = ("index_for_timestep", "_init_step_index")
STEPS = (2, 10, 25)


def _lint(text: str):
    from fuselint.catalog import load_catalog
    from fuselint.config import Config
    from fuselint.source.lint import lint_text

    config = Config(select=("FL106",), traced_functions=tuple(f"*.{m}" for m in METHODS))
    return lint_text("scheduler.py", text, load_catalog(), config)


def fixed_text(text: str) -> str:
    from fuselint.source.fixer import fix_text

    return fix_text(text, _lint, unsafe=True).text


def idioms(text: str) -> list[tuple[str, str, str]]:
    """(class, method, idiom) for each method of `METHODS` that holds an idiom."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in METHODS:
                    body = ast.get_source_segment(text, fn)
                    found += [(node.name, fn.name, kind) for line, kind in IDIOMS.items() if line in body]
    return found


def load_fixed(stem: str, text: str) -> types.ModuleType:
    """The fixed text as a sibling module of `diffusers.schedulers` (its relative imports resolve)."""
    name = f"diffusers.schedulers._fixed_{stem}"
    module = types.ModuleType(name)
    module.__package__ = "diffusers.schedulers"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(text, f"<fixed {stem}>", "exec"), module.__dict__)  # noqa: S102 - fuselint's own output
    return module


def _index(fn, scheduler, timestep, schedule):
    """What `fn` finds for `timestep` in `schedule` (set as the scheduler's own schedule too)."""
    saved = scheduler.timesteps
    scheduler.timesteps = schedule
    try:
        if "schedule_timesteps" in inspect.signature(fn).parameters:
            return fn(scheduler, timestep, schedule)
        fn(scheduler, timestep)
        return scheduler._step_index
    except IndexError:
        return "IndexError"
    finally:
        scheduler.timesteps = saved


def compare(original, fixed, scheduler, kind: str) -> dict:
    """Lookups equal and differing over the scheduler's current schedule (see the module doc)."""
    import torch

    counts = {"lookups": 0, "equal": 0, "differ": [], "no_match_as_stated": 0}
    schedule = scheduler.timesteps
    missing = schedule.max() + 1  # in no schedule
    for candidates in (schedule, torch.cat([schedule, schedule])):
        for t in [*schedule, *([missing] if kind == "fallback" else [])]:
            for timestep in (t, t.item()):
                want = _index(original, scheduler, timestep, candidates)
                got = _index(fixed, scheduler, timestep, candidates)
                counts["lookups"] += 1
                if want == got:
                    counts["equal"] += 1
                else:
                    counts["differ"].append((float(t), want, got))
    if kind == "second":
        want, got = (
            _index(original, scheduler, missing, schedule),
            _index(fixed, scheduler, missing, schedule),
        )
        counts["no_match_as_stated"] = int(want == "IndexError" and got == -1)
    return counts


def run() -> list[dict]:
    import diffusers.schedulers

    folder = Path(diffusers.schedulers.__file__).parent
    rows = []
    for path in sorted(folder.glob("scheduling_*.py")):
        text = path.read_text(encoding="utf-8")
        found = idioms(text)
        if not found:
            continue
        fixed = fixed_text(text)
        left = set(idioms(fixed))
        try:
            original = importlib.import_module(f"diffusers.schedulers.{path.stem}")
            patched = load_fixed(path.stem, fixed)
        except ImportError as error:  # an optional dependency (torchsde) that is not installed
            original = patched = None
            reason = f"import: {error}"
        for name, method, kind in found:
            row = {"file": path.name, "class": name, "method": method, "idiom": kind, "steps": {}}
            rows.append(row)
            row["rewritten"] = (name, method, kind) not in left
            if not row["rewritten"] or original is None:
                row["steps"][0] = reason if original is None else "not rewritten"
                continue
            cls = getattr(original, name)
            for steps in STEPS:
                scheduler = cls()
                try:
                    scheduler.set_timesteps(steps)
                except Exception as error:  # noqa: BLE001 - a schedule this config cannot make
                    row["steps"][steps] = f"set_timesteps({steps}): {type(error).__name__}"
                    continue
                fn, new = getattr(cls, method), getattr(getattr(patched, name), method)
                row["steps"][steps] = compare(fn, new, scheduler, kind)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| file | class.method | idiom | lookups equal | no match: IndexError -> -1 |",
        "|---|---|---|---|---|",
    ]
    total = equal = 0
    for row in rows:
        done = [c for c in row["steps"].values() if isinstance(c, dict)]
        skipped = [c for c in row["steps"].values() if isinstance(c, str)]
        n, e = sum(c["lookups"] for c in done), sum(c["equal"] for c in done)
        total, equal = total + n, equal + e
        stated = (
            f"{sum(c['no_match_as_stated'] for c in done)} of {len(done)}"
            if row["idiom"] == "second"
            else "-"
        )
        note = f" ({'; '.join(skipped)})" if skipped else ""
        where = f"{row['class']}.{row['method']}"
        lines.append(f"| {row['file']} | {where} | {row['idiom']} | {e} of {n}{note} | {stated} |")
    rewritten = sum(1 for r in rows if r["rewritten"])
    head = f"**{equal} of {total} lookups equal** over {rewritten} of {len(rows)} methods with an idiom rewritten"
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
