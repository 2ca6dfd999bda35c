"""FL108: a buffer made with `nn.Buffer(...)` and rebound to its own `.to(...)` in traced code, and its fix.

Checked with dynamo (torch 2.13, `bench/buffer_rebind_probe.py`): where `__init__` made the buffer
with `self.pos = nn.Buffer(t, persistent=...)`, `self.pos = self.pos.to(device=x.device,
dtype=x.dtype)` in forward (transformers' CTRL) ends the graph (gb4841, "Unsupported python_type()
call") when the cast changes nothing (the input's dtype and device already the buffer's: `.to`
returns the buffer itself), the usual case once the model sits where its inputs are: 2 graphs for
every `.to` form and both persistences. A cast that changes the dtype, a value from a helper
(`self.pe = self.extend_pe(x, self.pe)`, wav2vec2-conformer), arithmetic and a fresh tensor rebind
without a break, and are not flagged. The same buffer registered with
`self.register_buffer("pos", t, persistent=...)` and rebound by the same `.to` traces in one graph.

The fix registers it so: `self.register_buffer("pos", (t).detach(), persistent=...)`. The module
holds the same buffer (its name, values, persistence in the state dict, moves with `.to()`), and
forward rebinds it as before. Unsafe: `nn.Buffer` keeps `t`'s `requires_grad` on the detached
tensor, the fix does not (assumes `t` does not require grad), and the tensor no longer carries
`nn.Buffer`'s `persistent` attribute.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Applicability, Finding, Fix
from fuselint.source.break_fixes import whole_lines
from fuselint.source.checks._shared import finding, has_comment
from fuselint.source.dataflow import FunctionFlow
from fuselint.source.module import SourceFile
from fuselint.source.nodes import self_attribute, walk

_BUFFER = ("torch.nn.Buffer", "torch.nn.parameter.Buffer")
REGISTER_MESSAGE = (
    "register the buffer with `self.register_buffer(...)` instead of `nn.Buffer(...)`: rebinding it then "
    "traces (assumes its data does not require grad: `nn.Buffer` kept that flag, the fix detaches it)"
)


def _stores(stmt: ast.stmt) -> list[str]:
    """The `self` attributes an assignment statement binds."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    return [name for t in targets if (name := self_attribute(t)) is not None]


def _makes_buffer(sf: SourceFile, stmt: ast.AST) -> str | None:
    """X of `self.X = nn.Buffer(...)`."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.value, ast.Call)
        and sf.imports.qualname(stmt.value.func) in _BUFFER
    ):
        return self_attribute(stmt.targets[0])
    return None


def made_buffers(sf: SourceFile, cls: ast.ClassDef) -> dict[str, ast.Assign]:
    """`self.X = nn.Buffer(...)` statements of the class's `__init__`, by X (the first of each)."""
    found: dict[str, ast.Assign] = {}
    for method in cls.body:
        if isinstance(method, ast.FunctionDef) and method.name == "__init__":
            for stmt in walk(method):
                if (name := _makes_buffer(sf, stmt)) is not None:
                    found.setdefault(name, stmt)
    return found


def _register_fix(sf: SourceFile, made: ast.Assign, cls: ast.ClassDef) -> Fix | None:
    """`self.X = nn.Buffer(t, persistent=p)` -> `self.register_buffer("X", (t).detach(), persistent=p)`,
    where it is X's only binding in its method and stands on its own lines."""
    call = made.value
    if len(call.args) != 1 or isinstance(call.args[0], ast.Starred):
        return None
    if any(k.arg != "persistent" for k in call.keywords):
        return None
    if not whole_lines(sf, made) or has_comment(sf, made):
        return None
    name = self_attribute(made.targets[0])
    method = next(m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__")
    if sum(name in _stores(s) for s in walk(method) if isinstance(s, ast.Assign)) != 1:
        return None  # another binding first would make register_buffer's name taken
    data = call.args[0]
    text = sf.segment(data)
    detached = (
        f"{text}.detach()" if isinstance(data, (ast.Name, ast.Attribute, ast.Call)) else f"({text}).detach()"
    )
    keywords = "".join(f", {k.arg}={sf.segment(k.value)}" for k in call.keywords)
    content = f'self.register_buffer("{name}", {detached}{keywords})'
    return Fix(Applicability.UNSAFE, REGISTER_MESSAGE, (sf.replace(made, content),))


def buffer_rebinds(
    sf: SourceFile, flow: FunctionFlow, made: dict[str, ast.Assign], rule: Rule
) -> Iterable[Finding]:
    """`self.X = self.X.to(...)` where the class's `__init__` made X with `nn.Buffer`, in a traced
    method but `__init__`."""
    if flow.fn.cls is None or flow.fn.node.name == "__init__" or not made:
        return
    for site in flow.of(ast.Assign):
        value = site.node.value
        if not (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to"
        ):
            continue
        for target in site.node.targets:
            name = self_attribute(target)
            if name not in made or self_attribute(value.func.value) != name:
                continue
            message = (
                f"rebinding `self.{name}`, a buffer made with `nn.Buffer(...)`, in `{flow.fn.node.name}` "
                "ends the graph (gb4841); a buffer registered with `register_buffer` rebinds in the graph"
            )
            fix = _register_fix(sf, made[name], flow.fn.cls)
            yield finding(sf, rule, target, message, fix, path=site.path)
