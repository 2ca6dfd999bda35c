"""Proof by evaluation: every pattern rule's pattern and replacement compute the same function.

The proof itself lives in `fuselint.source.pattern_proof` (so `fuselint rule --test` runs the
same one on a user's rule); here it runs for every alternative of every built-in pattern rule,
in float64 and float32, and a deliberately wrong rule shows it has teeth.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from fuselint.catalog import load_catalog  # noqa: E402
from fuselint.source.pattern_proof import (  # noqa: E402
    ProofError,
    alternatives,
    evaluate,
    prove_alternative,
    relative_error,
)

CATALOG = load_catalog()
RULES = [r for r in CATALOG if r.kind == "pattern"]


def _cases():
    for rule in RULES:
        for i, _ in enumerate(alternatives(rule)):
            yield pytest.param(rule, i, id=f"{rule.code}-alt{i}")


@pytest.mark.parametrize("rule,alternative", list(_cases()))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_pattern_and_replacement_agree(rule, alternative, dtype):
    match, replace = alternatives(rule)[alternative]
    proof = prove_alternative(rule, match, replace, alternative, dtype)
    assert proof.ok, proof.error
    assert proof.checked >= 3


def test_a_wrong_replacement_is_caught():
    """The check has teeth: a quick-GELU 'replacement' for the erf GELU disagrees."""
    x = torch.randn(4, 5, dtype=torch.float64)
    exact = evaluate("0.5 * __mv_x * (1.0 + torch.erf(__mv_x / math.sqrt(2.0)))", {"x": x})
    quick = evaluate("__mv_x * torch.sigmoid(1.702 * __mv_x)", {"x": x})
    assert relative_error(quick, exact) > 1e-3


def test_a_wrong_rule_fails_its_proof():
    rule = dataclasses.replace(
        CATALOG["FL211"], pattern={"match": "torch.log(1 + $x)", "replace": "torch.log($x)"}
    )
    proof = prove_alternative(rule, "torch.log(1 + $x)", "torch.log($x)", 0, torch.float64)
    assert not proof.ok
    assert "relative error" in proof.error or "not finite" in proof.error


def test_an_unknown_domain_is_named():
    rule = dataclasses.replace(
        CATALOG["FL211"],
        pattern={
            "match": "torch.log(1 + $x)",
            "replace": "torch.log1p($x)",
            "vars": {"x": {"domain": "tiny"}},
        },
    )
    with pytest.raises(ProofError, match="domain"):
        prove_alternative(rule, "torch.log(1 + $x)", "torch.log1p($x)", 0, torch.float64)


def test_a_safe_rule_must_be_bit_equal():
    """`safe` means the same output for every input: FL203's GELU composite agrees within rounding
    (so its proof as an unsafe rule passes) but is no safe fix, and the proof says so."""
    from fuselint.source.pattern_proof import prove

    assert all(p.ok for p in prove(CATALOG["FL203"]))
    as_safe = [p for p in prove(dataclasses.replace(CATALOG["FL203"], fix="safe")) if not p.ok]
    assert as_safe and all("not bit-equal" in p.error for p in as_safe)
    assert {p.dtype for p in prove(dataclasses.replace(CATALOG["FL203"], fix="safe"))} >= {"bfloat16"}


def test_every_safe_pattern_rule_is_bit_equal_and_every_unsafe_one_states_its_assumption():
    from fuselint.source.pattern_proof import prove

    for rule in RULES:
        if rule.fix == "safe":
            assert all(p.ok for p in prove(rule)), rule.code
        else:
            assert rule.fix_assumption.startswith("unsafe: "), rule.code


def test_a_safe_rule_that_flips_the_sign_of_zero_is_not_bit_equal():
    """`x * 0` is -0.0 where `x` is negative, `zeros_like` +0.0: equal values (`torch.equal`), other
    bits (`1 / y` is -inf against inf), so no safe fix."""
    rule = dataclasses.replace(
        CATALOG["FL211"], fix="safe", pattern={"match": "$x * 0", "replace": "torch.zeros_like($x)"}
    )
    x = -torch.ones(3, dtype=torch.float64)
    want, got = evaluate("__mv_x * 0", {"x": x}), evaluate("torch.zeros_like(__mv_x)", {"x": x})
    assert torch.equal(want, got) and not torch.equal(1 / want, 1 / got)
    proof = prove_alternative(rule, "$x * 0", "torch.zeros_like($x)", 0, torch.float64, exact=True)
    assert not proof.ok and "not bit-equal" in proof.error
