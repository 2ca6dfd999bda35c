"""After `pip install`, torch.compile(backend="fuselint") finds the backend by its entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest


def _installed() -> bool:
    return any(ep.name == "fuselint" for ep in entry_points(group="torch_dynamo_backends"))


@pytest.mark.skipif(
    not _installed(), reason="fuselint is not installed (no torch_dynamo_backends entry point)"
)
def test_backend_name_resolves_without_importing_fuselint():
    script = (
        "import sys, torch\n"
        "fn = torch.compile(lambda x: torch.cos(x).sin(), backend='fuselint')\n"
        "x = torch.randn(8)\n"
        "assert torch.allclose(fn(x), torch.cos(x).sin())\n"
        "assert 'fuselint.backend' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
