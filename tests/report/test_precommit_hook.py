"""The pre-commit hooks in .pre-commit-hooks.yaml, checked by pre-commit itself.

The slow test runs a real `pre-commit try-repo` against a throwaway git copy of this
project (try-repo reads hooks from a commit, so the copy commits the working tree):
pre-commit builds the hook's virtualenv with pip, so it needs the package index that
`pip install` uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"


def _pre_commit() -> list[str] | None:
    """The pre-commit command of this Python environment, else one on PATH."""
    beside = Path(sys.executable).with_name("pre-commit")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("pre-commit")
    return [found] if found else None


PRE_COMMIT = _pre_commit()
needs_pre_commit = pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed")

BAD = """\
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        print("input", x.shape)
        return torch.relu(x)
"""

GOOD = """\
import torch


def forward(x):
    return torch.relu(x)
"""


def test_manifest_declares_both_hooks_with_ruffs_fields():
    yaml = pytest.importorskip("yaml")
    hooks = {h["id"]: h for h in yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))}
    assert set(hooks) == {"fuselint", "fuselint-fix"}
    # --force-exclude: pre-commit names every staged file, and the project's excludes must still hold.
    assert hooks["fuselint"]["entry"] == "fuselint check --force-exclude"
    assert hooks["fuselint-fix"]["entry"] == "fuselint check --force-exclude --fix"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi"]
        assert hook["args"] == [] and hook["require_serial"] is True
        assert set(hook) >= {"name", "description", "minimum_pre_commit_version"}


@needs_pre_commit
def test_manifest_is_valid_for_pre_commit():
    result = subprocess.run(
        [*PRE_COMMIT, "validate-manifest", str(MANIFEST)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "fuselint tests",
        "GIT_AUTHOR_EMAIL": "tests@fuselint.invalid",
        "GIT_COMMITTER_NAME": "fuselint tests",
        "GIT_COMMITTER_EMAIL": "tests@fuselint.invalid",
    }
    result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _copy_project(dest: Path) -> Path:
    """A git repository holding this project's working tree (tracked and new files)."""
    listed = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot for try-repo")
    return dest


@pytest.mark.slow
@needs_pre_commit
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="the project is not a git checkout")
def test_try_repo_fails_on_a_finding_and_passes_a_clean_file(tmp_path):
    hook_repo = _copy_project(tmp_path / "fuselint")
    target = tmp_path / "user-project"
    target.mkdir()
    (target / "bad.py").write_text(BAD, encoding="utf-8")
    (target / "good.py").write_text(GOOD, encoding="utf-8")
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}

    def try_repo(hook: str, *files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*PRE_COMMIT, "try-repo", str(hook_repo), hook, "--files", *files],
            cwd=target,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    bad = try_repo("fuselint", "bad.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.py:7:9: FL103" in bad.stdout and "Failed" in bad.stdout

    good = try_repo("fuselint", "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    # print() has no automatic fix: the fixing hook must still fail and leave the file alone.
    fixing = try_repo("fuselint-fix", "bad.py", "good.py")
    assert fixing.returncode == 1, fixing.stdout + fixing.stderr
    assert "FL103" in fixing.stdout
    assert (target / "bad.py").read_text(encoding="utf-8") == BAD


README = ROOT / "README.md"


def _readme_snippet() -> str:
    """The `.pre-commit-config.yaml` block of the README's pre-commit section."""
    section = README.read_text(encoding="utf-8").split("## pre-commit", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```yaml\n")[1:]]
    (snippet,) = [b for b in blocks if "repos:" in b]
    return snippet


def test_readme_snippet_names_only_revs_that_exist():
    yaml = pytest.importorskip("yaml")
    repos = yaml.safe_load(_readme_snippet())["repos"]
    assert repos, "the README's pre-commit snippet has no repos"
    for repo in repos:
        if repo["repo"] in ("local", "meta"):
            continue
        # A rev pre-commit cannot check out (a tag never made) fails every user's first commit.
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{repo['rev']}^{{commit}}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert found.returncode == 0, f"README names rev {repo['rev']!r}, which this repository does not have"


def _fuselint_on_path() -> str | None:
    beside = Path(sys.executable).with_name("fuselint")
    return (
        str(beside.parent)
        if beside.exists()
        else (str(Path(shutil.which("fuselint")).parent) if shutil.which("fuselint") else None)
    )


@needs_pre_commit
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.skipif(_fuselint_on_path() is None, reason="the fuselint command is not installed")
def test_readme_snippet_runs_under_pre_commit(tmp_path):
    target = tmp_path / "user-project"
    target.mkdir()
    (target / ".pre-commit-config.yaml").write_text(_readme_snippet(), encoding="utf-8")
    (target / "bad.py").write_text(BAD, encoding="utf-8")
    (target / "good.py").write_text(GOOD, encoding="utf-8")
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    env = {
        **os.environ,
        "PATH": _fuselint_on_path() + os.pathsep + os.environ.get("PATH", ""),
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PRE_COMMIT_COLOR": "never",
    }

    def run(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*PRE_COMMIT, "run", "--files", *files],
            cwd=target,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    bad = run("bad.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.py:7:9: FL103" in bad.stdout and "Failed" in bad.stdout
    good = run("good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
