"""Re-score judged precision samples against lint JSON: which judged findings are still reported.

    PYTHONPATH=. python bench/rescore_judged.py --json main=DIR_A --json prec4=DIR_B
    PYTHONPATH=. python bench/rescore_judged.py --json main=DIR --recall bench/results/precision_untuned5_sites.json

Each DIR holds `fuselint check --format json` output per package (`torchaudio.json`,
`kornia.json`, `monai.json`, `segmentation_models_pytorch.json`, `torchmetrics.json`,
`x_transformers.json`, `e3nn.json`, `nflows.json`, `vector_quantize_pytorch.json`,
`reformer_pytorch.json`, `performer_pytorch.json`, `torchsde.json`, `zuko.json`, `normflows.json`,
`pyro.json`, `speechbrain.json`, `asteroid.json`, `asteroid_filterbanks.json`,
`pytorch_tabnet.json`, `pytorch_metric_learning.json`, `stable_baselines3.json`, `gpytorch.json`,
`linear_operator.json`),
linted from a folder holding the unzipped wheels. Every verdict row of
bench/results/precision_untuned.md, precision_untuned2.md, precision_untuned3.md,
precision_untuned5.md, precision_untuned6.md, precision_untuned7.md, precision_untuned8.md and
precision_untuned10.md, precision_untuned11.md, precision_untuned12.md, precision_untuned14.md
precision_untuned15.md and precision_untuned16.md
(`| #n | file:line | FLxxx | verdict | ...`) is looked up: kept (its code
on its line), tagged (kept, on a side road), merged (named in its site's `details.also`), gone.
Prints, per sample and lint, the findings left, real, side roads tagged / untagged, false, and
the real share with and without the side roads `--paths normal` leaves out. A sample whose
packages have no JSON in DIR is skipped with a note.

`--recall SITES.json` (a break-site list that a probe script wrote, e.g. precision_untuned5_sites.json:
package, model, file from the package root, line, gb id) instead scores static recall per lint:
a site counts when an FL1xx finding of its package's JSON sits on its line. Prints one row per
package and the total, then every missed site; a package with no JSON in DIR is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| (#?[kstcdzenpqabmwgy]?\d+) \| ([\w/.]+\.py|xt):(\d+) \| (FL\d+) \| ([^|]+) \|")
PACKAGES = (
    "torchaudio", "kornia", "segmentation_models_pytorch", "torchmetrics", "e3nn", "x_transformers",
    "nflows", "vector_quantize_pytorch", "reformer_pytorch", "performer_pytorch", "torchsde", "zuko",
    "normflows", "pyro", "speechbrain", "asteroid", "asteroid_filterbanks", "pytorch_tabnet",
    "pytorch_metric_learning", "stable_baselines3", "gpytorch", "linear_operator",
)  # fmt: skip
SAMPLES = {
    "torchaudio's 50 (#1-#50)": ("precision_untuned.md", "torchaudio", lambda tag: not tag.startswith("k")),
    "kornia k2-k50": ("precision_untuned.md", "torchaudio", lambda tag: tag.startswith("k")),
    "MONAI's 50": ("precision_untuned2.md", "monai", lambda tag: tag[0].isdigit()),
    "smp + torchmetrics (15)": ("precision_untuned2.md", "monai", lambda tag: tag[0] in "st"),
    "x-transformers + e3nn (46)": ("precision_untuned3.md", "x_transformers", lambda tag: True),
    # precision_untuned5.md: #n rows are the default lint's findings, #cn the ones that only the
    # `traced-functions` lint reports (its pyproject.toml: see that file's commands).
    "nflows + vector-quantize-pytorch, default (#1-#16)": (
        "precision_untuned5.md",
        "vector_quantize_pytorch",
        lambda tag: tag[0].isdigit(),
    ),
    "nflows traced-functions only (#c1-)": (
        "precision_untuned5.md",
        "nflows",
        lambda tag: tag.startswith("c"),
    ),
    # precision_untuned6.md: #c1-#c3 the tune pair's traced-functions findings (`*.generate`), #c4-
    # torchsde's (held out), #d the default findings judge6's changes added (#d5-#d8 judged false).
    "reformer + performer, traced (#c1-#c3)": (
        "precision_untuned6.md",
        "reformer_pytorch",
        lambda tag: tag in ("c1", "c2", "c3"),
    ),
    "torchsde (held out), traced (#c4-)": (
        "precision_untuned6.md",
        "torchsde",
        lambda tag: tag.startswith("c") and tag not in ("c1", "c2", "c3"),
    ),
    "reformer + performer, judge6's default findings (#d)": (
        "precision_untuned6.md",
        "reformer_pytorch",
        lambda tag: tag.startswith("d"),
    ),
    # precision_untuned7.md: #z zuko's traced findings, #e the torchsde findings judge7's changes
    # added (traced), #n normflows' (held out) traced findings at the end of the round.
    "zuko (tune), traced (#z)": ("precision_untuned7.md", "zuko", lambda tag: tag.startswith("z")),
    "torchsde (tune), judge7's added findings (#e)": (
        "precision_untuned7.md",
        "torchsde",
        lambda tag: tag.startswith("e"),
    ),
    "normflows (held out), traced (#n)": (
        "precision_untuned7.md",
        "normflows",
        lambda tag: tag.startswith("n"),
    ),
    # precision_untuned8.md: #p every default finding on pyro (held out), #q a random 10 of the
    # findings only the `traced-functions` lint reports.
    "pyro (held out), default (#p)": ("precision_untuned8.md", "pyro", lambda tag: tag.startswith("p")),
    "pyro (held out), traced only, random 10 (#q)": (
        "precision_untuned8.md",
        "pyro",
        lambda tag: tag.startswith("q"),
    ),
    # precision_untuned10.md: #s a random 50 of speechbrain's default findings (held out).
    "speechbrain (held out), default, random 50 (#s)": (
        "precision_untuned10.md",
        "speechbrain",
        lambda tag: tag.startswith("s"),
    ),
    # precision_untuned11.md: #a every default finding on asteroid + asteroid-filterbanks, main's and
    # judge13's (the package was tuned on by judge13).
    "asteroid (tuned by judge13), default (#a)": (
        "precision_untuned11.md",
        "asteroid",
        lambda tag: tag.startswith("a"),
    ),
    # precision_untuned12.md: #b every traced finding on pytorch-tabnet (held out by judge13).
    "pytorch-tabnet (held out), traced (#b)": (
        "precision_untuned12.md",
        "pytorch_tabnet",
        lambda tag: tag.startswith("b"),
    ),
    # precision_untuned14.md: #w every default finding of main on pytorch-metric-learning (blind),
    # #m a random 50 of judge14's final default findings (the package was tuned on by judge14).
    "pytorch-metric-learning (tune), main's default (#w)": (
        "precision_untuned14.md",
        "pytorch_metric_learning",
        lambda tag: tag.startswith("w"),
    ),
    "pytorch-metric-learning (tune), judge14's default, random 50 (#m)": (
        "precision_untuned14.md",
        "pytorch_metric_learning",
        lambda tag: tag.startswith("m"),
    ),
    # precision_untuned15.md: #g every finding on stable-baselines3 (held out by judge14), traced.
    "stable-baselines3 (held out), traced (#g)": (
        "precision_untuned15.md",
        "stable_baselines3",
        lambda tag: tag.startswith("g"),
    ),
    # precision_untuned16.md: #y every finding on gpytorch + linear_operator (held out by judge16),
    # default and traced lints together (a lint scores the rows it still reports).
    "gpytorch + linear_operator (held out), every finding (#y)": (
        "precision_untuned16.md",
        "gpytorch",
        lambda tag: tag.startswith("y"),
    ),
}


def rows(name: str, default: str):
    """(tag, package, path, line, code, verdict class) of each verdict row of a result file."""
    for line in (ROOT / "bench" / "results" / name).read_text().splitlines():
        match = ROW.match(line)
        if not match:
            continue
        tag, path, number, code, verdict = match.groups()
        path = "x_transformers.py" if path == "xt" else path  # precision_untuned3.md's abbreviation
        package = path.split("/")[0]
        if package not in PACKAGES:  # MONAI rows name paths inside the package
            path, package = f"{default}/{path}", default
        yield tag, package, path, int(number), code, _verdict(verdict)


def _verdict(text: str) -> str:
    text = text.lower()
    if "duplicate" in text:
        return "duplicate"
    for word in ("real", "side road"):
        if text.startswith(word):
            return word
    return "false" if "false" in text else text.strip()


def load(folder: Path, package: str) -> dict[tuple[str, int], list[dict]]:
    found: dict[tuple[str, int], list[dict]] = {}
    for f in json.loads((folder / f"{package}.json").read_text()):
        # The package's own path: what follows the folder the wheels were unzipped into.
        parts = Path(f["filename"]).parts
        start = max(i for i, p in enumerate(parts) if p == package)
        found.setdefault(("/".join(parts[start:]), f["location"]["row"]), []).append(f)
    return found


def status(found: dict, path: str, line: int, code: str) -> str:
    here = found.get((path, line), [])
    for f in here:
        if f["code"] == code:
            return "tagged" if "path" in f["details"] else "kept"
    also = [p for f in here for p in f["details"].get("also", "").split(", ")]
    return "merged" if any(p.startswith(f"{code} {line}:") for p in also) else "gone"


def recall(sites_file: Path, lints: list[tuple[str, Path]]) -> None:
    """Static recall of the break sites in `sites_file` for each lint (see the module doc)."""
    records = json.loads(sites_file.read_text())["sites"]
    sites = sorted({(r["package"], r["file"], r["line"]): r["gb"] for r in records}.items())
    print("| lint | package | sites | with an FL1 finding on the line | recall |")
    print("|---|---|---|---|---|")
    for label, folder in lints:
        missed = []
        for package in sorted({p for (p, _, _), _ in sites}):
            if not (folder / f"{package}.json").is_file():
                print(f"| {label} | {package} | no lint JSON in {folder} |")
                continue
            found = load(folder, package)
            mine = [(key, gb) for key, gb in sites if key[0] == package]
            hits = [
                key for key, _ in mine
                if any(f["code"].startswith("FL1") for f in found.get((f"{package}/{key[1]}", key[2]), []))
            ]  # fmt: skip
            missed += [(key, gb) for key, gb in mine if key not in hits]
            print(f"| {label} | {package} | {len(mine)} | {len(hits)} | {len(hits) / len(mine):.0%} |")
        scored = [key for key, _ in sites if (folder / f"{key[0]}.json").is_file()]
        hit = len(scored) - len(missed)
        print(f"| {label} | all | {len(scored)} | {hit} | {hit / max(len(scored), 1):.0%} |")
        for (package, path, line), gb in missed:
            print(f"  {label} missed: {package}/{path}:{line} {gb}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="append", required=True, help="LABEL=DIR of per-package lint JSON")
    parser.add_argument("--recall", type=Path, help="score static recall of this break-site JSON instead")
    args = parser.parse_args()
    lints = [(label, Path(folder)) for label, _, folder in (j.partition("=") for j in args.json)]
    if args.recall:
        recall(args.recall, lints)
        return
    print("| sample | lint | left | real | side road tagged / untagged | false | real % | --paths normal |")
    print("|---|---|---|---|---|---|---|---|")
    for sample, (name, default, chosen) in SAMPLES.items():
        for label, folder in lints:
            picked = [row for row in rows(name, default) if chosen(row[0])]
            absent = sorted({row[1] for row in picked if not (folder / f"{row[1]}.json").is_file()})
            if absent:
                print(f"| {sample} | {label} | no lint JSON for {', '.join(absent)} in {folder} |")
                continue
            counts: Counter = Counter()
            for _tag, package, path, number, code, verdict in picked:
                found = load(folder, package)
                state = status(found, path, number, code)
                if state in ("gone", "merged"):
                    continue
                if verdict == "duplicate":
                    if sum(f["code"] == code for f in found.get((path, number), [])) < 2:
                        continue  # its pair's site is one finding now
                    verdict = "real"
                counts[(verdict, state == "tagged")] += 1
            left = sum(counts.values())
            real = counts[("real", False)] + counts[("real", True)]
            tagged = sum(n for (_v, t), n in counts.items() if t)
            side = f"{counts[('side road', True)]} / {counts[('side road', False)]}"
            false = counts[("false", False)] + counts[("false", True)]
            normal = left - tagged
            print(
                f"| {sample} | {label} | {left} | {real} | {side} | {false} | {_share(real, left)} "
                f"| {real}/{normal} = {_share(real, normal)} |"
            )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


if __name__ == "__main__":
    main()
