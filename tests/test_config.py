"""Settings: selection by prefix, per-file ignores, excludes, and errors."""

from pathlib import Path

import pytest

from fuselint.config import Config, ConfigError, load_config


def test_longest_prefix_wins():
    config = Config(select=("FL1",), ignore=("FL10",))
    assert not config.enabled("FL101")
    assert config.enabled("FL150")
    assert Config(select=("FL101",), ignore=("FL1",)).enabled("FL101")
    assert not Config(select=("FL2",)).enabled("FL101")


def test_per_file_ignores_match_relative_globs(tmp_path):
    config = Config(per_file_ignores=(("tests/*", ("FL1",)),), root=tmp_path)
    assert not config.enabled("FL101", str(tmp_path / "tests" / "m.py"))
    assert config.enabled("FL101", str(tmp_path / "src" / "m.py"))


def test_table_is_read(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.fuselint]\nselect = ['FL1']\nignore = ['FL103']\nfix = true\nunsafe-fixes = true\n"
        "entries = ['m.py:build']\nextra-rules = ['my_rules']\n"
    )
    config = load_config(tmp_path / "pyproject.toml")
    assert config.select == ("FL1",) and config.ignore == ("FL103",)
    assert config.fix and config.unsafe_fixes
    assert config.entries == ("m.py:build",)
    assert config.extra_rules == (str((tmp_path / "my_rules").resolve()),)


def test_no_table_gives_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path / "pyproject.toml").select == ("FL",)


@pytest.mark.parametrize("body", ["fix = 'yes'", "select = [1]", "per-file-ignores = 3", "exclude = 4"])
def test_wrong_types_raise(tmp_path, body):
    (tmp_path / "pyproject.toml").write_text(f"[tool.fuselint]\n{body}\n")
    with pytest.raises(ConfigError):
        load_config(tmp_path / "pyproject.toml")


def test_extend_select_adds_to_select(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.fuselint]\nselect = ['FL2']\nextend-select = ['FL103']\n")
    config = load_config(tmp_path / "pyproject.toml")
    assert config.enabled("FL205") and config.enabled("FL103") and not config.enabled("FL101")


def test_unused_noqa_is_opt_in_like_ruffs_ruf100():
    assert not Config().enabled("FL001")
    assert not Config(select=("FL",)).enabled("FL001")
    assert Config(select=("FL", "FL001")).enabled("FL001")
    assert Config(select=("FL0",)).enabled("FL001")
    assert Config(select=("ALL",)).enabled("FL001")
    assert not Config(select=("FL", "FL001"), ignore=("FL001",)).enabled("FL001")
