"""Proof by evaluation: a pattern rule's pattern and replacement compute the same function.

Every alternative of a `kind = "pattern"` rule is evaluated with torch on random inputs
drawn from the metavariables' declared kinds, once as written in `match` and once as
written in `replace`; the two results must agree in shape, dtype and value (relative
error below 1e-9 in float64, 1e-4 in float32). A rule whose fix is `safe` claims more: the
same output for every input, so its two sides must be bit-equal, in float64, float32 and
bfloat16 (a library op that rounds once where the hand-written form rounds each step is an
`unsafe` fix, its assumption stated). The suite runs this for every built-in rule and
`fuselint rule --test` runs it for a user's rule, so a rule whose two sides disagree fails
before it reaches anyone's model.

How inputs are drawn, from `[pattern.vars]` (a bare string is the kind alone):

| key      | meaning |
|----------|---------|
| `kind`   | `tensor` (default; also `name`, `any`), `dim`, `int`, `const`, `scalar`, `dtype`, `list` |
| `shape`  | tensor shape as space-separated tokens: `...` a random batch of 2–3 dims, a number a fixed size, a name a size shared by every var that uses the same name (`"... n"`) |
| `domain` | `real` (default, normal × 3), `positive` (0.1 to 3.1), `unit` (-0.9 to 0.9) |
| `dtype`  | pin a tensor's dtype (`"bfloat16"`), for rules about upcasts |
| `values` | the values a `dim`/`int`/`const`/`scalar` takes; every combination is checked |
| `last`   | for `dim`: only the last dim (`-1`) |
| `value`  | for `int`/`const`: the one value |
| `each`/`render` | for `list`: the element's pattern and its replacement form, with the element's own metavariables |

torch is imported only when a proof runs: `fuselint check` never needs it.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fuselint.catalog import Rule

METAVAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
SEEDS = 3
DOMAINS = ("real", "positive", "unit")


class ProofError(Exception):
    """A rule whose inputs cannot be drawn (bad `[pattern.vars]`); the message says which."""


@dataclass(frozen=True)
class Proof:
    """The outcome of evaluating one alternative of a rule in one dtype."""

    code: str
    alternative: int
    dtype: str
    checked: int
    error: str = ""  # empty when pattern and replacement agree

    @property
    def ok(self) -> bool:
        return not self.error


def var_spec(rule: Rule, name: str) -> dict:
    raw = rule.pattern.get("vars", {}).get(name, "tensor")
    spec = {"kind": raw} if isinstance(raw, str) else dict(raw)
    if spec.get("domain", "real") not in DOMAINS:
        raise ProofError(f"{rule.code}: ${name}: domain must be one of {', '.join(DOMAINS)}")
    return spec


def _shape(spec: dict, sizes: dict[str, int], batch: tuple[int, ...]) -> tuple[int, ...]:
    shape: list[int] = []
    for token in spec.get("shape", "...").split():
        if token == "...":
            shape.extend(batch)
        elif token.isdigit():
            shape.append(int(token))
        else:
            shape.append(sizes.setdefault(token, random.randint(2, 6)))
    return tuple(shape)


def _tensor(torch: Any, spec: dict, shape: tuple[int, ...], dtype: Any) -> Any:
    domain = spec.get("domain", "real")
    if domain == "positive":
        return torch.rand(shape, dtype=dtype) * 3 + 0.1
    if domain == "unit":  # (-1, 1): log(1 + x) and friends
        return torch.rand(shape, dtype=dtype) * 1.8 - 0.9
    return torch.randn(shape, dtype=dtype) * 3


def expand(template: str, lists: dict[str, list[dict[str, str]]], rule: Rule, field: str) -> str:
    """Write list metavariables out as Python lists of their per-element templates."""

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in lists:
            return "__mv_" + name
        element = var_spec(rule, name)[field]
        parts = [
            METAVAR.sub(lambda e, env=env: env.get(e.group(1), "__mv_" + e.group(1)), element)
            for env in lists[name]
        ]
        return "[" + ", ".join(parts) + "]"

    return METAVAR.sub(one, template)


def bindings(rule: Rule, names: set[str], dtype: Any, seed: int) -> Iterator[tuple[dict, dict]]:
    """Every combination of the non-tensor vars' values, each with fresh random tensors."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    sizes: dict[str, int] = {}
    batch = tuple(random.randint(2, 5) for _ in range(random.randint(2, 3)))
    choices: dict[str, list] = {}
    for name in sorted(names):
        spec = var_spec(rule, name)
        kind = spec.get("kind", "tensor")
        if kind == "dim":
            choices[name] = spec.get("values", [-1] if spec.get("last") else [-1, 0, 1])
        elif kind in ("const", "int"):
            choices[name] = spec.get("values", [spec["value"]] if "value" in spec else [2])
        elif kind == "scalar":
            choices[name] = spec.get("values", [1e-5, 1e-2])
    keys = sorted(choices)
    for combo in itertools.product(*(choices[k] for k in keys)):
        env: dict[str, object] = dict(zip(keys, combo, strict=True))
        lists: dict[str, list[dict[str, str]]] = {}
        for name in sorted(names):
            spec = var_spec(rule, name)
            kind = spec.get("kind", "tensor")
            if kind in ("tensor", "name", "any"):
                own = getattr(torch, spec["dtype"]) if "dtype" in spec else dtype
                env[name] = _tensor(torch, spec, _shape(spec, sizes, batch), own)
            elif kind == "list":
                if "each" not in spec or "render" not in spec:
                    raise ProofError(f"{rule.code}: ${name}: a list var needs `each` and `render`")
                local = set(METAVAR.findall(spec["each"])) - names - set(rule.pattern.get("vars", {}))
                lists[name] = []
                for i in range(random.randint(2, 4)):
                    element = {}
                    for var in sorted(local):
                        env[f"{var}_{i}"] = _tensor(torch, spec, _shape(spec, sizes, batch), dtype)
                        element[var] = f"__mv_{var}_{i}"
                    lists[name].append(element)
            elif kind == "dtype":
                env[name] = dtype
        yield env, lists


