"""Run the `fuselint` CLI in-process from a folder, as a user's shell would (tests only)."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from fuselint.cli import main


def run(args, cwd: Path, stdin: str | bytes | None = None):
    """`fuselint ARGS` with `cwd` as the current folder; exceptions propagate to the test."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, input=stdin, catch_exceptions=False)
    finally:
        os.chdir(old)
