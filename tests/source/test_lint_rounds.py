"""Reach's later rounds reuse what roots do not change: a file linted again is not summarized again."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from test_reach import CATALOG, FIXTURE

from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import discover, lint_tree
from fuselint.source.reach import Index


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


def _indexes_built(monkeypatch) -> list[lint._RoundIndex]:
    """The indexes the rounds build from here on, in order."""
    built: list[lint._RoundIndex] = []
    init = lint._RoundIndex.__init__

    def counted(self, summaries):
        built.append(self)
        init(self, summaries)

    monkeypatch.setattr(lint._RoundIndex, "__init__", counted)
    return built


def test_the_rounds_share_one_index_whose_targets_are_a_fresh_indexs(tree, monkeypatch):
    config = Config(root=tree)
    files = discover([str(tree)], config)
    built = _indexes_built(monkeypatch)
    before = lint.PARSED["files"]
    result = lint_tree(files, CATALOG, config, jobs=1)
    assert lint.PARSED["files"] - before > len(files)  # more than one round ran
    assert len(built) == 1
    fresh = Index({n: r.summary for n, r in result.results.items() if r.summary is not None})
    calls = [c for r in result.results.values() for c in r.calls]
    assert any(built[0].targets(c) for c in calls)
    assert [built[0].targets(c) for c in calls] == [fresh.targets(c) for c in calls]


def test_relint_resolves_through_the_changed_files_new_summary(tree, monkeypatch):
    # `relint` lints the changed text without its summary: a function added to it must resolve.
    config = Config(root=tree)
    files = discover([str(tree)], config)
    first = lint_tree(files, CATALOG, config, jobs=1)
    processors = str(tree / "pkg" / "processors.py")
    text = (tree / "pkg" / "processors.py").read_text() + "\n\ndef added(x):\n    return x\n"
    built = _indexes_built(monkeypatch)
    found = first.relint({processors: text})
    assert "added" in built[-1].summaries[processors].functions
    (tree / "pkg" / "processors.py").write_text(text)
    again = lint_tree(files, CATALOG, config, jobs=1)
    assert found == [f for f in again.findings if f.span.path == processors]


def test_the_process_pool_lints_as_one_process_does_and_keeps_the_files_order(tree):
    # 10 files of the reach fixture and 12 model files: enough for the pool (16 files or more).
    models = tree / "models"
    models.mkdir()
    for source in sorted(FIXTURE.parent.glob("*.py")):
        shutil.copy(source, models / source.name)
    config = Config(root=tree)
    files = discover([str(tree)], config)
    assert len(files) >= 16
    one = lint_tree(files, CATALOG, config, jobs=1)
    two = lint_tree(files, CATALOG, config, jobs=2)
    assert two.findings == one.findings
    assert list(two.results) == [str(f) for f in files]
    assert two.results == one.results
    assert any(f.span.path.startswith(str(models)) for f in two.findings)
