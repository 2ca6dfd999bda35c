"""A class that is an nn.Module only through a base of another file has its forward linted
(fixtures/inherited, in the shape of nflows' transforms)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "inherited"


def _sites(root: Path, *names: str) -> set[tuple[str, int, str]]:
    config = Config(root=root, select=("FL1",))
    files = discover([str(root / n) for n in names] or [str(root)], config)
    found = lint_tree(files, load_catalog(), config, jobs=1).findings
    return {(Path(f.span.path).relative_to(root).as_posix(), f.span.line, f.code) for f in found}


def test_forward_of_a_module_through_another_files_base_is_an_entry(tmp_path: Path):
    root = shutil.copytree(FIXTURE, tmp_path / "inherited")
    assert _sites(root) == {
        ("flows/nonlinear.py", 8, "FL102"),  # LogTanh(Transform): if on a tensor
        ("flows/nonlinear.py", 15, "FL101"),  # Shifted(LogTanh), a local subclass of it: .item()
        # PiecewiseLinear.forward calls `spline_fn`, bound in one branch or the other to a function
        # of flows.splines (re-exported there): both are followed
        ("flows/splines/linear.py", 7, "FL106"),
        ("flows/splines/linear.py", 12, "FL102"),
    }  # NotAModule(Helper) derives from a plain class: nothing
