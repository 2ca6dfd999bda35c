"""Toys for reach20: when does dynamo (torch 2.13) log the caller line of a callee's break?

Each toy is a small module; its `entry(x)` is compiled with the eager backend and run once. The script
prints every break dynamo logged in the toy's file as `toy: line gbNNNN  source line`, so the caller
lines (gb0092 and any other) can be read against the code:
    PYTHONPATH=. python bench/reach20_toys.py [TOY ...]
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

from fuselint.graph.breaks_log import parse_break
from fuselint.graph.capture import _listening_to_breaks

HEAD = "import contextlib, logging, torch\n\n"
# Pieces several toys share, written `<NAME>` in a toy's source.
K_SMOOTH = """class K:
    def __init__(self, s):
        self.s = s
    def smooth(self, x):
        return x * self.s, (x.sum() > 0).item()
"""

K_PLAIN = """class K:
    def __init__(self, s):
        self.s = s
"""

BRK_PAIR = """def brk(x):
    return x * 2, (x.sum() > 0).item()
"""

BRK = """def brk(x):
    return (x.sum() > 0).item()
"""

CM_CLASS = """class CM:
    def __enter__(self):
        return self
    def __exit__(self, *a):
        return False
"""

TOYS = {
    # A plain object built in the frame is the receiver of the call whose callee breaks.
    "object_receiver": """
<K_SMOOTH>

def entry(x):
    k = K(2.0)
    y, flag = k.smooth(x)
    return y + 1
""",
    # The same object, built in the frame, passed as an argument.
    "object_argument": """
<K_PLAIN>

def smooth(k, x):
    return x * k.s, (x.sum() > 0).item()

def entry(x):
    k = K(2.0)
    y, flag = smooth(k, x)
    return y + 1
""",
    # Built in the frame, not in the call, but read after it (a live local).
    "object_live_after": """
<K_PLAIN>

<BRK_PAIR>

def entry(x):
    k = K(2.0)
    y, flag = brk(x)
    return y * k.s
""",
    # Built in the frame, dead at the call.
    "object_dead": """
<K_PLAIN>

<BRK_PAIR>

def entry(x):
    k = K(2.0)
    z = x * k.s
    y, flag = brk(z)
    return y + 1
""",
    # No object at all: the plain nested break.
    "plain_call": """
<BRK_PAIR>

def entry(x):
    y, flag = brk(x)
    return y + 1
""",
    # The object comes from outside the frame (self's attribute): it has a source.
    "object_from_self": """
<K_SMOOTH>

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = K(2.0)
    def forward(self, x):
        y, flag = self.k.smooth(x)
        return y + 1

_m = M()
def entry(x):
    return _m(x)
""",
    # The object is built in forward of a module (entry through nn.Module.__call__).
    "module_forward_object": """
<K_SMOOTH>

class M(torch.nn.Module):
    def forward(self, x):
        k = K(2.0)
        y, flag = k.smooth(x)
        return y + 1

_m = M()
def entry(x):
    return _m(x)
""",
    # A dataclass built in the frame.
    "dataclass_receiver": """
import dataclasses
@dataclasses.dataclass
class K:
    s: float
    def smooth(self, x):
        return x * self.s, (x.sum() > 0).item()

def entry(x):
    k = K(2.0)
    y, flag = k.smooth(x)
    return y + 1
""",
    # A class with __slots__ / a custom __new__? keep: a nn.Module built in the frame.
    "module_built_in_frame": """
class K(torch.nn.Module):
    def forward(self, x):
        return x * 2, (x.sum() > 0).item()

def entry(x):
    k = K()
    y, flag = k(x)
    return y + 1
""",
    # A closure defined in the frame, called; its body breaks.
    "closure_called": """
def entry(x):
    s = 2.0
    def check(a):
        return (x.sum() * a > 0).item()
    flag = check(s)
    return x + 1
""",
    # A closure that is not alive at the call (no free variables, defined but called once).
    "closure_no_free": """
def entry(x):
    def check(t):
        return (t.sum() > 0).item()
    flag = check(x)
    return x + 1
""",
    # A lambda kept in a local.
    "lambda_local": """
<BRK>

def entry(x):
    f = lambda t: t * 2
    flag = brk(x)
    return f(x)
