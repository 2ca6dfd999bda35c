"""The canonicalisation identities of identities.toml: each is true, each is applied, none is code."""

from __future__ import annotations

import sys

import pytest

from fuselint.catalog import Rule
from fuselint.source.patterns_canon import _HERE, Builder, Interner, identities
from fuselint.source.patterns_match import lower_template

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = tomllib.loads((_HERE / "identities.toml").read_text(encoding="utf-8"))["identities"]
# How the proof draws each metavariable (tensors by default): bounds of clamps are numbers,
# powers need a positive base, a matrix product needs matching inner sizes.
VARS = {
    "lo": {"kind": "scalar", "values": [-0.5, 0.25]},
    "hi": {"kind": "scalar", "values": [0.75]},
}
SPECIAL = {
    "torch.pow($a, $b)": {"a": {"domain": "positive"}},
    "torch.matmul($a, $b)": {"a": {"shape": "n k"}, "b": {"shape": "k m"}},
    "torch.sqrt($x)": {"x": {"domain": "positive"}},
    "torch.rsqrt($x)": {"x": {"domain": "positive"}},
    "torch.reciprocal($x)": {"x": {"domain": "positive"}},
    "torch.div($a, $b)": {"b": {"domain": "positive"}},
}


def _rule(left: str, right: str) -> Rule:
    return Rule(
        code="ID000",
        name="identity",
        kind="pattern",
        summary="",
        message="",
        why="",
        use_instead="",
        pattern={"match": left, "replace": right, "vars": {**VARS, **SPECIAL.get(left, {})}},
    )


@pytest.mark.parametrize("left", sorted(TABLE))
def test_identity_holds_on_random_tensors(left):
    pytest.importorskip("torch")
    from fuselint.source.pattern_proof import prove

    proofs = prove(_rule(left, TABLE[left]))
    assert proofs and all(p.ok for p in proofs), [p.error for p in proofs if not p.ok]


def test_a_false_identity_fails_its_proof():
    pytest.importorskip("torch")
    from fuselint.source.pattern_proof import prove

    assert not all(p.ok for p in prove(_rule("torch.rsqrt($x)", "$x ** 0.5")))


@pytest.mark.parametrize("left", sorted(TABLE))
def test_both_sides_lower_to_one_term(left):
    builder = Builder(Interner())
    assert lower_template(left, builder).key == lower_template(TABLE[left], builder).key


def test_every_line_is_loaded():
    assert len(identities()) == len(TABLE)


def test_the_canonical_module_names_no_identity_in_code():
    """The functions rewritten by identities.toml appear nowhere in patterns_canon.py's code."""
    code = (_HERE / "patterns_canon.py").read_text(encoding="utf-8")
    for name, _arity in identities():
        assert f'"{name}"' not in code, name
