"""Toys for reach21: is a method call on an object that another call returns a caller-line site (gb0092)?

Same machinery as bench/reach20_toys.py (each toy's `entry(x)` compiled with the eager backend, every
break dynamo logs in the toy's file printed as `toy: line gbNNNN [stack] source line`):
    PYTHONPATH=. python bench/reach21_toys.py [TOY ...]
The receivers here are the results of calls: a function or method that builds the object and returns
it, and one that returns an object that already exists (`self`, a stored attribute, a global).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reach20_toys  # noqa: E402

# K with a breaking `smooth` and methods returning a new K, itself, or what it holds.
KR = """class K:
    def __init__(self, s):
        self.s = s
        self.inner = None
    def smooth(self, x):
        return x * self.s, (x.sum() > 0).item()
    def scaled(self, a):
        return K(self.s * a)
    def scaled_via_local(self, a):
        out = K(self.s * a)
        return out
    def same(self):
        return self
    def held(self):
        return self.inner
    @classmethod
    def create(cls, s):
        return cls(s)

BASE = K(1.0)
BASE.inner = K(3.0)
"""

# Each toy: definitions beside KR, and the expression that gives `entry` its receiver `k`.
ENTRY = """
def entry(x):
    k = {receiver}
    y, flag = k.smooth(x)
    return y + 1
"""

MODULE = """
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = K(1.0)
    def forward(self, x):
        k = {receiver}
        y, flag = k.smooth(x)
        return y + 1

MOD = M()
"""

PICK = """
def pick(k, a):
    if a != 1.0:
        return k.scaled(a)
    return k
"""

CASES = {
    # A function that builds the object and returns it (reach20's receiver_from_call again).
    "function_returns_new": ("def make(s):\n    return K(s)\n", "make(2.0)"),
    # A method of a global object that returns a new object of its class.
    "method_returns_new": ("", "BASE.scaled(2.0)"),
    # The same, the new object held in a local of the method before it returns it.
    "method_returns_new_local": ("", "BASE.scaled_via_local(2.0)"),
    # Two fresh steps (like `x.cholesky().to_dense()` on a built operator).
    "method_returns_new_twice": ("", "BASE.scaled(2.0).scaled(3.0)"),
    # A classmethod constructor: `K.create(2.0)` returns `cls(s)`.
    "classmethod_returns_new": ("", "K.create(2.0)"),
    # A method that returns `self`.
    "method_returns_self": ("", "BASE.same()"),
    # A method that returns a stored attribute.
    "method_returns_attribute": ("", "BASE.held()"),
    # A function that returns a global object.
    "function_returns_global": ("def get():\n    return BASE\n", "get()"),
    # A function that returns its argument.
    "function_returns_argument": ("def ident(k):\n    return k\n", "ident(BASE)"),
    # A function that returns a new object on one branch and its argument on the other: each taken.
    "method_returns_new_or_self": (PICK, "pick(BASE, 2.0)"),
    "method_returns_self_or_new": (PICK, "pick(BASE, 1.0)"),
}

TOYS = {name: f"<KR>\n{defs}\n{ENTRY.format(receiver=receiver)}" for name, (defs, receiver) in CASES.items()}
# The receiver's call chained: `BASE.scaled(2.0).smooth(x)`.
TOYS["method_returns_new_chain"] = """
<KR>

def entry(x):
    y, flag = BASE.scaled(2.0).smooth(x)
    return y + 1
"""
# In a module's forward, on what it stores: the gpytorch shape (`prior_covar.mul(-1)`), and `same()`.
for name, receiver in (
    ("module_method_returns_new", "self.k.scaled(2.0)"),
    ("module_method_returns_self", "self.k.same()"),
):
    TOYS[name] = f"<KR>\n{MODULE.format(receiver=receiver)}\ndef entry(x):\n    return MOD(x)\n"


def main(names: list[str]) -> None:
    reach20_toys.PIECES["KR"] = KR
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(TOYS):
            for row in reach20_toys.run(name, TOYS[name], Path(tmp)) or ["   - no break"]:
                print(f"{name:28s} {row}")


if __name__ == "__main__":
    main(sys.argv[1:])
