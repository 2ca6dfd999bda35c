"""Prove a rule: its examples, its fix, and (for pattern rules) its numeric identity.

`fuselint rule --test CODE|PATH` and the test suite run the same checks, so a user's rule
gets exactly the scrutiny a built-in one gets (as `fixit test` does for Fixit rules):

- every `bad` example is flagged with the rule's code, every `good` one is not;
- `fixed[i]` is exactly what `--fix` writes for `bad[i]`, and fixing it again changes nothing;
- a pattern rule's `match` and `replace` compute the same function on random inputs
  (`fuselint.source.pattern_proof`, which documents how inputs are drawn);
- a graph rule's examples are traced and planned, as `check --entry` would.

Examples are linted with only the rule under test selected, so a user code such as `XL001`
is checked whatever the project's `select` says.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from fuselint.catalog import Catalog, Rule
from fuselint.config import Config


@dataclass(frozen=True)
class Outcome:
    """One check of one rule: `case` names it as the rule file does (`bad[0]`, `fixed[1]`, ...)."""

    code: str
    case: str
    ok: bool
    detail: str = ""


def _codes(rule: Rule, catalog: Catalog, text: str) -> set[str]:
    from fuselint.source.lint import lint_text

    # The defaults plus the rule: an opt-in rule (FL001, unused noqa) judges the others' findings.
    return {f.code for f in lint_text("example.py", text, catalog, Config(select=("FL", rule.code)))}


def _traced_codes(text: str, name: str) -> set[str]:
    from fuselint.fusion.model import analyse
    from fuselint.graph.breaks import break_findings
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        analysis = analyse(capture(load_entry(f"{path}:entry")))
    return {f.code for f in (*break_findings(analysis.capture), *analysis.findings)}


def codes_found(rule: Rule, catalog: Catalog, text: str, name: str = "example") -> set[str]:
    """The codes an example gives: linted for static rules, traced and planned for graph rules."""
    return _traced_codes(text, name) if rule.kind == "graph" else _codes(rule, catalog, text)


def check_bad(rule: Rule, catalog: Catalog, i: int) -> Outcome:
    found = codes_found(rule, catalog, rule.bad[i], f"{rule.code}_bad{i}")
    detail = "" if rule.code in found else f"not flagged (found: {', '.join(sorted(found)) or 'nothing'})"
    return Outcome(rule.code, f"bad[{i}] is flagged", not detail, detail)


def check_good(rule: Rule, catalog: Catalog, i: int) -> Outcome:
    flagged = rule.code in codes_found(rule, catalog, rule.good[i], f"{rule.code}_good{i}")
    return Outcome(rule.code, f"good[{i}] is not flagged", not flagged, "flagged" if flagged else "")


def check_fixed(rule: Rule, catalog: Catalog, i: int) -> list[Outcome]:
    """`fixed[i]` is what fixing `bad[i]` writes, and a second fix changes nothing."""
    from fuselint.source.fixer import fix_text
    from fuselint.source.lint import lint_text

    config = Config(select=(rule.code,))

    def lint(text: str):
        return lint_text("example.py", text, catalog, config)

    result = fix_text(rule.bad[i], lint, unsafe=rule.fix == "unsafe")
    same = result.text == rule.fixed[i]
    again = fix_text(result.text, lint, unsafe=True)
    stable = again.text == result.text
    return [
        Outcome(
            rule.code,
            f"fixed[{i}] is what --fix writes",
            same,
            "" if same else _diff(rule.fixed[i], result.text),
        ),
        Outcome(
            rule.code,
            f"fixed[{i}] is stable under a second --fix",
            stable,
            "" if stable else _diff(result.text, again.text),
        ),
    ]


def _diff(want: str, got: str) -> str:
    import difflib

    lines = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "written", lineterm="")
    return "\n".join(lines)


def check_proof(rule: Rule) -> list[Outcome]:
    from fuselint.source.pattern_proof import prove

    return [
        Outcome(
            rule.code,
            f"match and replace agree (alternative {p.alternative}, {p.dtype}, {p.checked} draws)",
            p.ok,
            p.error,
        )
        for p in prove(rule)
    ]


def check_rule(rule: Rule, catalog: Catalog) -> list[Outcome]:
    """Every check of one rule, in the order of the rule file."""
    if rule.kind == "pattern":
        from fuselint.source.patterns import PatternError, compile_rule

        try:
            compile_rule(rule)
        except PatternError as exc:
            return [Outcome(rule.code, "pattern compiles", False, str(exc))]
    outcomes = [check_bad(rule, catalog, i) for i in range(len(rule.bad))]
    outcomes += [check_good(rule, catalog, i) for i in range(len(rule.good))]
    for i in range(len(rule.fixed)):
        outcomes += check_fixed(rule, catalog, i)
    if rule.kind == "pattern":
        outcomes += check_proof(rule)
    if not rule.bad:
        outcomes.append(
            Outcome(rule.code, "has a bad example", False, "a rule needs at least one `bad` example")
        )
    if rule.fixable and not rule.fixed:
        outcomes.append(
            Outcome(rule.code, "has a fixed example", False, "a rule with a fix needs `fixed` examples")
        )
    return outcomes
