"""When dynamo logs a break at a line that is not itself a break (torch 2.13, CPU): judge8's check of
torchsde's gb0119 (`super().__init__()` of an `nn.Module`) and gb0092 ("cannot resume") sites.

A module built in a compiled function traces, before or after an ordinary break in that function.
Built after a break inside a user context manager (`with Ctx(): y = helper(x)`), where dynamo cannot
resume, the rest of the function runs in eager, and the module's `__init__` frames are compiled as
frames of their own: gb0119 ("Uninitialized nn.Module") at each `super().__init__()`. The line that
breaks (the `if` in `helper`) is the site a static rule can see; the gb0119 lines depend on where
dynamo can resume, which no line of the module shows.

    PYTHONPATH=$PWD:$PWD/bench python bench/resume_probe.py
"""

from __future__ import annotations

import abc
import warnings

import torch
from break_probe import break_sites, counting_compile, listen
from torch import nn


def _user(path: str) -> str | None:
    return "probe" if path.endswith("resume_probe.py") else None


def helper(x):
    if x.sum() > 0:  # the break: a tensor `if`
        return x
    return -x


class Base(abc.ABC, nn.Module):  # torchsde's BaseSDE
    def __init__(self, kind):
        super(Base, self).__init__()  # noqa: UP008 - torchsde's spelling
        self.kind = kind


class Forward(Base):  # torchsde's ForwardSDE, built inside `sdeint`
    def __init__(self, inner):
        super(Forward, self).__init__(kind=1)  # noqa: UP008 - as torchsde
        self._inner = inner


class Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


LINEAR = nn.Linear(3, 3)


def module_only(x):
    return Forward(LINEAR)._inner(x)


def module_after_a_break(x):
    y = helper(x)
    return Forward(LINEAR)._inner(y)


def module_after_an_unresumable_break(x):
    with Ctx():
        y = helper(x)
    return Forward(LINEAR)._inner(y)


def main() -> None:
    breaks = listen()
    for fn in (module_only, module_after_a_break, module_after_an_unresumable_break):
        compiled, graphs = counting_compile(fn, breaks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(torch.randn(3))
        print(f"{fn.__name__}: {len(graphs)} graphs; {'; '.join(break_sites(breaks.texts, _user)) or '-'}")


if __name__ == "__main__":
    main()
