"""The rule catalog: every rule's facts, read from one TOML file per rule.

`rules/<CODE>.toml` is the single source of truth for a rule's code, name, kind,
messages, rationale and examples; `fuselint rule CODE`, the README's rule table and
the generic example test all read it through here. The rules ship inside the wheel
(`fuselint/rules/`, a copy made at build time) and are found beside the package in
a source checkout.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KINDS = ("tool", "source", "pattern", "graph")
FIXES = ("none", "safe", "unsafe")
URL = "https://github.com/fuselint/fuselint/blob/main/rules/{code}.toml"


class CatalogError(Exception):
    """A rule file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    kind: str
    summary: str
    message: str
    why: str
    use_instead: str
    fix: str = "none"
    fix_notes: str = ""
    # What an unsafe fix assumes, in a few words: its message carries it (issue 10: an unsafe fix
    # states its assumption where the user sees the fix).
    fix_assumption: str = ""
    bad: tuple[str, ...] = ()
    good: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    url: str = ""
    # kind = "pattern": the [pattern] table, read by fuselint.source.patterns.
    pattern: dict = field(default_factory=dict, compare=False, hash=False)
    # kind = "graph": pattern rules whose `[pattern]` this rule matches in traced graphs (FL230).
    graph_patterns: tuple[str, ...] = ()
    path: str = ""
    user: bool = False  # loaded from `extra-rules`, not shipped with fuselint

    @property
    def fixable(self) -> bool:
        return self.fix != "none"


def _rule_from_toml(path: Path, user: bool = False) -> Rule:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read rule file: {exc}") from None
    missing = [
        k for k in ("code", "name", "kind", "summary", "message", "why", "use_instead") if k not in data
    ]
    if missing:
        raise CatalogError(f"{path}: missing keys: {', '.join(missing)}")
    if data["kind"] not in KINDS:
        raise CatalogError(f"{path}: kind must be one of {', '.join(KINDS)}, not {data['kind']!r}")
    fix = data.get("fix", "none")
    if fix not in FIXES:
        raise CatalogError(f"{path}: fix must be one of {', '.join(FIXES)}, not {fix!r}")
    if path.stem != data["code"]:
        raise CatalogError(f"{path}: file name must be the rule code {data['code']!r}")
    if user and data["kind"] != "pattern":
        raise CatalogError(
            f'{path}: a user rule must be kind = "pattern"; kind = {data["kind"]!r} rules are '
            "implemented inside fuselint and would never run"
        )
    if data["kind"] == "pattern" and not isinstance(data.get("pattern"), dict):
        raise CatalogError(f"{path}: a pattern rule needs a [pattern] table")
    known = set(Rule.__dataclass_fields__) - {"path", "user"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise CatalogError(f"{path}: unknown keys: {', '.join(unknown)}")
    return Rule(
        code=data["code"],
        name=data["name"],
        kind=data["kind"],
        summary=data["summary"].strip(),
        message=data["message"].strip(),
        why=data["why"].strip(),
        use_instead=data["use_instead"].strip(),
        fix=fix,
        fix_notes=data.get("fix_notes", "").strip(),
        fix_assumption=" ".join(data.get("fix_assumption", "").split()),
        bad=tuple(data.get("bad", ())),
        good=tuple(data.get("good", ())),
        fixed=tuple(data.get("fixed", ())),
        url=data.get("url", URL.format(code=data["code"])),
        pattern=data.get("pattern", {}),
        graph_patterns=tuple(data.get("graph_patterns", ())),
        path=str(path),
        user=user,
    )


def builtin_rules_dir() -> Path:
    """`fuselint/rules` in an installed wheel, else `rules/` of the source checkout."""
    packaged = Path(__file__).parent / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).parent.parent / "rules"


@dataclass(frozen=True)
class Catalog:
    rules: dict[str, Rule]

    def __getitem__(self, code: str) -> Rule:
        return self.rules[code]

    def __contains__(self, code: str) -> bool:
        return code in self.rules

    def __iter__(self):
        return iter(sorted(self.rules.values(), key=lambda r: r.code))

    def by_name_or_code(self, key: str) -> Rule | None:
        key = key.strip()
        if key.upper() in self.rules:
            return self.rules[key.upper()]
        return next((r for r in self.rules.values() if r.name == key), None)


def load_catalog(extra_dirs: tuple[str, ...] = ()) -> Catalog:
    """The built-in rules plus any rule files in `extra_dirs` (users' own pattern rules)."""
    return _load(tuple(str(Path(d).resolve()) for d in extra_dirs))


@lru_cache(maxsize=8)
def _load(extra_dirs: tuple[str, ...]) -> Catalog:
    rules: dict[str, Rule] = {}
    builtin = str(builtin_rules_dir())
    for directory in (builtin, *extra_dirs):
        folder = Path(directory)
        if not folder.is_dir():
            raise CatalogError(f"{folder}: rule directory does not exist")
        for path in sorted(folder.glob("*.toml")):
            rule = _rule_from_toml(path, user=directory != builtin)
            if rule.code in rules and rules[rule.code].path != rule.path:
                raise CatalogError(
                    f"{path}: rule code {rule.code} is already defined in {rules[rule.code].path}"
                )
            rules[rule.code] = rule
    for rule in rules.values():
        for code in rule.graph_patterns:
            if code not in rules or rules[code].kind != "pattern":
                raise CatalogError(f"{rule.path}: graph_patterns names {code!r}, which is not a pattern rule")
    return Catalog(rules)
