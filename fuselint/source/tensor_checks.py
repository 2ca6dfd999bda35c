"""FL101's fix for torch's tensor check, `torch._check_tensor_all(cond)`.

Dynamo (torch 2.13) breaks inside it (gb0124): it reads `cond` with `.item()`. Transformers calls it
from `torch_compilable_check` while tracing, meant as a hint to the compiler, and D-FINE and DEIMv2
break there 9 times a call. `torch._assert_async(torch.all(cond))` checks the same thing on the
device and stays in the graph:

    torch._assert_async(torch.all(valid))     # was: torch._check_tensor_all(valid)

No output changes: a check computes nothing the code reads. Unsafe: a condition that fails raises
later and elsewhere (on CUDA a device-side assert, which ends the process's use of the GPU) instead
of a RuntimeError at the call, and a condition that is not boolean is tested for nonzero instead of
rejected. Only the one-argument form, spelled through a module (`torch._check_tensor_all`), so that
the fix can spell `_assert_async` the same way; a message is a callable, which `_assert_async`
cannot take.
"""

from __future__ import annotations

import ast

from fuselint.findings import Applicability, Fix
from fuselint.source.module import SourceFile

TENSOR_CHECK_MESSAGE = (
    "check on the device with `_assert_async(all(cond))`, which stays in the graph (assumes the "
    "condition holds: a false one raises later, on CUDA as a device-side assert, instead of a "
    "RuntimeError at the call; and that it is boolean, since any nonzero value passes)"
)


def tensor_check_fix(sf: SourceFile, call: ast.Call) -> Fix | None:
    """The fix for `torch._check_tensor_all(cond)` (module docstring), else None."""
    func = call.func
    if not isinstance(func, ast.Attribute) or sf.imports.qualname(func) != "torch._check_tensor_all":
        return None
    if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return None
    module = sf.segment(func.value)
    text = f"{module}._assert_async({module}.all({sf.segment(call.args[0])}))"
    return Fix(Applicability.UNSAFE, TENSOR_CHECK_MESSAGE, (sf.replace(call, text),))
