"""reach22: two facts of Python and dynamo (torch 2.13) found on snntorch 1.0.0, checked on
fixtures/reach22/spikes_pkg (toys: bench/reach22_toys.py).

- `value in tensor` runs `Tensor.__contains__`, `bool((tensor == value).any().item())`: FL101 at the
  `in`, which dynamo logs as gb0124; a shape, a list or a dict on the right is no tensor read.
- `self.m(...)` in a subclass, where a base class of the file defines `m`, runs that method (Python's
  lookup along the bases), not a submodule: what it returns is known as for the class's own methods,
  so its sizes (`out.size(0)`) stay Python ints and nothing reads them on the host; an element its
  returns do not show (a submodule's output) is still taken for a tensor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import CATALOG, logged_break_lines

from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reach22"
MEMBERSHIP = ["IfIn", "LoopIn", "NotInValue", "HostContainers", "UsedAsTensor"]


def _lines(file: str, codes: tuple[str, ...]) -> set[int]:
    config = Config(root=FIXTURES, select=("FL1",))
    found = lint_tree(discover([str(FIXTURES / "spikes_pkg")], config), CATALOG, config, jobs=1).findings
    return {f.span.line for f in found if Path(f.span.path).name == file and f.code in codes}


def test_in_on_a_tensor_is_a_host_read():
    # 11 `0 in steps`, 21 in a loop, 29 `not in`, 62 a parameter the body calls `.numel()` on; none on a
    # shape, a list, a dict (40-44), a parameter taken for a tensor on its name alone (53) or a string key (70).
    assert _lines("membership.py", ("FL101",)) == {11, 21, 29, 62}


def test_dynamo_breaks_on_the_flagged_membership_lines_and_no_other(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from spikes_pkg import membership

    x = torch.tensor([0.0, 1.2, 2.0, 3.4])
    logged = set()
    for name in MEMBERSHIP:
        logged |= logged_break_lines(getattr(membership, name)(), x, filename=membership.__file__)
    assert logged == _lines("membership.py", ("FL101",))
    mapping = {"scale": x}
    assert logged_break_lines(membership.StringKey(), x, mapping, filename=membership.__file__) == set()


def test_sizes_from_a_base_class_method_are_host_numbers(monkeypatch):
    # CountLoss: no host read; Mix (45): `float(lam > 0.5)`, `lam` what a submodule returned in the base's
    # method, is one, as it was when the call was taken for a submodule's
    assert _lines("losses.py", ("FL101", "FL102")) == {45}
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    from spikes_pkg import losses

    out = torch.rand(5, 4, 6)
    assert logged_break_lines(losses.CountLoss(3, 0.5), out, filename=losses.__file__) == set()
    assert logged_break_lines(losses.Mix(), out, filename=losses.__file__) == {45}