""",
    # A with block of a supported context manager around a breaking call.
    "with_no_grad": """
<BRK_PAIR>

def entry(x):
    with torch.no_grad():
        y, flag = brk(x)
    return y + 1
""",
    # A with block of a user context manager around a breaking call.
    "with_user_cm": """
@contextlib.contextmanager
def cm():
    yield

<BRK_PAIR>

def entry(x):
    with cm():
        y, flag = brk(x)
    return y + 1
""",
    # A with block of a user class context manager.
    "with_user_class_cm": """
<CM_CLASS>

<BRK_PAIR>

def entry(x):
    with CM():
        y, flag = brk(x)
    return y + 1
""",
    # A direct break inside a with block (no call).
    "with_direct": """
<CM_CLASS>

def entry(x):
    with CM():
        flag = (x.sum() > 0).item()
    return x + 1
""",
    # A try block around a breaking call.
    "try_call": """
<BRK_PAIR>

def entry(x):
    try:
        y, flag = brk(x)
    except ValueError:
        y = x
    return y + 1
""",
    # A direct break in a try block.
    "try_direct": """
def entry(x):
    try:
        flag = (x.sum() > 0).item()
    except ValueError:
        flag = False
    return x + 1
""",
    # A generator alive in the frame across the breaking call.
    "generator_live": """
<BRK>

def entry(x):
    g = (x * i for i in range(3))
    a = next(g)
    flag = brk(x)
    return a + next(g)
""",
    # A breaking call inside a generator expression consumed by sum.
    "call_in_genexpr": """
<BRK>

def entry(x):
    n = sum(brk(x * i) for i in range(2))
    return x + n
""",
    # A breaking call in a list comprehension.
    "call_in_listcomp": """
<BRK>

def entry(x):
    n = [brk(x * i) for i in range(2)]
    return x + len(n)
""",
    # Two levels: entry -> mid (builds an object) -> brk.
    "two_levels_object_mid": """
<K_SMOOTH>

def mid(x):
    k = K(2.0)
    y, flag = k.smooth(x)
    return y

def entry(x):
    y = mid(x)
    return y + 1
""",
    # Two levels, the object in the entry frame and the break two calls down.
    "two_levels_object_top": """
<K_PLAIN>

def inner(x):
    return (x.sum() > 0).item()

def mid(x):
    return inner(x)

def entry(x):
    k = K(2.0)
    flag = mid(x)
    return x * k.s
""",
    # The object is built in the frame and its method breaks directly (no helper inside).
    "object_method_direct_break": """
<K_PLAIN>
    def check(self, x):
        if x.sum() > 0:
            return x * self.s
        return x

def entry(x):
    k = K(2.0)
    return k.check(x) + 1
""",
    # A list of tensors built in the frame, alive across the call.
    "list_live": """
<BRK>

def entry(x):
    acc = [x * 2]
    flag = brk(x)
    acc.append(x)
    return acc[0] + acc[1]
""",
    # An object of a class from torch.distributions built in the frame.
    "distribution_object": """
<BRK>

def entry(x):
    d = torch.distributions.Normal(x, 1.0)
    flag = brk(x)
    return d.mean + 1
""",
    # The receiver is what a function returned (an object built in the callee).
    "receiver_from_call": """
<K_SMOOTH>

def make(s):
    return K(s)

def entry(x):
    k = make(2.0)
    y, flag = k.smooth(x)
    return y + 1
""",
    # A chained call on a fresh object.
    "receiver_chain": """
<K_SMOOTH>

def entry(x):
    y, flag = K(2.0).smooth(x)
    return y + 1
""",
    # The receiver's method breaks two calls down.
    "receiver_deep_break": """
<BRK>

<K_PLAIN>
    def smooth(self, x):
        return x * self.s, brk(x)

def entry(x):
    k = K(2.0)
    y, flag = k.smooth(x)
    return y + 1
""",
    # The constructor itself breaks.
    "constructor_breaks": """
class K:
    def __init__(self, x):
        self.flag = (x.sum() > 0).item()
        self.x = x

def entry(x):
    k = K(x)
    return k.x + 1
""",
    # A property of a fresh object breaks.
    "property_breaks": """
class K:
    def __init__(self, x):
        self.x = x
    @property
    def flag(self):
        return (self.x.sum() > 0).item()

