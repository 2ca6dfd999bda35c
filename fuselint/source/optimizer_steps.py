"""An optimizer's update inside compiled code: the training step's own graph breaks.

Checked against dynamo (torch 2.13, backend eager, one compiled function that does
`opt.zero_grad(); loss = model(x).sum(); loss.backward(); opt.step()`):
- `opt.step()` breaks (gb0025) for every optimizer of `torch.optim` whose step is wrapped by
  `_use_grad_for_differentiable` (SGD, Adam, AdamW, RMSprop, Adagrad, ...): the wrapper calls
  `torch._dynamo.graph_break()` before and after the update, on purpose (pytorch#104053).
  stable-baselines3's `PPO.train`, `A2C.train`, `SAC.train`, `TD3.train`, `DQN.train` each break
  there (`self.policy.optimizer.step()`).
- `opt.zero_grad()` breaks: `Optimizer.zero_grad` is marked `torch._disable_dynamo` ("Attempted to
  inline function marked as skipped"); `module.zero_grad()` traces.
- an lr scheduler's `step()` breaks the same way (skipped); `clip_grad_norm_` traces.
- `loss.backward()` breaks ("Unsupported Tensor.backward() call"): it is not traced either.

An object is an optimizer (or an lr scheduler) when the function or its class builds it from
`torch.optim` (`self.opt = torch.optim.Adam(...)`), or when its name says so (`optimizer`,
`self.policy.optimizer`, `critic_opt`, `lr_scheduler`): a class held in an attribute
(`self.optimizer_class(...)`, stable-baselines3) or built by a helper cannot be followed.
`.step()` with arguments is another object's step (a diffusers scheduler's `step(out, t, x)`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from fuselint.catalog import Rule
from fuselint.findings import Finding
from fuselint.source.checks._shared import finding
from fuselint.source.dataflow import TENSORS, FunctionFlow
from fuselint.source.module import SourceFile
from fuselint.source.nodes import last_name, walk

OPTIMIZER = "optimizer"
SCHEDULER = "lr scheduler"

_OPTIMIZER_NAMES = ("optimizer", "optimiser", "optim", "opt")
_SCHEDULER_NAMES = ("lr_scheduler", "lr_sched", "scheduler_lr")

_STEP_BREAKS = (
    "torch's optimizer step calls `torch._dynamo.graph_break()` before and after the update (gb0025)"
)
_ZERO_SKIPPED = "`Optimizer.zero_grad` is marked `torch._disable_dynamo`, so dynamo skips it and breaks"
_WHY = {
    (OPTIMIZER, "step"): _STEP_BREAKS,
    (OPTIMIZER, "zero_grad"): _ZERO_SKIPPED,
    (SCHEDULER, "step"): "dynamo skips an lr scheduler's `step` and breaks the graph",
}


def _named(name: str) -> str | None:
    """The kind a name says: `optimizer`, `critic_opt`, `ent_coef_optimizer` -> optimizer;
    `lr_scheduler` -> lr scheduler."""
    low = name.lower()
    if any(low == n or low.endswith("_" + n) for n in _SCHEDULER_NAMES):
        return SCHEDULER
    if any(low == n or low.endswith("_" + n) or low.endswith(n) and n != "opt" for n in _OPTIMIZER_NAMES):
        return OPTIMIZER
    return None


def _built(qual: str | None) -> str | None:
    """`torch.optim.Adam` -> optimizer, `torch.optim.lr_scheduler.StepLR` -> lr scheduler."""
    if qual is None or not qual.startswith("torch.optim."):
        return None
    name = qual.rpartition(".")[2]
    if not name[:1].isupper():
        return None
    return SCHEDULER if ".lr_scheduler." in qual else OPTIMIZER


def built_optimizers(flow: FunctionFlow, imports) -> dict[str, str]:
    """Local names and `self.X` (as "self.X") the function or its class binds to a `torch.optim`
    object -> its kind."""
    found: dict[str, str] = {}
    scopes = [flow.fn.node] + ([flow.fn.cls] if flow.fn.cls is not None else [])
    for scope in scopes:
        for node in walk(scope):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            kind = _built(imports.qualname(node.value.func))
            if kind is None:
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and scope is flow.fn.node:
                    found[target.id] = kind
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        found[f"self.{target.attr}"] = kind
    return found


def _receiver_kind(receiver: ast.expr, built: dict[str, str]) -> str | None:
    if isinstance(receiver, ast.Name) and receiver.id in built:
        return built[receiver.id]
    if isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name):
        key = f"{receiver.value.id}.{receiver.attr}"
        if key in built:
            return built[key]
    name = last_name(receiver)
    return _named(name) if name is not None else None


def _plain(call: ast.Call, allowed: set[str]) -> bool:
    """No positional argument beyond one, and keywords only among `allowed`."""
    return len(call.args) <= 1 and all(k.arg in allowed for k in call.keywords)


def optimizer_updates(sf: SourceFile, flow: FunctionFlow, rule: Rule) -> Iterable[Finding]:
    """FL108 findings for an optimizer's `step`/`zero_grad`, an lr scheduler's `step` and
    `loss.backward()` in compiled code."""
    built = built_optimizers(flow, sf.imports)
    for site in flow.of(ast.Call):
        call, func = site.node, site.node.func
        if not isinstance(func, ast.Attribute) or sf.imports.qualname(func) is not None:
            continue
        if func.attr == "backward":
            if not call.args and not call.keywords and flow.kind(func.value, site.env) in TENSORS:
                message = (
                    f"`{sf.segment(call)}` in compiled code: dynamo does not trace the backward pass "
                    "and breaks the graph here; compile the forward and the loss, and call "
                    "`backward()` and the optimizer outside"
                )
                yield finding(sf, rule, call, message, path=site.path)
            continue
        kind = _receiver_kind(func.value, built)
        if kind is None or (kind, func.attr) not in _WHY:
            continue
        if func.attr == "step" and not _plain(call, {"closure"} if kind == OPTIMIZER else {"epoch"}):
            continue
        if func.attr == "zero_grad" and not _plain(call, {"set_to_none"}):
            continue
        message = (
            f"`{sf.segment(call)}` of an {kind} in compiled code: {_WHY[kind, func.attr]}; compile the "
            "forward and the loss, and run the update outside the compiled function"
        )
        yield finding(sf, rule, call, message, path=site.path)
