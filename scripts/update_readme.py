"""Regenerate the README's rule table from rules/*.toml: `python scripts/update_readme.py`."""

import re
from pathlib import Path

from fuselint.catalog import load_catalog
from fuselint.report.rules import rules_table

README = Path(__file__).resolve().parent.parent / "README.md"

text = README.read_text(encoding="utf-8")
table = rules_table(load_catalog(), "markdown")
new = re.sub(
    r"(<!-- rules:begin[^\n]*-->\n).*?(<!-- rules:end -->)",
    lambda m: m.group(1) + table + m.group(2),
    text,
    flags=re.S,
)
README.write_text(new, encoding="utf-8")
print("README rule table:", "updated" if new != text else "already current")