def evaluate(text: str, env: dict[str, object]) -> Any:
    import torch

    namespace = {"torch": torch, "F": torch.nn.functional, "nn": torch.nn, "math": math}
    namespace.update({"__mv_" + k: v for k, v in env.items()})
    return eval(text, namespace)  # noqa: S307 - templates from rule files the user chose to load


def relative_error(got: Any, want: Any) -> float:
    if not want.numel():
        return 0.0
    scale = want.abs().max().item()
    return (got - want).abs().max().item() / max(scale, 1e-30)


def tolerance(dtype: Any) -> float:
    import torch

    return {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]


def prove_alternative(
    rule: Rule, match: str, replace: str, alternative: int, dtype: Any, exact: bool = False
) -> Proof:
    """Evaluate one `match`/`replace` pair on SEEDS draws of every var combination; `exact`: the
    two must be bit-equal."""
    names = set(METAVAR.findall(match)) | set(METAVAR.findall(replace))
    label = str(dtype).removeprefix("torch.")
    checked = 0
    try:
        for seed in range(SEEDS):
            for env, lists in bindings(rule, names, dtype, seed):
                want_text = expand(match, lists, rule, "each")
                got_text = expand(replace, lists, rule, "render")
                want, got = evaluate(want_text, env), evaluate(got_text, env)
                problem = _disagreement(want, got, exact)
                if problem:
                    return Proof(
                        rule.code, alternative, label, checked, f"{problem}: {want_text} vs {got_text}"
                    )
                checked += 1
    except ProofError:
        raise
    except Exception as exc:  # a template that does not evaluate is a broken rule, not a crash
        return Proof(rule.code, alternative, label, checked, f"cannot evaluate: {type(exc).__name__}: {exc}")
    return Proof(rule.code, alternative, label, checked)


def _disagreement(want: Any, got: Any, exact: bool = False) -> str:
    import torch

    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        return "both sides must evaluate to tensors"
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if not want.is_floating_point():  # comparisons, integer results: exactly equal
        return "" if torch.equal(got, want) else "values differ"
    if not torch.isfinite(want).all():
        return "the pattern is not finite on the drawn inputs (declare a `domain`)"
    if not torch.isfinite(got).all():  # NaN would compare as no error at all
        return "the replacement is not finite where the pattern is"
    if exact and not torch.equal(got, want):
        error = relative_error(got.double(), want.double())
        return f"not bit-equal, as a safe fix must be (relative error {error:.3g})"
    # `equal` holds -0.0 equal to 0.0, whose bits differ (`1 / y` is -inf against inf)
    if exact and got.is_floating_point() and not torch.equal(torch.signbit(got), torch.signbit(want)):
        return "not bit-equal, as a safe fix must be (the sign of a zero differs)"
    error = relative_error(got.double(), want.double())
    if not error < tolerance(want.dtype):
        return f"relative error {error:.3g}"
    return ""


def alternatives(rule: Rule) -> list[tuple[str, str]]:
    """The rule's (match, replace) pairs, as `compile_rule` reads them."""
    table = rule.pattern
    matches = [table["match"]] if isinstance(table["match"], str) else list(table["match"])
    replaces = table["replace"]
    if isinstance(replaces, str):
        replaces = [replaces] * len(matches)
    return list(zip(matches, replaces, strict=True))


def prove(rule: Rule) -> list[Proof]:
    """Every alternative of a pattern rule, in float64 and float32; a safe rule's bit-equal, and in
    bfloat16 too."""
    import torch

    safe = rule.fix == "safe"
    dtypes = (torch.float64, torch.float32, torch.bfloat16) if safe else (torch.float64, torch.float32)
    return [
        prove_alternative(rule, match, replace, i, dtype, exact=safe)
        for i, (match, replace) in enumerate(alternatives(rule))
        for dtype in dtypes
    ]
