"""numpy applied to Python numbers inside traced code, and the standard-library call that replaces it.

dynamo traces numpy through `torch._numpy`: `np.lcm(config.a, config.b)` is not a number to it
but a 0-d tensor, so `if length % np.lcm(...) != 0:` branches on a tensor value (gb0170) and
`np.random.uniform(0, 1)` is a data-dependent operator (gb0033): the graph ends there. On
Python numbers, `math` and `random` compute the same values as plain Python objects, which
dynamo folds into constants. Measured with torch 2.13: reformer's
`_get_least_common_mult_chunk_len` (`np.lcm`) costs three break sites, vits' LayerDrop draw
(`np.random.uniform`) one; the rewritten calls none.

`np.sum(counts)` in the shape of `np.zeros(...)` is the same kind of 0-d tensor to dynamo, and
a tensor as a size is a data-dependent operator (gb0033, big_bird's random-attention plan);
the builtin `sum` of the same numbers is a Python int, which dynamo folds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import TENSORS, FunctionFlow
from fuselint.source.module import SourceFile


@dataclass(frozen=True)
class Replacement:
    module: str  # the standard-library module the new call needs
    call: str  # its spelling, `{args}` standing for the arguments
    arity: tuple[int, ...]  # the numbers of positional arguments it accepts
    assumption: str  # what the unsafe fix assumes


_INTS = "the arguments are Python ints and the result is used as a number (an `int`, no longer `numpy.int64`)"
_DRAW = "the draw may come from Python's `random` stream instead of numpy's: same distribution, other numbers"
REPLACEMENTS = {
    "numpy.lcm": Replacement("math", "math.lcm({args})", (2,), _INTS),
    "numpy.gcd": Replacement("math", "math.gcd({args})", (2,), _INTS),
    "numpy.random.uniform": Replacement("random", "random.uniform({args})", (0, 2), _DRAW),
    "numpy.random.random": Replacement("random", "random.random()", (0,), _DRAW),
    "numpy.random.rand": Replacement("random", "random.random()", (0,), _DRAW),
}


def _free(sf: SourceFile, module: str) -> bool:
    """`module` names that module in this file, or nothing yet (so `import module` can bind it)."""
    bound = sf.imports.aliases.get(module)
    return bound is None or bound == module


def numpy_on_numbers(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """FL101 findings for numpy calls on Python numbers, each with its standard-library fix."""
    for site in flow.of(ast.Call):
        call = site.node
        qual = sf.imports.qualname(call.func)
        swap = REPLACEMENTS.get(qual or "")
        if swap is None or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        if len(call.args) not in swap.arity or not all(flow.host_number(a, site.env) for a in call.args):
            continue
        short = sf.segment(call.func)
        message = (
            f"`{short}(...)` on Python numbers makes a numpy value that dynamo traces as a tensor; "
            f"a branch, a size or a draw on it breaks the graph; use `{swap.module}`, whose result is a Python number"
        )
        fix = None
        if _free(sf, swap.module):
            args = ", ".join(sf.segment(a) for a in call.args) or "0.0, 1.0"
            text = swap.call.format(args=args)
            fix = Fix(
                Applicability.UNSAFE,
                f"use `{text.split('(')[0]}` (assumes {swap.assumption})",
                (sf.replace(call, text),),
                (f"import {swap.module}",),
            )
        yield finding(sf, rule, call, message, fix, path=site.path)


# numpy constructors whose first argument (or `shape=`) is a shape: a dimension there is a
# number, so a reduction giving it was a sum of counts.
_SHAPED = frozenset({"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full"})
_SUM_ASSUMES = (
    "the argument is a flat sequence of Python ints: the dimension is an `int`, no longer `numpy.int64`"
)


def _dimensions(call: ast.Call) -> list[ast.expr]:
    shape = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "shape"), None)
    return list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else []


def numpy_sum_as_size(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """FL101 findings for `np.sum(seq)` as a dimension of a numpy array, with the builtin `sum` as fix."""
    shadowed = "sum" in sf.imports.aliases or "sum" in flow.assigned
    for site in flow.of(ast.Call):
        if sf.imports.qualname(site.node.func) not in _SHAPED:
            continue
        for dim in _dimensions(site.node):
            if not (isinstance(dim, ast.Call) and sf.imports.qualname(dim.func) == "numpy.sum"):
                continue
            if len(dim.args) != 1 or dim.keywords or isinstance(dim.args[0], ast.Starred):
                continue
            if flow.kind(dim.args[0], site.env) in TENSORS:
                continue  # a tensor: the numpy-on-tensor finding says so
            short = sf.segment(dim.func)
            message = (
                f"`{short}(...)` as an array dimension is a numpy value that dynamo traces as a tensor; "
                "a tensor as a size is a data-dependent operator and breaks the graph; "
                "use the builtin `sum`, whose result is a Python int"
            )
            fix = None
            if not shadowed:
                fix = Fix(
                    Applicability.UNSAFE,
                    f"use the builtin `sum` (assumes {_SUM_ASSUMES})",
                    (sf.replace(dim, f"sum({sf.segment(dim.args[0])})"),),
                )
            yield finding(sf, rule, dim, message, fix, path=site.path)
