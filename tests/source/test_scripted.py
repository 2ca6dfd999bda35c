"""No fix is written in code TorchScript compiles (`fuselint.source.scripted`); the finding stays.

torch_geometric 2.8.1 scripts `ConnectOutput` at import (`ConnectOutput = torch.jit.script(...)`);
a guard fix in its `__init__` made the fixed package fail to import."""

from __future__ import annotations

import textwrap

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text

CATALOG = load_catalog()


def _fl210(text: str) -> list:
    return [f for f in lint_text("m.py", textwrap.dedent(text), CATALOG, Config()) if f.code == "FL210"]


PLAIN = """
import torch


def f(x):
    return torch.exp(x) - 1
"""


@pytest.mark.parametrize(
    "text",
    [
        PLAIN.replace("def f", "@torch.jit.script\ndef f"),
        PLAIN.replace("import torch\n", "import torch\nfrom torch import jit\n").replace(
            "def f", "@jit.script\ndef f"
        ),
        PLAIN + "\nf = torch.jit.script(f)\n",
        PLAIN + "\ng = torch.jit.script(f)\n",
        """
        import torch


        class C:
            def __init__(self, x: torch.Tensor):
                self.y = torch.exp(x) - 1


        C = torch.jit.script(C)
        """,
        """
        import torch


        class M(torch.nn.Module):
            @torch.jit.script_method
            def forward(self, x):
                return torch.exp(x) - 1
        """,
    ],
)
def test_a_finding_in_scripted_code_keeps_no_fix(text):
    (finding,) = _fl210(text)
    assert finding.fix is None


def test_the_same_code_unscripted_keeps_its_fix():
    (finding,) = _fl210(PLAIN)
    assert finding.fix is not None
    # a scripted neighbour does not take the fix away, nor does a scripted name of another scope
    (finding,) = _fl210(PLAIN + "\n\n@torch.jit.script\ndef g(x):\n    return x\n")
    assert finding.fix is not None
    nested = PLAIN.replace(
        "def f(x):", "def f(x):\n    def h(y):\n        return y\n\n    torch.jit.script(h)"
    )
    (finding,) = _fl210(nested)
    assert finding.fix is not None
