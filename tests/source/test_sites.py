"""One finding per site: break-rule findings on one line are reported as one (source/sites.py)."""

from __future__ import annotations

import json
import random

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Finding, Span
from fuselint.pipeline import check_text
from fuselint.source.lint import lint_text
from fuselint.source.sites import ALSO_KEY, one_per_site
from tests.cli_runner import run

CATALOG = load_catalog()
CONFIG = Config(select=("FL1",))
HEAD = "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def forward(self, x, sz):\n"
UNIQUE_OF_MASKED = HEAD + "        m = x.argmax(-1)\n        return torch.unique(m[m < sz])\n"
LIST_OF_NONZERO = HEAD + "        return x.nonzero().tolist()\n"


def _reported(text: str, config: Config = CONFIG) -> list[Finding]:
    return list(check_text("m.py", text.encode(), CATALOG, config).findings)


def test_two_ops_on_one_line_are_one_finding_that_names_the_other():
    raw = lint_text("m.py", UNIQUE_OF_MASKED, CATALOG, CONFIG)
    assert [(f.code, f.span.line) for f in raw] == [("FL106", 8), ("FL106", 8)]
    (site,) = _reported(UNIQUE_OF_MASKED)
    # The mask index is evaluated first: dynamo breaks there, so it is the finding kept.
    assert site.span.column == raw[1].span.column > raw[0].span.column
    assert "boolean mask" in site.message
    assert "also on this line: FL106 `torch.unique` has a data-dependent output shape" in site.message
    assert dict(site.details)[ALSO_KEY] == f"FL106 8:{raw[0].span.column}"


def test_the_op_evaluated_first_is_kept():
    raw = lint_text("m.py", LIST_OF_NONZERO, CATALOG, CONFIG)
    assert sorted(f.code for f in raw) == ["FL101", "FL106"]
    (site,) = _reported(LIST_OF_NONZERO)
    # `.nonzero()` completes before the `.tolist()` that contains it.
    assert site.code == "FL106"
    assert "(also on this line: FL101 `.tolist()` on `x.nonzero()` copies it to the host)" in site.message


def test_on_one_span_the_rule_priority_decides():
    span = Span("m.py", 7, 12, 7, 31)
    branch = Finding("FL102", "Python must read the tensor: more", span)
    read = Finding("FL101", "`bool(t)` reads a tensor on the host: more", span)
    for order in ([branch, read], [read, branch]):
        (site,) = one_per_site(order)
        assert site.code == "FL101" and site.message.endswith(
            "(also on this line: FL102 Python must read the tensor)"
        )


def test_the_kept_finding_does_not_depend_on_input_order():
    raw = lint_text(
        "m.py", UNIQUE_OF_MASKED + LIST_OF_NONZERO.replace(HEAD, "").replace("return", "y ="), CATALOG, CONFIG
    )
    expected = one_per_site(raw)
    for seed in range(5):
        shuffled = list(raw)
        random.Random(seed).shuffle(shuffled)
        assert sorted(one_per_site(shuffled), key=lambda f: f.sort_key) == sorted(
            expected, key=lambda f: f.sort_key
        )


def test_other_rules_and_other_lines_are_left_alone():
    a = Finding("FL101", "`x.item()` reads a tensor on the host: more", Span("m.py", 3, 5, 3, 15))
    b = Finding("FL216", "manual RMS norm", Span("m.py", 3, 1, 3, 40))
    c = Finding("FL102", "branch", Span("m.py", 4, 1, 4, 9))
    assert one_per_site([a, b, c]) == [a, b, c]


def test_noqa_of_any_code_on_the_line_silences_the_site():
    for code in ("FL101", "FL106"):
        silenced = LIST_OF_NONZERO.replace("tolist()", f"tolist()  # noqa: {code}")
        assert lint_text("m.py", silenced, CATALOG, Config(select=("FL1", "FL001"))) == []


def test_fixes_of_the_merged_findings_still_apply(tmp_path):
    # Both FL106 findings carry a fix on their own span: --fix applies what it applied before.
    text = HEAD + "        keep = x > sz\n        return x[keep], sz[keep]\n"
    raw = lint_text("m.py", text, CATALOG, CONFIG)
    assert [f.code for f in raw] == ["FL106", "FL106"]
    assert len(_reported(text)) == 1
    fixed = check_text("m.py", text.encode(), CATALOG, Config(select=("FL1",), fix=True, unsafe_fixes=True))
    assert len(fixed.applied) == sum(f.fix is not None for f in raw)


def test_json_and_sarif_carry_the_merged_site(tmp_path):
    (tmp_path / "m.py").write_text(LIST_OF_NONZERO)
    out = run(["check", "--no-cache", "--select", "FL1", "--format", "json", "m.py"], tmp_path)
    (site,) = json.loads(out.output)
    assert site["code"] == "FL106" and site["details"][ALSO_KEY] == "FL101 7:16"
    sarif = json.loads(
        run(["check", "--no-cache", "--select", "FL1", "--format", "sarif", "m.py"], tmp_path).output
    )
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "FL106" and "also on this line: FL101" in result["message"]["text"]
