"""The fixed variant verify builds: fixed as `check --fix` fixes, counted as it counts."""

from __future__ import annotations

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.verify.variants import copy_with_fixes

NESTED = "import torch\n\n\ndef f(x):\n    return torch.exp(torch.exp(x) - 1) - 1\n"


def test_fixed_count_is_the_findings_shown_not_the_rounds(tmp_path):
    """One finding is reported (the inner match is fixed in a second round): one fix counted."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(NESTED)
    (fixed,) = copy_with_fixes(tmp_path / "src", tmp_path / "dst", load_catalog(), Config(), unsafe=True)
    assert (tmp_path / "dst" / "m.py").read_text().count("expm1") == 2
    assert fixed.fixes == 1 and fixed.codes == ("FL210",)
