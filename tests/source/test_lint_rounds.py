"""Reach's later rounds reuse what roots do not change: a file linted again is not summarized again."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import discover, lint_tree

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "reach"
CATALOG = load_catalog()


def test_a_file_linted_again_for_new_roots_is_summarized_once(tmp_path, monkeypatch):
    tree = tmp_path / "reach"
    shutil.copytree(FIXTURE, tree)
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
