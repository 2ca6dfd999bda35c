"""Toys for reach22: what dynamo (torch 2.13, eager backend) does with the two shapes fixed here and one
left, each `entry(x)` compiled and run once on `torch.randn(4)` (bench/reach20_toys.py's machinery; every
break in the toy's file printed as `toy: line gbNNNN [stack] source line`):

- `value in tensor` (`Tensor.__contains__` reads `(tensor == value).any().item()`): snntorch's
  spikegen.py:1283 and :1380; the same with a host container does not break;
- a method that a base class of the file defines, called on `self` from a subclass, returning sizes
  in a tuple: its numbers are Python ints (snntorch's functional/loss.py, 8 false FL101/FL102);
- a tensor method whose argument's call breaks: dynamo logs the caller's line too (gb0007), which
  a function or a name bound before does not do (left: see docs/NOTES.md "reach22").

    PYTHONPATH=. python bench/reach22_toys.py [TOY ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reach20_toys  # noqa: E402

TOYS = {
    "contains_if": """
def entry(x):
    if 0 in x.round():
        return x + 1
    return x - 1
""",
    "contains_loop": """
def entry(x):
    y = x * 0
    for step in range(3):
        if step in x.round():
            y = y + step
    return y
""",
    "contains_value": """
def entry(x):
    found = 2.0 in x
    return x * 2, found
""",
    "not_in": """
def entry(x):
    if 1.0 not in x:
        return x + 1
    return x
""",
    "contains_tensor_element": """
def entry(x):
    if x[0] in x[1:]:
        return x + 1
    return x
""",
    "in_shape": """
def entry(x):
    if 4 in x.shape:
        return x + 1
    return x
""",
    "in_list": """
def entry(x):
    sizes = [1, 2, 4]
    if x.shape[0] in sizes:
        return x + 1
    return x
""",
    "in_dict": """
def entry(x):
    table = {"a": 1}
    if "a" in table:
        return x + table["a"]
    return x
""",
    "inherited_sizes": """
class Base:
    def __init__(self, rate):
        self.rate = rate

    def __call__(self, out):
        return self.compute(out)

    def check(self, out):
        device = out.device
        steps = out.size(0)
        outputs = out.size(-1)
        return device, steps, outputs


class Loss(Base):
    def compute(self, out):
        device, steps, outputs = self.check(out)
        if outputs % 2:
            return out * 0
        on = int(steps * self.rate)
        return out.sum() * on


LOSS = Loss(0.5)


def entry(x):
    return LOSS(x.view(2, 2))
""",
    "method_arg_breaks": """
def pick(m):
    return m.nonzero().view(-1)


def entry(x):
    return x.index_select(0, pick(x > 0))
""",
    "function_arg_breaks": """
def pick(m):
    return m.nonzero().view(-1)


def entry(x):
    return torch.index_select(x, 0, pick(x > 0))
""",
    "method_after_bound_name": """
def pick(m):
    return m.nonzero().view(-1)


def entry(x):
    idx = pick(x > 0)
    return x.index_select(0, idx)
""",
}


def main(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(TOYS):
            for row in reach20_toys.run(name, TOYS[name], Path(tmp)) or ["   - no break"]:
                print(f"{name:28s} {row}")


if __name__ == "__main__":
    main(sys.argv[1:])
