"""Reach's later rounds reuse what roots do not change: a file linted again is not summarized again."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from test_reach import CATALOG, FIXTURE

from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import discover, lint_tree


@pytest.fixture
def tree(tmp_path):
    return shutil.copytree(FIXTURE, tmp_path / "reach")


def test_a_file_linted_again_for_new_roots_is_summarized_once(tree, monkeypatch):
    config = Config(root=tree)
    files = discover([str(tree)], config)
    plain = lint_tree(files, CATALOG, config, jobs=1)

    summarized: Counter[str] = Counter()
    summarize = lint.summarize

    def counted(module_tree, module, package):
        summarized[module] += 1
        return summarize(module_tree, module, package)

    monkeypatch.setattr(lint, "summarize", counted)
    before = lint.PARSED["files"]
    again = lint_tree(files, CATALOG, config, jobs=1)
    assert lint.PARSED["files"] - before > len(files)  # some files were linted in a later round
    assert set(summarized.values()) == {1}
    assert len(summarized) == len(files)
    assert again.findings == plain.findings
    assert {n: r.summary for n, r in again.results.items()} == {
        n: r.summary for n, r in plain.results.items()
    }
