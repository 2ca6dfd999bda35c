"""Proof by evaluation: every pattern rule's pattern and replacement compute the same function.

For each alternative of each `kind = "pattern"` rule, the metavariables are bound to
random inputs drawn from their declared kinds (tensors of the declared symbolic shapes
and domains, dims from `values`, eps-like scalars), both templates are evaluated with
torch, and the results must agree: same dtype and shape, relative error below 1e-9 in
float64 and 1e-4 in float32. A rule whose two sides disagree fails here, never in a
user's model. Several shapes and seeds per alternative; the whole file runs in seconds.
"""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest

torch = pytest.importorskip("torch")

from fuselint.catalog import load_catalog  # noqa: E402
from fuselint.source.patterns import compile_rule  # noqa: E402

CATALOG = load_catalog()
RULES = [r for r in CATALOG if r.kind == "pattern"]
METAVAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}
SEEDS = 3


def _spec(rule, name: str) -> dict:
    raw = rule.pattern.get("vars", {}).get(name, "tensor")
    return {"kind": raw} if isinstance(raw, str) else dict(raw)


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


def _tensor(spec: dict, shape, dtype) -> torch.Tensor:
    domain = spec.get("domain", "real")
    if domain == "positive":
        return torch.rand(shape, dtype=dtype) * 3 + 0.1
    if domain == "unit":  # (-1, 1): log(1 + x) and friends
        return torch.rand(shape, dtype=dtype) * 1.8 - 0.9
    return torch.randn(shape, dtype=dtype) * 3


def _expand(template: str, lists: dict[str, list[dict[str, str]]], rule, field: str) -> str:
    """Write list metavariables out as Python lists of their per-element templates."""

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in lists:
            return "__mv_" + name
        element = _spec(rule, name)[field]
        parts = [
            METAVAR.sub(lambda e, env=env: env.get(e.group(1), "__mv_" + e.group(1)), element)
            for env in lists[name]
        ]
        return "[" + ", ".join(parts) + "]"

    return METAVAR.sub(one, template)


def _bindings(rule, names: set[str], dtype, seed: int):
    """Every combination of the dims' values, each with fresh random tensors."""
    random.seed(seed)
    torch.manual_seed(seed)
    sizes: dict[str, int] = {}
    batch = tuple(random.randint(2, 5) for _ in range(random.randint(2, 3)))
    choices: dict[str, list] = {}
    for name in sorted(names):
        spec = _spec(rule, name)
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
            spec = _spec(rule, name)
            kind = spec.get("kind", "tensor")
            if kind in ("tensor", "name", "any"):
                # A rule about dtype handling pins its input's dtype (e.g. bfloat16 upcast to float32).
                own = getattr(torch, spec["dtype"]) if "dtype" in spec else dtype
                env[name] = _tensor(spec, _shape(spec, sizes, batch), own)
            elif kind == "list":
                local = set(METAVAR.findall(spec["each"])) - names - set(rule.pattern.get("vars", {}))
                lists[name] = []
                for i in range(random.randint(2, 4)):
                    element = {}
                    for var in local:
                        env[f"{var}_{i}"] = _tensor(spec, _shape(spec, sizes, batch), dtype)
                        element[var] = f"__mv_{var}_{i}"
                    lists[name].append(element)
            elif kind == "dtype":
                env[name] = dtype
        yield env, lists


def _evaluate(text: str, env: dict[str, object]):
    namespace = {"torch": torch, "F": torch.nn.functional, "nn": torch.nn, "math": math}
    namespace.update({"__mv_" + k: v for k, v in env.items()})
    return eval(text, namespace)  # noqa: S307 - templates from our own rule files


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = want.abs().max().item() if want.numel() else 1.0
    return (got - want).abs().max().item() / max(scale, 1e-30) if want.numel() else 0.0


def _cases():
    for rule in RULES:
        for i, _ in enumerate(compile_rule(rule).patterns):
            yield pytest.param(rule, i, id=f"{rule.code}-alt{i}")


@pytest.mark.parametrize("rule,alternative", list(_cases()))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_pattern_and_replacement_agree(rule, alternative, dtype):
    pattern = compile_rule(rule).patterns[alternative]
    names = set(METAVAR.findall(pattern.text)) | set(METAVAR.findall(pattern.replace))
    checked = 0
    for seed in range(SEEDS):
        for env, lists in _bindings(rule, names, dtype, seed):
            want_text = _expand(pattern.text, lists, rule, "each")
            got_text = _expand(pattern.replace, lists, rule, "render")
            want = _evaluate(want_text, env)
            got = _evaluate(got_text, env)
            assert got.shape == want.shape, (rule.code, want_text, got_text)
            assert got.dtype == want.dtype, (rule.code, want_text, got_text)
            assert torch.isfinite(want).all(), f"{rule.code}: inputs outside the pattern's domain"
            error = _relative_error(got.double(), want.double())
            assert error < TOLERANCE[want.dtype], f"{rule.code} alt {alternative}: relative error {error:.3g}"
            checked += 1
    assert checked >= SEEDS


def test_a_wrong_replacement_is_caught():
    """The check has teeth: a quick-GELU 'replacement' for the erf GELU disagrees."""
    x = torch.randn(4, 5, dtype=torch.float64)
    exact = _evaluate("0.5 * __mv_x * (1.0 + torch.erf(__mv_x / math.sqrt(2.0)))", {"x": x})
    quick = _evaluate("__mv_x * torch.sigmoid(1.702 * __mv_x)", {"x": x})
    assert _relative_error(quick, exact) > 1e-3