def entry(x):
    k = K(x)
    f = k.flag
    return x + 1
""",
    # A fresh plain object called through __call__.
    "dunder_call_object": """
class K:
    def __call__(self, x):
        return x * 2, (x.sum() > 0).item()

def entry(x):
    k = K()
    y, flag = k(x)
    return y + 1
""",
    # super().method() whose body breaks.
    "super_call": """
class A(torch.nn.Module):
    def forward(self, x):
        return x * 2, (x.sum() > 0).item()

class B(A):
    def forward(self, x):
        y, flag = super().forward(x)
        return y + 1

_m = B()
def entry(x):
    return _m(x)
""",
    # A method of self whose body breaks (self has a source).
    "self_method": """
class M(torch.nn.Module):
    def helper(self, x):
        return x * 2, (x.sum() > 0).item()
    def forward(self, x):
        y, flag = self.helper(x)
        return y + 1

_m = M()
def entry(x):
    return _m(x)
""",
    # A fresh object's method that does not break, then a break elsewhere.
    "receiver_no_break": """
<K_PLAIN>
    def smooth(self, x):
        return x * self.s

<BRK>

def entry(x):
    k = K(2.0)
    y = k.smooth(x)
    flag = brk(y)
    return y + 1
""",
    # The fresh object's class method called through the class with the object as argument.
    "unbound_call": """
<K_SMOOTH>

def entry(x):
    k = K(2.0)
    y, flag = K.smooth(k, x)
    return y + 1
""",
    # A fresh object's method stored first in a local.
    "bound_method_local": """
<K_SMOOTH>

def entry(x):
    f = K(2.0).smooth
    y, flag = f(x)
    return y + 1
""",
    # A tensor-subclass-free case: a fresh torch.distributions object's method that breaks.
    "distribution_method": """
def entry(x):
    d = torch.distributions.Categorical(logits=x)
    s = d.sample()
    return x + s
""",
    # A module built in the frame, a method other than forward called on it.
    "module_method_in_frame": """
class K(torch.nn.Module):
    def helper(self, x):
        return x * 2, (x.sum() > 0).item()

def entry(x):
    k = K()
    y, flag = k.helper(x)
    return y + 1
""",
    # A static method called on a fresh object.
    "static_on_object": """
class K:
    @staticmethod
    def smooth(x):
        return x * 2, (x.sum() > 0).item()

def entry(x):
    k = K()
    y, flag = k.smooth(x)
    return y + 1
""",
    # Two calls on fresh objects in a row, both callees break: is the second logged too?
    "two_fresh_calls": """
<K_SMOOTH>

def entry(x):
    k = K(2.0)
    y, flag = k.smooth(x)
    j = K(3.0)
    z, flag = j.smooth(y)
    return z + 1
""",
}


PIECES = {name: text for name, text in globals().items() if name.isupper() and name not in ("HEAD", "TOYS")}


def run(name: str, source: str, workdir: Path) -> list[str]:
    path = workdir / f"toy_{name}.py"
    for name_, piece in PIECES.items():
        source = source.replace(f"<{name_}>\n", piece)
    path.write_text(HEAD + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"toy_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = path.read_text().splitlines()
    torch._dynamo.reset()
    with _listening_to_breaks() as handler:
        torch.compile(module.entry, backend="eager")(torch.randn(4))
    out = []
    for text, _ in handler.records:
        raw = parse_break(text)
        if raw is None:
            continue
        mine = [(f, n) for f, n, _ in raw.frames if f == str(path)]
        where = raw.line if raw.file == str(path) else (mine[-1][1] if mine else 0)
        stack = ",".join(str(n) for _, n in mine)
        out.append(
            f"{where:4d} {raw.gb_id or '------'} [{stack}] {lines[where - 1].strip() if where else raw.file}"
        )
    return out


def main(names: list[str], toys: dict[str, str] | None = None) -> None:
    """Run the named toys (all when none is named) of `toys` (this file's by default) and print their breaks."""
    toys = TOYS if toys is None else toys
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(toys):
            for row in run(name, toys[name], Path(tmp)) or ["   - no break"]:
                print(f"{name:28s} {row}")


if __name__ == "__main__":
    main(sys.argv[1:])
