"""Toys for reach22: what dynamo (torch 2.13, eager backend) does with the `in` shape fixed here and one
left, each `entry(x)` compiled and run once on `torch.randn(4)` (bench/reach20_toys.py's machinery; every
break in the toy's file printed as `toy: line gbNNNN [stack] source line`):

- `value in tensor` (`Tensor.__contains__` reads `(tensor == value).any().item()`): snntorch's
  spikegen.py:1283 and :1380; the same with a host container does not break;
- a tensor method whose argument's call breaks: dynamo logs the caller's line too (gb0007), which
  a function or a name bound before does not do (left: see docs/NOTES.md "reach22").

    PYTHONPATH=. python bench/reach22_toys.py [TOY ...]
"""

from __future__ import annotations

import sys
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
    "contains_in_comprehension": """
def entry(x):
    seen = x.round().unique()
    picked = [x[i] if i in seen else None for i in range(3)]
    return [p for p in picked if p is not None]
""",
    "contains_optional_mask": """
def entry(x, mask=None):
    mask = (x > 0).float() if mask is None else mask
    if mask is not None and 0.0 in mask:
        return x * mask
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


if __name__ == "__main__":
    reach20_toys.main(sys.argv[1:], TOYS)
