"""A fixed set of findings every format is tested on, in a real folder on disk.

They cover what breaks formatters: fixes (safe, unsafe with imports) and none, gains
and none, paths with spaces, commas and non-ASCII letters, a span over several lines,
and a message full of characters that need escaping.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuselint.catalog import Catalog, Rule
from fuselint.findings import Applicability, Edit, Finding, Fix, Gain, Span

SOURCES = {
    "src/model.py": "import torch\n\ndef forward(x):\n    n = x.sum().item()\n    return x * n\n",
    "dir with space/a,b.py": "def forward(x):\n    print(x)\n    return x\n",
    "ünï/模型.py": "import torch\n\ndef f(x):\n    return x * torch.sigmoid(x)\n",
    "src/flow.py": (
        "def forward(x):\n    y = x + 1\n    z = y * 2\n    if (\n        z.sum() > 0\n    ):\n"
        "        return z\n    return -z\n"
    ),
}


def make_rule(code: str, name: str, fix: str = "none", kind: str = "source") -> Rule:
    return Rule(
        code=code,
        name=name,
        kind=kind,
        summary=f"{name} summary | with a pipe",
        message=f"{name} message",
        why=f"Why {name} blocks fusion.",
        use_instead=f"Use something else than {name}.",
        fix=fix,
        bad=("x.item()\n",),
        url=f"https://example.org/rules/{code}",
    )


@pytest.fixture
def catalog() -> Catalog:
    rules = [
        make_rule("FL101", "host-sync"),
        make_rule("FL102", "data-dependent-branch"),
        make_rule("FL103", "print-in-forward", fix="safe"),
        make_rule("FL201", "silu-pattern", fix="unsafe", kind="pattern"),
    ]
    return Catalog({r.code: r for r in rules})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sources written under tmp_path, which is also the working directory."""
    for rel, text in SOURCES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def findings(project: Path) -> list[Finding]:
    return [
        Finding(
            code="FL101",
            message="`.item()` copies to the host and ends the graph",
            span=Span("src/model.py", 4, 9, 4, 23),
            gain=Gain(launches=2, bytes=1_500_000, time_us=12.5, device="H100"),
            source_line="n = x.sum().item()",
        ),
        Finding(
            code="FL103",
            message="print() in `forward` ends the compiled graph",
            span=Span("dir with space/a,b.py", 2, 5, 2, 13),
            fix=Fix(Applicability.SAFE, "Remove the print", (Edit(2, 1, 3, 1, ""),)),
            source_line="print(x)",
        ),
        Finding(
            code="FL201",
            message="`x * sigmoid(x)` is SiLU: 100% of it fits one kernel, a: b, c\r\nsecond line",
            span=Span("ünï/模型.py", 4, 12, 4, 32),
            gain=Gain(launches=1, bytes=2048),
            fix=Fix(
                Applicability.UNSAFE,
                "Use F.silu",
                (Edit(4, 12, 4, 32, "F.silu(x)"),),
                imports=("import torch.nn.functional as F",),
            ),
            source_line="return x * torch.sigmoid(x)",
        ),
        Finding(
            code="FL102",
            message="branch on a tensor value",
            span=Span("src/flow.py", 4, 5, 6, 6),
            # No source_line: the fingerprint must read the line from the file.
        ),
    ]
