"""The README stays true: its rule table is the catalog's, and it opens with the two commands."""

import re
from pathlib import Path

from fuselint.catalog import load_catalog
from fuselint.report.rules import rules_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_rule_table_is_generated_from_the_catalog():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- rules:begin[^\n]*-->\n(.*?)<!-- rules:end -->", text, re.S)
    assert block, "README has no generated rule table"
    assert block.group(1) == rules_table(load_catalog(), "markdown"), (
        "README rule table is stale: run `python scripts/update_readme.py`"
    )


def test_readme_opens_with_install_and_test_commands():
    head = README.read_text(encoding="utf-8")[:1500]
    assert "fuselint check fixtures/" in head
    assert "pip install torch==2.13.0" in head and "pytest" in head
