"""Settings: `[tool.fuselint]` in the nearest pyproject.toml, overridden by the command line.

Selection follows ruff: `select` and `ignore` take codes or prefixes ("FL1", "FL201"),
the longest matching prefix wins, and `per-file-ignores` maps glob patterns to codes.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".env",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".fuselint_cache",
    "__pycache__",
    "build",
    "dist",
    "site-packages",
    "node_modules",
    ".eggs",
    "*.egg-info",
)


# Rules that stay off unless selected by name (or a narrower prefix, or ALL), as ruff leaves
# RUF100 out of its default set: a project that upgrades must not start failing on comments.
OPT_IN = ("FL001",)


def _names(selectors: tuple[str, ...], code: str) -> bool:
    """A selector of the list names `code`: the code itself, a prefix of it, or ALL."""
    return any(p == "ALL" or code.startswith(p) for p in selectors)


class ConfigError(Exception):
    """Unusable settings; the message is one line naming the file and key."""


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("FL",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    # Exclude files named on the command line too (pre-commit names every staged file).
    force_exclude: bool = False
    fix: bool = False
    unsafe_fixes: bool = False
    # Rules (codes, prefixes, ALL) whose unsafe fixes count as safe, and whose safe fixes count as
    # unsafe, as ruff's settings of the same names: a project that accepts a composite's rounding
    # (FL2) takes those fixes with `--fix` without every unsafe break fix. Unsafe wins where both name a rule.
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    extra_rules: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    # `name` or `Class.method` patterns of functions the project compiles outside any forward
    # (a scheduler's `step` in a compiled sampling loop): linted as if decorated with torch.compile.
    traced_functions: tuple[str, ...] = ()
    root: Path = field(default=Path("."), compare=False)

    def fix_safety(self, code: str, safe: bool) -> bool:
        """Whether a fix of rule `code` is applied as safe: its own safety, then the settings."""
        if _names(self.extend_unsafe_fixes, code):
            return False
        return safe or _names(self.extend_safe_fixes, code)

    def selects(self, code: str) -> bool:
        """Whether `select` names the code (by itself, a prefix or ALL), whatever `ignore` says."""
        return _names(self.select, code)

    def enabled(self, code: str, path: str | None = None) -> bool:
        ignored = list(self.ignore)
        if path is not None and self.per_file_ignores:
            ignored.extend(_file_ignores(self.per_file_ignores, self.root, path))
        selectors = self.select
        if code in OPT_IN:
            selectors = tuple(p for p in selectors if p != "FL")
        best_select = max((len(p) for p in selectors if code.startswith(p) or p == "ALL"), default=-1)
        best_ignore = max((len(p) for p in ignored if code.startswith(p) or p == "ALL"), default=-1)
        return best_select >= 0 and best_select > best_ignore

    def excluded(self, path: Path) -> bool:
        patterns = self.exclude + self.extend_exclude
        rel = _relative(str(path), self.root)
        return any(
            fnmatch.fnmatch(path.name, p)
            or fnmatch.fnmatch(rel, p)
            or fnmatch.fnmatch(rel, p.rstrip("/") + "/*")
            for p in patterns
        )


@lru_cache(maxsize=4096)
def _file_ignores(per_file: tuple, root: Path, path: str) -> tuple[str, ...]:
    """Codes that per-file-ignores turns off for one path (asked once per rule, so cached)."""
    rel = _relative(path, root)
    name = Path(rel).name
    return tuple(
        c
        for pattern, codes in per_file
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(name, pattern)
        for c in codes
    )


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for folder in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _str_list(value, key: str, path: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.fuselint] {key} must be a list of strings")
    return tuple(value)


def load_config(pyproject: Path | None) -> Config:
    """Read [tool.fuselint]; a missing file or table gives the defaults."""
    if pyproject is None:
        return Config(root=Path.cwd())
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from None
    table = data.get("tool", {}).get("fuselint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.fuselint] must be a table")
    known = {
        "select",
        "extend-select",
        "ignore",
        "per-file-ignores",
        "exclude",
        "extend-exclude",
        "force-exclude",
        "fix",
        "unsafe-fixes",
        "extend-safe-fixes",
        "extend-unsafe-fixes",
        "extra-rules",
        "entries",
        "traced-functions",
    }
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{pyproject}: unknown key in [tool.fuselint]: {', '.join(unknown)}")
    root = pyproject.parent
    config = Config(root=root)
    if "select" in table:
        config = replace(config, select=_str_list(table["select"], "select", pyproject))
    if "extend-select" in table:
        extra = _str_list(table["extend-select"], "extend-select", pyproject)
        config = replace(config, select=config.select + extra)
    if "ignore" in table:
        config = replace(config, ignore=_str_list(table["ignore"], "ignore", pyproject))
    if "exclude" in table:
        config = replace(config, exclude=_str_list(table["exclude"], "exclude", pyproject))
    if "extend-exclude" in table:
        config = replace(
            config, extend_exclude=_str_list(table["extend-exclude"], "extend-exclude", pyproject)
        )
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{pyproject}: [tool.fuselint] per-file-ignores must be a table")
        config = replace(
            config,
            per_file_ignores=tuple(
                (k, _str_list(v, f"per-file-ignores.{k}", pyproject)) for k, v in pfi.items()
            ),
        )
    for key, attr in (("fix", "fix"), ("unsafe-fixes", "unsafe_fixes"), ("force-exclude", "force_exclude")):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{pyproject}: [tool.fuselint] {key} must be true or false")
            config = replace(config, **{attr: table[key]})
    for key in ("extend-safe-fixes", "extend-unsafe-fixes"):
        if key in table:
            config = replace(config, **{key.replace("-", "_"): _str_list(table[key], key, pyproject)})
    if "extra-rules" in table:
        dirs = _str_list(table["extra-rules"], "extra-rules", pyproject)
        config = replace(config, extra_rules=tuple(str((root / d).resolve()) for d in dirs))
    if "entries" in table:
        config = replace(config, entries=_str_list(table["entries"], "entries", pyproject))
    if "traced-functions" in table:
        traced = _str_list(table["traced-functions"], "traced-functions", pyproject)
        config = replace(config, traced_functions=traced)
    return config
