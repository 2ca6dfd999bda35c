"""`lint_text`/`lint_paths` on the files a real tree holds: deep nesting, noqa look-alikes,
the same file named twice, and a cache that must not trust an mtime."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import Cache, CacheEntry, FileResult, discover, lint_paths, lint_text

CATALOG = load_catalog()
CONFIG = Config()

EXPM1 = "import torch\n\n\ndef f(x):\n    return torch.exp(x) - 1\n"
EXPM1_CLEAN = "import torch\n\n\ndef f(x):\n    return torch.exp(x) + 1\n"


@pytest.fixture
def default_recursion_limit():
    # Other tests in the same worker (torch, dynamo) may have raised the limit.
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


def test_a_long_sum_that_python_compiles_does_not_crash_the_run(default_recursion_limit):
    # 600 terms parse fine (CPython compiles it) but recurse past the limit in a visitor.
    text = "import torch\n\n\ndef f(x):\n    return torch.exp(x)" + " + x" * 600 + " - 1\n"
    compile(text, "deep.py", "exec")
    findings = lint_text("deep.py", text, CATALOG, CONFIG)
    assert [f.code for f in findings] == ["FL000"]
    assert "nested too deeply" in findings[0].message


def test_an_expression_too_deep_for_the_parser_is_fl000(default_recursion_limit):
    text = "import torch\n\n\ndef f(x):\n    return " + "-" * 5000 + "x\n"
    findings = lint_text("deeper.py", text, CATALOG, CONFIG)
    assert [f.code for f in findings] == ["FL000"]


def test_noqa_inside_a_string_does_not_suppress():
    text = 'import torch\n\n\ndef f(x):\n    s = "# noqa"; return torch.exp(x) - 1\n'
    assert [f.code for f in lint_text("m.py", text, CATALOG, CONFIG)] == ["FL210"]


def test_noqa_comment_after_a_string_with_a_hash_still_suppresses():
    text = 'import torch\n\n\ndef f(x):\n    s = "#"; return torch.exp(x) - 1  #NoQA:fl210\n'
    assert lint_text("m.py", text, CATALOG, CONFIG) == []


def test_the_same_file_named_relative_and_absolute_is_checked_once(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(EXPM1)
    monkeypatch.chdir(tmp_path)
    files = discover(["m.py", str(tmp_path / "m.py"), "."], CONFIG)
    assert files == [Path("m.py")]


def test_cache_notices_a_change_that_keeps_size_and_mtime(tmp_path):
    # cp -p, tar and rsync -t restore an mtime; a same-size edit must still be re-linted.
    path = tmp_path / "m.py"
    path.write_text(EXPM1)
    cache = Cache(tmp_path / "cache.pickle")
    assert [f.code for f in lint_paths([path], CATALOG, CONFIG, cache=cache)] == ["FL210"]
    stat = path.stat()
    path.write_text(EXPM1_CLEAN)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    assert lint_paths([path], CATALOG, CONFIG, cache=cache) == []


def test_cache_still_answers_for_unchanged_files(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text(EXPM1)
    cache = Cache(tmp_path / "cache.pickle")
    first = lint_paths([path], CATALOG, CONFIG, cache=cache)
    import fuselint.source.lint as lint

    def no_linting(*args, **kwargs):
        raise AssertionError("a cached file was linted again")

    monkeypatch.setattr(lint, "lint_text", no_linting)
    assert lint_paths([path], CATALOG, CONFIG, cache=cache) == first


def test_discovery_skips_fifos_instead_of_hanging_on_them(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "m.py").write_text(EXPM1)
    assert discover([str(tmp_path)], CONFIG) == [tmp_path / "m.py"]


def test_a_package_named_env_is_linted_but_any_virtualenv_is_skipped(tmp_path):
    # RL projects keep their environments in `env/`; a virtualenv is known by its pyvenv.cfg.
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "policy.py").write_text(EXPM1)
    (tmp_path / "my-venv" / "lib").mkdir(parents=True)
    (tmp_path / "my-venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "my-venv" / "lib" / "torch_thing.py").write_text(EXPM1)
    config = Config(root=tmp_path)
    assert discover([str(tmp_path)], config) == [tmp_path / "env" / "policy.py"]


def test_a_rule_crash_names_the_file_it_happened_in(tmp_path, monkeypatch):
    import fuselint.source.lint as lint

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(lint, "lint_unit", broken)
    path = tmp_path / "m.py"
    path.write_text(EXPM1)
    with pytest.raises(lint.LintCrash, match=r"m\.py: KeyError: 'boom'"):
        lint_paths([path], CATALOG, CONFIG)


def test_the_cyclic_collector_is_on_again_after_a_file_even_one_that_does_not_parse():
    import gc

    assert gc.isenabled()
    for text in (EXPM1, "def f(:\n"):
        lint_text("m.py", text, CATALOG, CONFIG)
        assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        lint_text("m.py", EXPM1, CATALOG, CONFIG)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_cache_load_leaves_the_collector_as_it_was(tmp_path):
    import gc

    cache = Cache(tmp_path / "c.pickle")
    cache.save({"m.py": CacheEntry.of(b"k", FileResult(()), frozenset())})
    assert cache.load()["m.py"].result == FileResult(())
    assert gc.isenabled()
    (tmp_path / "c.pickle").write_bytes(b"not a pickle")
    assert cache.load() == {}
    assert gc.isenabled()
