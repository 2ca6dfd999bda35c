"""The lint cache: what a run reads of it, and that another build's cache is never read."""

from __future__ import annotations

import pickle
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_reach import CATALOG, FIXTURE, _lint

from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import Cache, CacheEntry


@pytest.fixture
def tree(tmp_path):
    return shutil.copytree(FIXTURE, tmp_path / "reach")


def _read_results(monkeypatch) -> list[str]:
    """The files whose cached result (findings, calls) a run unpickles, in order."""
    read: list[str] = []
    unpickle = CacheEntry.result.func

    def counted(entry: CacheEntry) -> lint.FileResult:
        read.append(entry.result_of)
        return unpickle(entry)

    monkeypatch.setattr(CacheEntry, "result", property(counted))
    monkeypatch.setattr(CacheEntry, "result_of", "", raising=False)
    original = Cache.load

    def load(self):
        entries = original(self)
        for name, entry in entries.items():
            entry.result_of = Path(name).relative_to(self.path.parent.parent).as_posix()
        return entries

    monkeypatch.setattr(Cache, "load", load)
    return read


def test_a_one_file_run_reads_the_results_only_of_that_file_and_its_callers(tree, monkeypatch):
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    whole = _lint(tree, cache=cache)
    read = _read_results(monkeypatch)
    one = _lint(tree, "pkg/ops/boxes.py", cache=cache)
    assert one.findings == [f for f in whole.findings if f.span.path.endswith("ops/boxes.py")]
    assert one.findings
    # boxes.py itself and the two files that call into it; not the other seven files' results.
    assert sorted(set(read)) == ["pkg/models/detector.py", "pkg/ops/boxes.py", "pkg/runner.py"]
    assert len(cache.load()) == 10


def test_a_cache_of_the_older_layout_is_ignored(tree):
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    _lint(tree, cache=cache)
    entries = cache.load()
    # The layout before CacheEntry: name -> (digest, FileResult, files its calls reach).
    older = {name: (e.digest, e.result, e.targets) for name, e in entries.items()}
    cache.path.write_bytes(pickle.dumps(older))
    assert cache.load() == {}
    before = lint.PARSED["files"]
    again = _lint(tree, cache=cache)
    assert lint.PARSED["files"] - before >= len(entries)  # linted afresh, not read from it
    assert again.findings == _lint(tree, cache=None).findings


def test_the_cache_name_holds_its_layout(tree, monkeypatch):
    config = Config(root=tree)
    name = Cache.for_settings(tree, CATALOG, config).path.name
    monkeypatch.setattr(lint, "CACHE_FORMAT", "entries-older")
    assert Cache.for_settings(tree, CATALOG, config).path.name != name


def test_an_entry_reads_back_the_result_it_was_made_of(tree):
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    results = _lint(tree, cache=cache).results
    entries = cache.load()
    assert entries.keys() == results.keys()
    for name, entry in entries.items():
        assert entry.result == replace(results[name], patterns=None)  # patterns serve one run only


def test_an_edit_that_changes_no_summary_writes_the_summaries_as_read(tree, monkeypatch):
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    _lint(tree, cache=cache)
    boxes = tree / "pkg" / "ops" / "boxes.py"
    before = cache.load()
    pickled: list[int] = []  # the sizes of the summary maps pickled
    dumps = pickle.dumps

    def counted(value, *args, **kwargs):
        if isinstance(value, dict) and str(boxes) in value and not isinstance(value[str(boxes)], CacheEntry):
            pickled.append(len(value))
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(pickle, "dumps", counted)
    boxes.write_text(boxes.read_text() + "# a comment changes no summary\n")
    _lint(tree, "pkg/ops/boxes.py", cache=cache)
    after = cache.load()
    assert pickled == []
    assert after.read[1] == before.read[1]
    assert after[str(boxes)].digest != before[str(boxes)].digest  # linted and stored anew
    # A new function changes the summary: the summaries are pickled again, and read back.
    boxes.write_text(boxes.read_text() + "\n\ndef extra():\n    return 1\n")
    _lint(tree, "pkg/ops/boxes.py", cache=cache)
    assert pickled == [len(before)]
    assert "extra" in cache.load()[str(boxes)].summary.functions
