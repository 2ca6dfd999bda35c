"""Record what the `fuselint` command prints, to show that a refactor changed nothing.

    python scripts/cli_snapshot.py record OUT_DIR     # run every case, save stdout/stderr/exit code
    python scripts/cli_snapshot.py compare OLD NEW    # exit 1 and list the cases that differ

Record main and a branch by putting each checkout first on the path:
    PYTHONPATH=path/to/main python scripts/cli_snapshot.py record /tmp/snap_main

Each case runs `python -m fuselint ...` in a fresh copy of fixtures/ (so --fix and
--update-baseline write into the copy, never into the repository). Timings ("in 0.12 s") and
the temporary folder's name are masked; everything else must match byte for byte.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (name, arguments after `fuselint`); run in the copy of fixtures/, files named relative to it.
CASES: list[tuple[str, list[str]]] = [
    ("check-text", ["check", "--no-cache", "."]),
    ("check-concise", ["check", "--no-cache", "--output-format", "concise", "."]),
    ("check-json", ["check", "--no-cache", "--format", "json", "."]),
    ("check-sarif", ["check", "--no-cache", "--format", "sarif", "."]),
    ("check-github", ["check", "--no-cache", "--format", "github", "."]),
    ("check-markdown", ["check", "--no-cache", "--format", "markdown", "."]),
    ("check-statistics", ["check", "--no-cache", "--statistics", "."]),
    ("check-normal-paths", ["check", "--no-cache", "--paths", "normal", "."]),
    ("check-select", ["check", "--no-cache", "--select", "FL2", "--ignore", "FL201", "."]),
    ("check-quiet", ["check", "--no-cache", "-q", "handwritten_gpt.py"]),
    ("check-verbose", ["check", "--no-cache", "-v", "handwritten_gpt.py"]),
    ("check-silent", ["check", "--no-cache", "-s", "handwritten_gpt.py"]),
    ("check-diff", ["check", "--no-cache", "--diff", "."]),
    ("check-diff-unsafe", ["check", "--no-cache", "--diff", "--unsafe-fixes", "."]),
    ("check-fix", ["check", "--no-cache", "--fix", "--show-fixes", "."]),
    ("check-fix-after", ["check", "--no-cache", "."]),  # runs after check-fix, on the fixed copy
    ("update-baseline", ["check", "--no-cache", "--baseline", "base.json", "--update-baseline", "."]),
    ("check-baseline", ["check", "--no-cache", "--baseline", "base.json", "."]),
    ("check-gated", ["check", "--no-cache", "--fail-on-gain-launches", "1000000", "."]),
    (
        "check-entry",
        ["check", "--no-cache", "--device", "cpu", "--entry", "trace/item_branch.py:entry", "trace"],
    ),
    (
        "check-entry-json",
        [
            "check",
            "--no-cache",
            "--format",
            "json",
            "--device",
            "cpu",
            "--entry",
            "trace/print_in_forward.py:entry",
            "trace/print_in_forward.py",
        ],
    ),
    (
        "check-entry-fix",
        [
            "check",
            "--no-cache",
            "--fix",
            "--unsafe-fixes",
            "--no-prove",
            "--device",
            "cpu",
            "--entry",
            "trace/print_in_forward.py:entry",
            "trace/print_in_forward.py",
        ],
    ),
    (
        "check-verbose-entry",
        [
            "check",
            "--no-cache",
            "-v",
            "--device",
            "cpu",
            "--entry",
            "trace/item_branch.py:entry",
            "trace/item_branch.py",
        ],
    ),
    ("explain", ["rule", "FL201"]),
    (
        "check-entry-prove",
        [
            "check",
            "--no-cache",
            "--fix",
            "--unsafe-fixes",
            "--device",
            "cpu",
            "--prove-backends",
            "",
            "--entry",
            "prove/shortcut_and_print.py:entry",
            "prove/shortcut_and_print.py",
        ],
    ),
    ("bad-rule-name", ["rule", "item-in-forward"]),
    ("rules-text", ["rules"]),
    ("rules-json", ["rules", "--format", "json"]),
    ("rules-markdown", ["rules", "--format", "markdown"]),
    ("bad-path", ["check", "--no-cache", "no/such/path.py"]),
    ("bad-select", ["check", "--no-cache", "--select", "FL21O", "."]),
    ("bad-format-statistics", ["check", "--no-cache", "--statistics", "--format", "sarif", "."]),
    ("bad-conflict", ["check", "--no-cache", "--add-noqa", "--fix", "."]),
    ("bad-baseline", ["check", "--no-cache", "--baseline", "missing.json", "."]),
    ("bad-update-baseline", ["check", "--no-cache", "--update-baseline", "."]),
    ("bad-target", ["check", "--no-cache", "--target", "Z80", "--entry", "trace/item_branch.py:entry", "."]),
    ("bad-entry", ["check", "--no-cache", "--entry", "trace/item_branch.py:nothing", "trace/item_branch.py"]),
    ("bad-rule", ["rule", "FL999"]),
    ("bad-config", ["check", "--no-cache", "--config", "missing.toml", "."]),
]

# (name, arguments, the fixture file whose bytes go to stdin, or raw bytes)
STDIN_CASES: list[tuple[str, list[str], str | bytes]] = [
    ("stdin-check", ["check", "--stdin-filename", "m.py"], "handwritten_gpt.py"),
    ("stdin-json", ["check", "--format", "json", "--stdin-filename", "m.py"], "handwritten_gpt.py"),
    ("stdin-fix", ["check", "--fix", "--show-fixes", "--stdin-filename", "m.py"], "handwritten_gpt.py"),
    ("stdin-diff", ["check", "--diff", "--stdin-filename", "m.py"], "handwritten_mobilenet.py"),
    ("stdin-undecodable", ["check", "--fix", "--stdin-filename", "m.py"], b"x = '\xff\xfe'\n"),
    ("stdin-conflict", ["check", "--stdin-filename", "m.py", "--baseline", "b.json"], b""),
]

TIMING = re.compile(r"\b\d+(\.\d+)? ?(s|ms)\b")


def _mask(text: str, work: Path) -> str:
    text = text.replace(str(work.resolve()), "<WORK>").replace(str(work), "<WORK>")
    return TIMING.sub("<T>", text)


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "fixtures"
        shutil.copytree(ROOT / "fixtures", work, ignore=shutil.ignore_patterns("__pycache__"))
        for name, args, stdin in [(n, a, b"") for n, a in CASES] + STDIN_CASES:
            data = stdin if isinstance(stdin, bytes) else (ROOT / "fixtures" / stdin).read_bytes()
            ran = subprocess.run(
                [sys.executable, "-m", "fuselint", *args], cwd=work, capture_output=True, input=data
            )
            done = subprocess.CompletedProcess(
                ran.args,
                ran.returncode,
                ran.stdout.decode("utf-8", "replace"),
                ran.stderr.decode("utf-8", "replace"),
            )
            (out / f"{name}.json").write_text(
                json.dumps(
                    {
                        "args": args,
                        "exit": done.returncode,
                        "stdout": _mask(done.stdout, work),
                        "stderr": _mask(done.stderr, work),
                    },
                    indent=1,
                )
                + "\n",
                encoding="utf-8",
            )
            print(f"{name}: exit {done.returncode}", flush=True)


def compare(old: Path, new: Path) -> int:
    differ = []
    for name, *_rest in CASES + STDIN_CASES:
        a = json.loads((old / f"{name}.json").read_text(encoding="utf-8"))
        b = json.loads((new / f"{name}.json").read_text(encoding="utf-8"))
        for key in ("exit", "stdout", "stderr"):
            if TIMING.sub("<T>", str(a[key])) != TIMING.sub("<T>", str(b[key])):
                differ.append(f"{name}: {key} differs")
    print("\n".join(differ) or f"all {len(CASES) + len(STDIN_CASES)} cases identical")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
