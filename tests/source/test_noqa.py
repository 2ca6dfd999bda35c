"""noqa directives: where a finding's comment goes, which codes a comment names, unused ones
(FL001) and the comments --add-noqa writes."""

from __future__ import annotations

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Finding, Span
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text, noqa_codes, noqa_map, suppressed, with_noqa

CATALOG = load_catalog()
WITH_FL001 = Config(select=("FL", "FL001"))

HEAD = "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def forward(self, x):\n"


def _codes(text: str, config: Config = WITH_FL001) -> list[tuple[str, int]]:
    return [(f.code, f.span.line) for f in lint_text("m.py", text, CATALOG, config)]


def test_a_line_inside_a_multiline_string_is_carried_by_the_line_that_ends_it():
    text = 'a = f"""{x}\nmiddle\n"""\nb = 1 + \\\n    2\nc = (1,\n     2)\n'
    notes = noqa_map(text)
    assert [notes.carrier(n) for n in range(1, 8)] == [3, 3, 3, 5, 5, 6, 7]


def test_noqa_at_the_end_of_a_multiline_string_silences_a_finding_where_it_starts():
    body = '        s = f"""{x.sum().item()}\n"""\n        return s\n'
    assert ("FL101", 7) in _codes(HEAD + body)
    silenced = body.replace('\n"""\n', '\n"""  # noqa: FL101\n')
    assert _codes(HEAD + silenced) == []


def test_noqa_codes_are_letters_then_digits():
    assert noqa_codes("# noqa") == ()
    assert noqa_codes("# NOQA:FL101,E501") == ("FL101", "E501")
    assert noqa_codes("# noqa: FL101 because the loop is tiny") == ("FL101",)
    assert noqa_codes("# noqa: nothing") is None  # invalid: silences nothing, not everything
    assert noqa_codes("# see docs") is None


def test_an_invalid_directive_silences_nothing():
    finding = Finding("FL101", "m", Span("m.py", 1, 1, 1, 2))
    assert not suppressed(finding, noqa_map("x = 1  # noqa: everything\n"))
    assert suppressed(finding, noqa_map("x = 1  # noqa: FL1 the reason\n"))


def test_unused_noqa_names_unknown_and_non_enabled_codes():
    text = HEAD + "        return x  # noqa: FL999, FL103\n"
    findings = lint_text("m.py", text, CATALOG, Config(select=("FL2", "FL001")))
    assert [f.message for f in findings] == [
        "Unused `noqa` directive (unknown: `FL999`; non-enabled: `FL103`)"
    ]


def test_unused_noqa_leaves_bare_noqa_other_tools_and_traced_rules_alone():
    text = (
        HEAD + "        y = x  # noqa\n        z = x  # noqa: E501, F841\n        return x  # noqa: FL150\n"
    )
    assert _codes(text) == []


def test_unused_noqa_is_reported_in_a_file_without_torch():
    assert _codes("x = 1  # noqa: FL101\n") == [("FL001", 1)]


def test_unused_noqa_fix_keeps_the_words_after_the_directive_as_a_comment():
    text = HEAD + "        return x  # noqa: FL103 the log is gone\n"
    fixed = fix_text(text, lambda t: lint_text("m.py", t, CATALOG, WITH_FL001))
    assert fixed.text == HEAD + "        return x  # the log is gone\n"
    other = HEAD + "        return x  # keep  # noqa: FL103\n"
    assert fix_text(other, lambda t: lint_text("m.py", t, CATALOG, WITH_FL001)).text == (
        HEAD + "        return x  # keep\n"
    )


def test_with_noqa_merges_into_an_existing_directive_and_skips_a_bare_one():
    text = "a = 1  # noqa: E501 reason\nb = 2  # noqa\nc = 3\n"
    findings = [
        Finding(code, "m", Span("m.py", line, 1, line, 2))
        for code, line in [("FL101", 1), ("FL102", 2), ("FL103", 3), ("FL101", 3)]
    ]
    new, added = with_noqa(text, findings)
    assert new == "a = 1  # noqa: E501, FL101 reason\nb = 2  # noqa\nc = 3  # noqa: FL101, FL103\n"
    assert added == 2


def test_with_noqa_leaves_a_file_with_lone_carriage_returns_alone():
    text = "a = 1\rb = 2\n"
    assert with_noqa(text, [Finding("FL101", "m", Span("m.py", 2, 1, 2, 2))]) == (text, 0)
