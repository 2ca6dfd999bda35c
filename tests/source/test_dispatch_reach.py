"""Reach through dispatch tables (`SOLVERS[method](...)`) and into subclasses' overrides of a
method a base class calls on `self` (fixtures/dispatch, in the shape of torchdiffeq's solvers)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dispatch"
CATALOG = load_catalog()


def _lint(root: Path, *names: str):
    config = Config(root=root, select=("FL1",))
    files = discover([str(root / n) for n in names] or [str(root)], config)
    return lint_tree(files, CATALOG, config, jobs=1).findings


def _by_site(findings, root: Path) -> dict[tuple[str, int, str], str]:
    return {
        (Path(f.span.path).relative_to(root).as_posix(), f.span.line, f.code): f.message for f in findings
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "dispatch")
    return tmp_path / "dispatch"


EXPECTED = {
    ("ode/adaptive.py", 9, "FL101"),  # float(t[0]) in the concrete override of _before_integrate
    ("ode/adaptive.py", 14, "FL102"),  # while on a tensor in AdaptiveSolver._advance (abstract in Solver)
    ("ode/api.py", 12, "FL101"),  # .item() in max_norm, called as NORMS.get(norm)(y0)
    ("ode/api.py", 24, "FL102"),  # if on a tensor in _scale_check, from the function's own table
    ("ode/fixed.py", 6, "FL101"),  # .item() in Euler._advance, the other class SOLVERS holds
}


def test_a_forward_reaches_tables_and_overrides(tree):
    assert set(_by_site(_lint(tree), tree)) == EXPECTED


def test_the_path_names_the_table_and_the_override(tree):
    found = _by_site(_lint(tree), tree)
    assert found[("ode/fixed.py", 6, "FL101")].endswith(
        "model.py:ODEBlock.forward → odeint → SOLVERS[...] → Solver.integrate → Euler._advance)"
    )
    assert found[("ode/api.py", 12, "FL101")].endswith("odeint → NORMS[...] → max_norm)")
    assert found[("ode/api.py", 24, "FL102")].endswith("odeint → steps[...] → _scale_check)")


def test_without_the_model_nothing_is_reached(tree):
    assert _lint(tree, "ode") == []


def test_the_report_does_not_depend_on_the_order_of_files(tree):
    names = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*.py"))
    first = [(f.span.path, f.span.line, f.code, f.message) for f in _lint(tree, *names)]
    second = [(f.span.path, f.span.line, f.code, f.message) for f in _lint(tree, *reversed(names))]
    assert first == second and len(first) == len(EXPECTED)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


MODEL = """
    import torch
    from torch import nn
    from base import Base

    class M(nn.Module):
        def forward(self, x):
            return Base().run(x)
"""


def test_a_method_overridden_by_many_subclasses_is_not_followed(tmp_path):
    # A hook that a whole zoo overrides says nothing about which runs: past _MAX_OVERRIDES
    # definitions, none is reached; with fewer, each is.
    def tree(count: int) -> Path:
        root = tmp_path / f"zoo{count}"
        subs = "".join(
            f"class Sub{i}(Base):\n    def hook(self, x):\n        return x.item()\n\n\n"
            for i in range(count)
        )
        base = """
            class Base:
                def run(self, x):
                    return self.hook(x)

                def hook(self, x):
                    return x
        """
        _write(root, {"model.py": MODEL, "base.py": base, "subs.py": "from base import Base\n\n\n" + subs})
        return root

    few, many = tree(3), tree(9)
    assert sorted(f.span.line for f in _lint(few) if f.span.path.endswith("subs.py")) == [6, 11, 16]
    assert [f for f in _lint(many) if f.span.path.endswith("subs.py")] == []


def test_a_dict_assigned_twice_is_no_table(tmp_path):
    _write(
        tmp_path,
        {
            "model.py": """
                import torch
                from torch import nn
                from helpers import once, twice

                class M(nn.Module):
                    def forward(self, x):
                        return once["a"](x) + twice["a"](x)
            """,
            "helpers.py": """
                def sync_a(x):
                    return x.item()

                def sync_b(x):
                    return x.item()

                once = {"a": sync_a}
                twice = {"a": sync_b}
                twice = {"a": lambda x: x}
            """,
        },
    )
    assert [f.span.line for f in _lint(tmp_path) if f.span.path.endswith("helpers.py")] == [3]
