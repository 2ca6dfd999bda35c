"""FL401: a dtype round trip, two casts in a row where the first does nothing useful.

`x.float().half()` or `x.to(torch.float32).to(torch.bfloat16)` launches two kernels and
writes an intermediate copy of the tensor at the wider dtype (eager pays both; a graph
break between them keeps both). Casting straight to the final dtype gives the same values
(a cast to float32 first never rounds a float16/bfloat16 input) in one pass. A cast to a
narrower dtype followed by one to a wider dtype (`x.half().float()`) rounds on purpose and
is not flagged.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.checks import check
from fuselint.source.checks._shared import atom, finding
from fuselint.source.dataflow import flows
from fuselint.source.edits import applicability
from fuselint.source.module import SourceFile
from fuselint.source.scope import ModelFunction

_METHOD_DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64"}
_TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "float64": "float64", "double": "float64",
}  # fmt: skip
_WIDTH = {"float64": 3, "float32": 2, "float16": 1, "bfloat16": 1}


def _cast(call: ast.AST, sf: SourceFile) -> str | None:
    """The floating dtype a pure cast call converts to (`.float()`, `.to(torch.half)`), else None."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    method = call.func.attr
    if method in _METHOD_DTYPES:
        return _METHOD_DTYPES[method] if not call.args and not call.keywords else None
    if method not in ("to", "type"):
        return None
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "dtype")]
    if len(args) != 1 or any(k.arg not in ("dtype",) for k in call.keywords):
        return None  # a device, non_blocking or copy argument: not a pure cast
    qual = sf.imports.qualname(args[0]) or ""
    if not qual.startswith("torch."):
        return None
    return _TORCH_DTYPES.get(qual[len("torch.") :])


def _fix(sf: SourceFile, outer: ast.Call, first: str, second: str) -> Fix | None:
    inner = outer.func.value
    receiver = inner.func.value
    if first == second:  # the second cast returns its input unchanged
        edit = sf.replace(outer, sf.segment(inner))
        return Fix(applicability(sf.text, [edit], "safe"), "drop the repeated cast", (edit,))
    if first == "float32" and second in ("float16", "bfloat16"):
        arguments = sf.segment(outer)[len(sf.segment(outer.func)) :]
        text = f"{atom(sf, receiver)}.{outer.func.attr}{arguments}"
        return Fix(Applicability.UNSAFE, "cast straight to the final dtype", (sf.replace(outer, text),))
    return None


@check("FL401")
def dtype_round_trip(sf: SourceFile, functions: list[ModelFunction], rule: Rule) -> Iterable[Finding]:
    for flow in flows(functions, sf.imports):
        for site in flow.of(ast.Call):
            outer = site.node
            second = _cast(outer, sf)
            if second is None:
                continue
            first = _cast(outer.func.value, sf)
            if first is None or _WIDTH[first] < _WIDTH[second]:
                continue
            what = f"casts to {first} then to {second}"
            yield finding(
                sf,
                rule,
                outer,
                f"`{sf.segment(outer)}` {what}: {rule.message}",
                _fix(sf, outer, first, second),
            )
