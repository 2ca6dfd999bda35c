"""The pattern engine on its own: spellings, algebra, temporaries, rendering, imports, user rules.

Each test lints a small source through the real catalog (or a rule written here, as a user
would) and checks what is found and what `--fix` writes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fuselint.catalog import Rule, load_catalog
from fuselint.config import Config, load_config
from fuselint.source.fixer import fix_text
from fuselint.source.lint import lint_text
from fuselint.source.module import SourceFile
from fuselint.source.patterns import compile_rule, pattern_findings
from fuselint.source.patterns_match import PatternError

CATALOG = load_catalog()


def _findings(source: str, select: str = "FL2", catalog=CATALOG):
    return lint_text("model.py", textwrap.dedent(source), catalog, Config(select=(select,)))


def _fix(source: str, select: str = "FL2", catalog=CATALOG) -> str:
    config = Config(select=(select,))
    text = textwrap.dedent(source)
    return fix_text(text, lambda t: lint_text("model.py", t, catalog, config), unsafe=True).text


def _codes(source: str, select: str = "FL2") -> list[str]:
    return [f.code for f in _findings(source, select)]


SILU_SPELLINGS = [
    ("import torch", "x * torch.sigmoid(x)"),
    ("import torch", "x * x.sigmoid()"),
    ("import torch\nimport torch.nn.functional as F", "x * F.sigmoid(x)"),
    ("import torch", "x * torch.nn.functional.sigmoid(x)"),
    ("import torch\nfrom torch import sigmoid", "x * sigmoid(x)"),
    ("import torch as t", "x * t.sigmoid(x)"),
    ("import torch", "x * torch.special.expit(x)"),
    ("import torch", "torch.sigmoid(x) * x"),
    ("import torch", "(torch.sigmoid((x)) * (x))"),
    ("import torch", "torch.mul(x, torch.sigmoid(x))"),
    ("import torch", "x.mul(x.sigmoid())"),
]


@pytest.mark.parametrize("header,expr", SILU_SPELLINGS)
def test_every_spelling_of_silu_is_found(header, expr):
    assert _codes(f"{header}\n\ndef f(x):\n    return {expr}\n", "FL205") == ["FL205"]


@pytest.mark.parametrize(
    "expr", ["x * torch.sigmoid(1.702 * x)", "x * torch.sigmoid(y)", "x * torch.sigmoid(-x)"]
)
def test_silu_look_alikes_are_not_found(expr):
    assert _codes(f"import torch\n\ndef f(x, y):\n    return {expr}\n", "FL205") == []


def test_name_from_a_local_variable_shadowing_torch_is_not_resolved():
    source = """
    import torch

    def f(x):
        torch = x
        return x * torch.sigmoid(x)
    """
    assert _codes(source, "FL205") == []


@pytest.mark.parametrize(
    "expr",
    [
        "x ** 2",
        "x.pow(2)",
        "torch.pow(x, 2)",
        "x * x",
        "torch.square(x)",
        "x.square()",
    ],
)
def test_every_spelling_of_a_square_is_one_term(expr):
    source = f"""
    import torch

    def rms(x, eps):
        return x * torch.rsqrt(({expr}).mean(-1, keepdim=True) + eps)
    """
    assert _codes(source, "FL214") == ["FL214"]


@pytest.mark.parametrize(
    "scale",
    ["torch.rsqrt(v + eps)", "1 / torch.sqrt(v + eps)", "(v + eps) ** -0.5", "1.0 / (v + eps).sqrt()"],
)
def test_rsqrt_and_division_by_sqrt_coincide(scale):
    source = f"""
    import torch

    def rms(x, eps):
        v = x.pow(2).mean(-1, keepdim=True)
        return x * {scale}
    """
    assert _codes(source, "FL214") == ["FL214"]


@pytest.mark.parametrize(
    "call",
    [
        "torch.softmax(x, -1)",
        "torch.softmax(x, dim=-1)",
        "x.softmax(-1)",
        "x.softmax(dim=-1)",
        "F.softmax(x, dim=-1)",
        "torch.nn.functional.softmax(x, -1)",
        "torch.special.softmax(x, -1)",
    ],
)
def test_keyword_and_positional_arguments_coincide(call):
    source = f"""
    import torch
    import torch.nn.functional as F

    def f(x):
        return torch.log({call})
    """
    assert _codes(source, "FL202") == ["FL202"]


@pytest.mark.parametrize(
    "constant",
    ["math.sqrt(2 / math.pi)", "0.7978845608", "(2 / math.pi) ** 0.5", "math.sqrt(2.0) / math.sqrt(math.pi)"],
)
def test_constant_expressions_are_folded(constant):
    source = f"""
    import math
    import torch

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh({constant} * (x + 0.044715 * x ** 3)))
    """
    assert _codes(source, "FL204") == ["FL204"]


def test_a_wrong_constant_is_not_folded_into_a_match():
    source = """
    import torch

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(0.8 * (x + 0.044715 * x ** 3)))
    """
    assert _codes(source, "FL204") == []


def test_softmax_dim_is_carried_to_the_replacement():
    source = """
    import torch

    def f(x):
        e = torch.exp(x - x.amax(1, keepdim=True))
        return e / e.sum(1, keepdim=True)
    """
    assert "torch.softmax(x, 1)" in _fix(source, "FL201")


def test_temporaries_are_deleted_and_comments_kept():
    source = """
    import torch

    def f(x):
        # stable softmax
        m = x.max(-1, keepdim=True)[0]
        e = torch.exp(x - m)
        y = e / e.sum(-1, keepdim=True)  # probabilities
        return y
    """
    assert _fix(source, "FL201") == textwrap.dedent(
        """
        import torch

        def f(x):
            # stable softmax
            y = torch.softmax(x, -1)  # probabilities
            return y
        """
    )


def test_a_temporary_read_elsewhere_blocks_the_rewrite():
    source = """
    import torch

    def f(x):
        e = torch.exp(x)
        y = e / e.sum(-1, keepdim=True)
        return y, e.mean()
    """
    assert _codes(source, "FL201") == []


def test_a_name_rebound_between_temporaries_and_use_is_not_confused():
    # `x` is rebound after the temporary: the softmax is of the old x, which the replacement
    # at the return cannot name, so the finding carries no fix.
    source = """
    import torch

    def f(x):
        e = torch.exp(x)
        x = x + 1
        return e / e.sum(-1, keepdim=True), x
    """
    findings = _findings(source, "FL201")
    assert [f.code for f in findings] == ["FL201"]
    assert findings[0].fix is None


def test_an_in_place_update_between_temporary_and_use_blocks_the_fix():
    source = """
    import torch

    def f(x, y):
        e = torch.exp(x)
        x.add_(1)
        return e / e.sum(-1, keepdim=True)
    """
    findings = _findings(source, "FL201")
    assert findings and findings[0].fix is None


def test_temporaries_in_a_loop_body_that_live_on_are_not_inlined():
    source = """
    import torch

    def f(xs):
        for x in xs:
            e = torch.exp(x)
            y = e / e.sum(-1, keepdim=True)
        return y, e
    """
    assert _codes(source, "FL201") == []


def test_the_rest_of_a_product_is_kept():
    source = """
    import torch

    def f(a, b):
        return a * torch.sigmoid(a) * b
    """
    assert "return F.silu(a) * b" in _fix(source, "FL205")


def test_file_alias_for_functional_is_used():
    source = """
    import torch
    from torch import nn

    def f(x):
        return x * torch.sigmoid(x)
    """
    fixed = _fix(source.replace("from torch import nn", "import torch.nn.functional as fn"), "FL205")
    assert "return fn.silu(x)" in fixed
    assert "import torch.nn.functional as F\n" not in fixed


def test_f_is_imported_when_free():
    source = """
    import torch

    def f(x):
        return x * torch.sigmoid(x)
    """
    fixed = _fix(source, "FL205")
    assert "import torch.nn.functional as F\n" in fixed and "return F.silu(x)" in fixed


def test_full_name_when_f_is_taken():
    source = """
    import torch

    F = 3

    def f(x):
        return x * torch.sigmoid(x)
    """
    fixed = _fix(source, "FL205")
    assert "return torch.nn.functional.silu(x)" in fixed
    assert "import torch.nn.functional as F" not in fixed


def test_torch_alias_is_used_for_torch_functions():
    source = """
    import torch as th

    def f(x):
        return th.exp(x) / th.exp(x).sum(-1, keepdim=True)
    """
    assert "return th.softmax(x, -1)" in _fix(source, "FL201")


def test_operand_needing_parentheses_gets_them():
    source = """
    import torch

    def f(a, b):
        return torch.exp(a + b) - 1
    """
    assert "return torch.expm1(a + b)" in _fix(source, "FL210")
    source = """
    import torch

    def f(a, b):
        return torch.log(1 + a * b) * 2
    """
    assert "return torch.log1p(a * b) * 2" in _fix(source, "FL211")


def test_gain_counts_the_kernels_saved():
    source = """
    import math
    import torch

    def f(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    """
    (finding,) = _findings(source, "FL204")
    # pow, mul, add, mul, tanh, add, mul, mul = 8 kernels by hand; F.gelu is one.
    assert finding.gain.launches == 7


def test_fix_is_idempotent_and_reparses():
    source = """
    import torch

    def f(x, w, b, eps):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        return w * (x - u) / torch.sqrt(s + eps) + b
    """
    once = _fix(source)
    assert "F.layer_norm(x, (x.shape[-1],), w, b, eps)" in once
    assert _fix(once) == once


def test_noqa_suppresses_a_pattern_finding():
    source = """
    import torch

    def f(x):
        return x * torch.sigmoid(x)  # noqa: FL205
    """
    assert _codes(source, "FL205") == []


def test_pattern_findings_is_called_with_a_parsed_file_and_its_rules():
    sf = SourceFile.parse("m.py", "import torch\ny = torch.exp(x) - 1\n")
    rule = CATALOG["FL210"]
    assert [f.code for f in pattern_findings(sf, [rule])] == ["FL210"]


def _user_rule(tmp_path: Path) -> Path:
    folder = tmp_path / "my_rules"
    folder.mkdir()
    (folder / "FL901.toml").write_text(
        textwrap.dedent(
            """
            code = "FL901"
            name = "manual-softsign"
            kind = "pattern"
            summary = "softsign written by hand"
            message = "use F.softsign"
            why = "two kernels where one does"
            use_instead = "`F.softsign(x)`"
            fix = "safe"
            bad = ["import torch\\ny = x / (1 + x.abs())\\n"]
            good = ["import torch\\ny = x / (1 + y.abs())\\n"]
            fixed = ["import torch\\nimport torch.nn.functional as F\\ny = F.softsign(x)\\n"]

            [pattern]
            match = "$x / (1 + torch.abs($x))"
            replace = "torch.nn.functional.softsign($x)"
            [pattern.vars]
            x = "tensor"
            """
        )
    )
    return folder


def test_a_user_rule_in_extra_rules_is_loaded_and_applied(tmp_path):
    folder = _user_rule(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\nextra-rules = ["my_rules"]\n')
    config = load_config(tmp_path / "pyproject.toml")
    catalog = load_catalog(config.extra_rules)
    assert "FL901" in catalog and catalog["FL901"].path.startswith(str(folder.resolve()))
    rule = catalog["FL901"]
    text = rule.bad[0]
    assert [f.code for f in lint_text("m.py", text, catalog, config)] == ["FL901"]
    assert lint_text("m.py", rule.good[0], catalog, config) == []
    fixed = fix_text(text, lambda t: lint_text("m.py", t, catalog, config)).text
    assert fixed == rule.fixed[0]


@pytest.mark.parametrize(
    "table,problem",
    [
        ({"match": "$x * torch.sigmoid($x)"}, "needs `match` and `replace`"),
        ({"match": "$x", "replace": "$x"}, "operation at its root"),
        ({"match": "$x +", "replace": "$x"}, "does not parse"),
        ({"match": "torch.exp($x)", "replace": "torch.expm1($y)"}, "lacks"),
        ({"match": "torch.exp($x)", "replace": "$x", "vars": {"x": "matrix"}}, "kind must be"),
        ({"match": "torch.exp($x)", "replace": "$x", "colour": 1}, "unknown"),
    ],
)
def test_a_bad_pattern_table_is_reported(table, problem):
    rule = Rule("FL999", "x", "pattern", "s", "m", "w", "u", fix="safe", pattern=table)
    with pytest.raises(PatternError, match=problem):
        compile_rule(rule)


def test_a_global_is_never_a_temporary():
    source = """
    import torch

    def f(x):
        global e
        e = torch.exp(x)
        return e / e.sum(-1, keepdim=True)
    """
    assert _codes(source, "FL201") == []


def test_max_of_two_tensors_is_not_a_reduction():
    source = """
    import torch

    def f(x, y):
        e = torch.exp(x - torch.max(x, y)[0])
        return e / e.sum(-1, keepdim=True)
    """
    assert _fix(source, "FL201").count("torch.max(x, y)[0]") == 1


def test_text_prefilter_skips_functions_without_trigger_words_and_loses_nothing(monkeypatch):
    from fuselint.source import patterns

    rules = [r for r in CATALOG if r.kind == "pattern"]
    triggers = patterns._Triggers.of(tuple(patterns.compiled(r) for r in rules))
    assert not triggers.may_match_text("def f(x):\n    return self.proj(x) + x * 2\n")
    assert triggers.may_match_text("def f(x):\n    return x * x.sigmoid()\n")
    root = Path(__file__).resolve().parents[2] / "fixtures"
    for path in sorted(root.glob("handwritten_*.py")):
        sf = SourceFile.parse(str(path), path.read_text())
        filtered = {(f.code, f.span) for f in pattern_findings(sf, rules)}
        monkeypatch.setattr(patterns._Triggers, "may_match", lambda self, present: True)
        everything = {(f.code, f.span) for f in pattern_findings(sf, rules)}
        monkeypatch.undo()
        assert filtered == everything and filtered


def test_a_short_constant_must_match_exactly():
    # `1 - p + 1e-8` guards the log against 0: it is not `1 + x`.
    source = """
    import torch

    def focal(p):
        return -(1 - p + 1e-8).log()
    """
    assert _codes(source, "FL211") == []
    assert _codes(source.replace(" + 1e-8", ""), "FL211") == ["FL211"]


def _pattern_codes(body: str) -> list[str]:
    from fuselint.catalog import load_catalog
    from fuselint.config import Config
    from fuselint.source.lint import lint_text

    source = "import torch\n\n\ndef f(a, b, eps):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return [f.code for f in lint_text("m.py", source, load_catalog(), Config(select=("FL2",)))]


LAYER_NORM_OF_H = (
    "return (h - h.mean(-1, keepdim=True)) / torch.sqrt("
    "((h - h.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + eps)"
)


def test_a_layer_norm_of_a_temporary_sum_is_a_layer_norm():
    """`h = a + b` is spliced into `h - mean(h)`; the matcher also reads h whole, as FL212's $x."""
    assert _pattern_codes(f"h = a + b\n{LAYER_NORM_OF_H}") == ["FL212"]
    assert _pattern_codes(f"h = a\n{LAYER_NORM_OF_H}") == ["FL212"]


def test_an_rms_norm_of_a_temporary_product_is_found():
    assert _pattern_codes("h = a * b\nreturn h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)") == [
        "FL214"
    ]


def test_a_temporary_sum_still_splices_into_a_longer_sum():
    """The spliced reading still matches first: `c = x * 0.5; c * (1 + erf(x / sqrt(2)))` is GELU."""
    body = "c = a * 0.5\nreturn c * (1.0 + torch.erf(a / math.sqrt(2.0)))"
    assert _pattern_codes(f"import math\n{body}") == ["FL203"]


def test_line_words_read_once_per_line_are_each_lines_words(monkeypatch):
    # `line_words` keeps each line's words for the process: files that share lines get the words
    # of their own lines, whether the line was read before or the room was full and emptied.
    from fuselint.source import patterns

    rules = [r for r in CATALOG if r.kind == "pattern"]
    triggers = patterns._Triggers.of(tuple(patterns.compiled(r) for r in rules))
    shared = "    h = torch.sigmoid(x) @ w\n"
    texts = [
        "import torch\n\ndef f(x, w):\n" + shared + "    return h.float()\n",
        "import torch\n\ndef g(x, w):\n" + shared + "    return h.to(x) + x.mean()\n",
        "def k(x):\n    return x\n",
    ]

    def read(text: str) -> list[frozenset]:
        return [
            triggers.vocabulary.intersection(patterns._TOKEN.findall(line)) for line in text.splitlines(True)
        ]

    for room in (10**6, 2):
        monkeypatch.setattr(patterns, "_LINE_WORDS", {})
        monkeypatch.setattr(patterns, "_WORD_SETS", {})
        monkeypatch.setattr(patterns, "_LINE_WORDS_ROOM", room)
        for _twice in range(2):
            for i, text in enumerate(texts):
                found = triggers.line_words(SourceFile.parse(f"m{i}.py", text))
                assert found == read(text)
        known = patterns._LINE_WORDS[triggers.vocabulary]
        # Emptied before a file once over its room: at most the room and one file's lines.
        assert len(known) <= room + 1 + max(t.count("\n") for t in texts)
        assert room == 2 or shared in known
    assert {"sigmoid", "@"} <= read(shared)[0]
