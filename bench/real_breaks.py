"""Static recall on real break sites: does `fuselint check` (no tracing) flag where dynamo breaks?

Ground truth: every model of `bench/real_corpus.py` runs under torch.compile in its own process,
and dynamo's graph-break log gives its break sites (the innermost package line of each break).
Then `fuselint check --select FL1` runs *statically*, and a site counts as found when an FL1xx
finding sits on its line. What is linted (`--scope`):
- `packages` (default): the whole installed package of every model plus `bench/real_corpus.py`
  (the corpus's own wrapper modules, as a user's project would hold them), in one run, as CI
  would lint a project: whole-program reach follows each forward into the helpers it calls;
- `sites`: only the files that hold break sites, as a pre-commit run on those files would.
Each missed site is listed with dynamo's reason, which is the work list for static analysis.

    PYTHONPATH=. python bench/real_breaks.py [--models a,b] [--scope packages|sites]
        [--cache gt.json] [--write bench/results/real_breaks.md]

Needs the corpus packages (transformers, torch_geometric, diffusers, fair-esm) installed.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import MODELS, ROOT, describe_site, package_dirs, project_config, run_child  # noqa: E402


def static_findings(files: list[str], select: str = "FL1") -> dict[tuple[str, int], list[str]]:
    """(resolved file, line) -> codes of the static findings there, from one `fuselint check` run."""
    if not files:
        return {}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "findings.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fuselint",
                "check",
                "--no-cache",
                "--exit-zero",
                "--format",
                "json",
                "--config",
                str(project_config(Path(folder))),
                "--select",
                select,
                "--output-file",
                str(out),
                *files,
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        found = json.loads(out.read_text() or "[]")
    by_line: dict[tuple[str, int], list[str]] = defaultdict(list)
    for finding in found:
        path = Path(finding["filename"])
        path = path if path.is_absolute() else (ROOT / path)
        by_line[(str(path.resolve()), finding["location"]["row"])].append(finding["code"])
    return by_line


def lint_targets(results: list[dict], scope: str) -> list[str]:
    """What `fuselint check` is run on: the site files, or the models' packages and the corpus."""
    sites = sorted({s["file"] for r in results for s in r["sites"]})
    if scope == "sites":
        return sites
    folders = package_dirs()
    packages = sorted({folders[r["package"]] for r in results if r["package"] in folders})
    return [*packages, str(Path(__file__).resolve().parent / "real_corpus.py")]


def score(
    results: list[dict], scope: str = "packages"
) -> tuple[list[dict], dict[tuple[str, int], list[str]]]:
    found = static_findings(lint_targets(results, scope))
    for r in results:
        for site in r["sites"]:
            site["codes"] = sorted(found.get((site["file"], site["line"]), []))
    return results, found


def table(results: list[dict], scope: str = "packages") -> str:
    import torch

    rows = [
        "| model | package | graphs | break sites | found statically | missed (file:line gb reason) |",
        "|---|---|---:|---:|---:|---|",
    ]
    total = hit = 0
    per_package: Counter = Counter()
    per_package_hit: Counter = Counter()
    seen: set[tuple[str, int]] = set()
    for r in results:
        sites = r["sites"]
        got = [s for s in sites if s["codes"]]
        missed = "; ".join(describe_site(s, 70) for s in sites if not s["codes"])
        note = f" ({r['error']})" if r.get("error") else ""
        rows.append(
            f"| {r['model']}{note} | {r['package']} | {r.get('graphs', 0)} | {len(sites)} | {len(got)} | {missed or '-'} |"
        )
        for s in sites:  # a site shared by several models (a helper) counts once
            key = (s["file"], s["line"])
            if key in seen:
                continue
            seen.add(key)
            total += 1
            hit += bool(s["codes"])
            per_package[r["package"]] += 1
            per_package_hit[r["package"]] += bool(s["codes"])
    lines = [
        "Static recall on real break sites (dynamo ground truth, tiny configs, random weights, CPU).",
        f"torch {torch.__version__}, Python {platform.python_version()}; "
        f"command: `PYTHONPATH=. python bench/real_breaks.py --scope {scope} --write bench/results/real_breaks.md`",
        "",
        f"**{hit} of {total} distinct break sites ({100 * hit / max(total, 1):.0f}%) carry an FL1xx finding** "
        f"from `fuselint check` without tracing, linting {SCOPES[scope]}.",
        "",
        "| package | sites | found |",
        "|---|---:|---:|",
        *(f"| {p} | {per_package[p]} | {per_package_hit[p]} |" for p in sorted(per_package)),
        "",
        *rows,
        "",
    ]
    return "\n".join(lines)


SCOPES = {
    "packages": "the models' whole packages and bench/real_corpus.py in one run",
    "sites": "only the files that hold break sites",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset of bench/real_corpus.py's models")
    parser.add_argument("--write", help="also write the Markdown table here")
    parser.add_argument("--cache", help="read/write ground truth JSON here (tracing is the slow part)")
    parser.add_argument("--scope", choices=sorted(SCOPES), default="packages", help="what to lint")
    args = parser.parse_args()
    models = args.models.split(",") if args.models else list(MODELS)
    cached = json.loads(Path(args.cache).read_text()) if args.cache and Path(args.cache).exists() else {}
    results = []
    for model in models:
        if model not in cached:
            cached[model] = run_child(model)
            print(
                f"{model}: {len(cached[model]['sites'])} sites {cached[model].get('error', '')}",
                file=sys.stderr,
            )
        results.append(cached[model])
    if args.cache:
        Path(args.cache).write_text(json.dumps(cached, indent=1))
    results = [r for r in results if r["sites"] or r.get("error")]
    score(results, args.scope)
    text = table(results, args.scope)
    print(text)
    if args.write:
        Path(args.write).write_text(text)


if __name__ == "__main__":
    main()
