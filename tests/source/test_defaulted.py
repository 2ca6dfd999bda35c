"""A helper's test on a parameter every reaching call leaves at its constant default is decided:
the other arm is dead on the traced path (torchmetrics' `deepcopy(s) if copy else s`)."""

from __future__ import annotations

from source_rules_helpers import lines

SRC = """
from copy import deepcopy

import torch
from torch import nn


class Collection(nn.Module):
    def forward(self, x):
        self._share()
        out = self._pick(x, meta=x)
        return out + self._maybe(x) + self._spread(x, *self.extra)

    def _share(self, copy: bool = False):
        for m in self.metrics:
            setattr(m, "state", deepcopy(m.state) if copy else m.state)
        if copy:
            print("copied")

    def _pick(self, x, meta=None):
        if meta is None:
            return deepcopy(x)
        return x

    def _maybe(self, x, flag: bool = False):
        if not flag:
            return x
        print(x)
        return x

    def _spread(self, x, verbose: bool = False):
        if verbose:
            print(x)
        return x

    def items(self, copy_state: bool = True):
        self._share(copy_state)
        return self._maybe(1, flag=copy_state)
"""


def test_a_branch_on_a_parameter_no_reaching_call_passes_is_dead():
    # `_share` and `_maybe` are called from forward without `copy`/`flag` (`items` is not traced);
    # `_maybe` returns early when `flag` is False, so its print is dead too.
    assert lines(SRC, "FL104") == [22]  # `meta` is passed: its test stays open
    # `_spread` gets `*self.extra`, which may hold `verbose`.
    assert lines(SRC, "FL103") == [33]


def test_a_call_that_passes_the_parameter_keeps_the_branch():
    passed = SRC.replace("self._share()", "self._share(copy=self.copy)").replace(
        "self._maybe(x)", "self._maybe(x, True)"
    )
    assert lines(passed, "FL104") == [16, 22]
    assert lines(passed, "FL103") == [18, 28, 33]


def test_a_helper_handed_on_uncalled_keeps_the_branch():
    handed = SRC.replace("self._share()", "self.hooks.append(self._share)")
    assert lines(handed, "FL104") == [22]  # not called at all now: `_share` is out of scope
    handed = SRC.replace("self._share()", "self._share(); map(self._share, self.metrics)")
    assert lines(handed, "FL104") == [16, 22]


CHAIN = """
from copy import deepcopy

import torch
from torch import nn


class Collection(nn.Module):
    def forward(self, x):
        for m in self.items(keep=True, copy_state=False):
            x = x + m(x)
        return x + sum(v for v in self.cache.items())

    def items(self, keep: bool = False, copy_state: bool = True):
        self._share(copy_state)
        return self.metrics

    def _share(self, copy: bool = False):
        for m in self.metrics:
            m.state = deepcopy(m.state) if copy else m.state
"""


def test_a_constant_handed_on_through_a_helper_decides_the_branch():
    # torchmetrics' MetricCollection: forward -> items(copy_state=False) -> _share(copy_state).
    # `self.cache.items()` is another object's method, not this helper.
    assert lines(CHAIN, "FL104") == []
    assert lines(CHAIN.replace("copy_state=False)", "copy_state=True)"), "FL104") == [20]
