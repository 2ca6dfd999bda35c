"""FL108: constructs dynamo does not trace (checked against dynamo in rules/FL108.toml's terms)."""

from __future__ import annotations

from source_rules_helpers import lines

METHOD = """
import torch
from torch import nn

class Cached(nn.Module):
    @torch.compiler.disable
    def lookup(self, x):
        return x

    def forward(self, x):
        y = self.lookup(x)
        return y * 2
"""


def test_a_call_to_a_disabled_method_is_flagged():
    assert lines(METHOD, "FL108") == [11]


def test_a_device_context_is_flagged_but_no_grad_is_not():
    source = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x):
        with torch.no_grad(), torch.device("cpu"):
            y = torch.zeros(3)
        return x + y
"""
    assert lines(source, "FL108") == [7]


WRAPPED = """
import functools

import torch
from torch import nn

FLAGS = {{"hidden_states": True}}


def capture(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        wanted = {comprehension}
        try:
            out = func(self, *args, **kwargs)
        finally:
            pass
        return out, wanted

    return wrapper


class M(nn.Module):
    @capture
    def forward(self, x):
        return x * 2
"""


def test_a_comprehension_that_sees_the_module_in_a_wrapper_with_a_try_is_flagged():
    # dict, its views, lists, sets, strings: dynamo takes none of their iterators as a frame input.
    for comprehension in (
        "{k: getattr(self, k, False) for k in FLAGS}",
        "{k: v for k, v in FLAGS.items() if getattr(self, k, v)}",
        "[getattr(self, k, False) for k in sorted(FLAGS)]",
        "{kwargs.get(k) for k in FLAGS.values()}",
    ):
        assert lines(WRAPPED.format(comprehension=comprehension), "FL108") == [13], comprehension


def test_a_comprehension_dynamo_can_start_or_never_starts_is_not_flagged():
    for comprehension in (
        "{k: getattr(self, k, False) for k in tuple(FLAGS)}",  # a tuple's iterator is a frame input
        "[getattr(self, 'w', i) for i in range(3)]",  # and so is a range's
        "{k: True for k in FLAGS}",  # sees nothing of the frame: no tensor, no module, no torch
        "dict((k, getattr(self, k, False)) for k in FLAGS)",  # a generator's frame is not started
    ):
        assert lines(WRAPPED.format(comprehension=comprehension), "FL108") == [], comprehension
    # Without a `try`, a break in the wrapper is resumed and the comprehension is traced inline.
    no_try = WRAPPED.format(comprehension="{k: getattr(self, k, False) for k in FLAGS}")
    no_try = no_try.replace("        try:\n            out", "        if True:\n            out")
    no_try = no_try.replace("        finally:\n            pass\n", "")
    assert lines(no_try, "FL108") == []
    # A decorator that no forward wears is not traced.
    unused = WRAPPED.format(comprehension="{k: getattr(self, k, False) for k in FLAGS}")
    assert lines(unused.replace("    @capture\n", ""), "FL108") == []
