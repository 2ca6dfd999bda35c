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
        [--sample 50 --seed 24 --sample-out bench/results/real_breaks_sample.json]

`--sample N` draws N of *all* the lint's FL1xx findings (not only those on break sites) to judge
for precision; a drawn finding on a dynamo break site is marked real by dynamo, the rest carry
`"verdict": null` for a person (bench/results/real_breaks_precision.md).

Needs the corpus packages (transformers, torch_geometric, diffusers, fair-esm) installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import (  # noqa: E402
    MODELS,
    ROOT,
    describe_site,
    package_dirs,
    project_config,
    run_child,
    short_path,
)


def lint(files: list[str], select: str = "FL1") -> list[dict]:
    """The JSON findings of one `fuselint check` run over `files`, with the corpus's config."""
    if not files:
        return []
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
        return json.loads(out.read_text() or "[]")


def finding_file(finding: dict) -> str:
    path = Path(finding["filename"])
    return str((path if path.is_absolute() else ROOT / path).resolve())


def by_line(found: list[dict]) -> dict[tuple[str, int], list[str]]:
    """(resolved file, line) -> codes of the findings there."""
    lines: dict[tuple[str, int], list[str]] = defaultdict(list)
    for finding in found:
        lines[(finding_file(finding), finding["location"]["row"])].append(finding["code"])
    return lines


def static_findings(files: list[str], select: str = "FL1") -> dict[tuple[str, int], list[str]]:
    """(resolved file, line) -> codes of the static findings there, from one `fuselint check` run."""
    return by_line(lint(files, select))


def display_path(file: str) -> str:
    """A finding's file as `package/...`, or relative to the checkout for the corpus module."""
    path = Path(file)
    if path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    return short_path(file)


def precision_sample(results: list[dict], found: list[dict], size: int, seed: int) -> list[dict]:
    """A seeded sample of `size` findings out of all of them, each with its source line and, when
    it sits on a dynamo break site of the corpus, that site (judged real by dynamo).

    Each finding's rank is a hash of the seed, its file (package-relative), line and code only,
    so the draw does not depend on the lint's output order or on findings elsewhere."""
    sites: dict[tuple[str, int], list[str]] = defaultdict(list)
    for r in results:
        for s in r["sites"]:
            sites[(s["file"], s["line"])].append(f"{r['model']} {s['gb']}")

    def rank(finding: dict) -> str:
        key = f"{seed}:{display_path(finding_file(finding))}:{finding['location']['row']}:{finding['code']}"
        return hashlib.sha256(key.encode()).hexdigest()

    # "(reached from <path>:Model.forward -> ...)" names files by their installed path: keep it portable
    prefixes = sorted({str(Path(d).parent) + "/" for d in package_dirs().values()} | {f"{ROOT}/"}, key=len)
    drawn = []
    for finding in sorted(found, key=rank)[:size]:
        message = finding["message"]
        for prefix in reversed(prefixes):
            message = message.replace(prefix, "")
        file, row = finding_file(finding), finding["location"]["row"]
        text = Path(file).read_text(encoding="utf-8").splitlines()
        on_site = sorted(set(sites.get((file, row), [])))
        drawn.append(
            {
                "file": display_path(file),
                "line": row,
                "code": finding["code"],
                "message": message,
                "source": text[row - 1].strip() if row <= len(text) else "",
                "path": (finding.get("details") or {}).get("path"),
                "dynamo_site": on_site,
                "verdict": "real" if on_site else None,
            }
        )
    return drawn


def lint_targets(results: list[dict], scope: str) -> list[str]:
    """What `fuselint check` is run on: the site files, or the models' packages and the corpus."""
    sites = sorted({s["file"] for r in results for s in r["sites"]})
    if scope == "sites":
        return sites
    folders = package_dirs()
    packages = sorted({folders[r["package"]] for r in results if r["package"] in folders})
    return [*packages, str(Path(__file__).resolve().parent / "real_corpus.py")]


def score(
    results: list[dict], scope: str = "packages", findings: list[dict] | None = None
) -> tuple[list[dict], dict[tuple[str, int], list[str]]]:
    """Mark each site with the codes found on its line; `findings` is a lint already run."""
    found = by_line(lint(lint_targets(results, scope)) if findings is None else findings)
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
    doubled: list[str] = []
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
            if len(s["codes"]) > 1:
                doubled.append(f"`{short_path(s['file'])}:{s['line']}` {'+'.join(s['codes'])}")
            per_package[r["package"]] += 1
            per_package_hit[r["package"]] += bool(s["codes"])
    lines = [
        "Static recall on real break sites (dynamo ground truth, tiny configs, random weights, CPU).",
        f"torch {torch.__version__}, Python {platform.python_version()}; "
        f"command: `PYTHONPATH=. python bench/real_breaks.py --scope {scope} --write bench/results/real_breaks.md`",
        "",
        f"**{hit} of {total} distinct break sites ({100 * hit / max(total, 1):.0f}%) carry an FL1xx finding** "
        f"from `fuselint check` without tracing, linting {SCOPES[scope]}.",
        f"Found sites with more than one FL1xx finding on their line: {len(doubled)}"
        + (f" ({'; '.join(doubled)})." if doubled else "."),
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
    parser.add_argument("--sample", type=int, help="also draw this many findings to judge (precision)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --sample draw")
    parser.add_argument("--sample-out", help="write the --sample draw here as JSON (default: stdout)")
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
    findings = lint(lint_targets(results, args.scope))
    score(results, args.scope, findings)
    text = table(results, args.scope)
    print(text)
    if args.write:
        Path(args.write).write_text(text)
    if args.sample:
        drawn = precision_sample(results, findings, args.sample, args.seed)
        off_path = sum(1 for f in findings if (f.get("details") or {}).get("path"))
        header = {
            "findings": len(findings),
            "off_path": off_path,  # marked as a deprecation/misuse/error path: what `--paths normal` drops
            "seed": args.seed,
            "scope": args.scope,
            "sample": drawn,
        }
        payload = json.dumps(header, indent=1)
        if args.sample_out:
            Path(args.sample_out).write_text(payload + "\n")
        else:
            print(payload)


if __name__ == "__main__":
    main()
