"""The fix engine: lossless splicing, imports through libcst, fixpoint, atomic writes."""

from __future__ import annotations

import ast
import dataclasses
import os
import stat

import pytest

from fuselint.findings import Applicability, Edit, Finding, Fix, Span
from fuselint.source.fixer import add_imports, apply_edits, fix_text, write_atomically


def _relu_linter(text: str) -> list[Finding]:
    """A toy rule: every `torch.clamp(NAME, min=0)` becomes `F.relu(NAME)`."""
    out = []
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "torch.clamp"
            and node.keywords
            and ast.unparse(node.keywords[0]) == "min=0"
        ):
            arg = ast.get_source_segment(text, node.args[0])
            col = len(lines[node.lineno - 1].encode()[: node.col_offset].decode()) + 1
            end = len(lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode()) + 1
            edit = Edit(node.lineno, col, node.end_lineno, end, f"F.relu({arg})")
            fix = Fix(Applicability.SAFE, "use relu", (edit,), ("import torch.nn.functional as F",))
            out.append(
                Finding("FL999", "clamp", Span("m.py", node.lineno, col, node.end_lineno, end), fix=fix)
            )
    return out


SOURCE = '''"""A model."""
import torch  # the framework

def f(x, y):
    # keep this comment
    a = torch.clamp(x, min=0)   # odd spacing kept
    return a + torch.clamp(y,  min=0)
'''


def test_fix_splices_edits_and_adds_import_after_existing_imports():
    result = fix_text(SOURCE, _relu_linter)
    assert result.text == (
        '"""A model."""\n'
        "import torch  # the framework\n"
        "import torch.nn.functional as F\n"
        "\n"
        "def f(x, y):\n"
        "    # keep this comment\n"
        "    a = F.relu(x)   # odd spacing kept\n"
        "    return a + F.relu(y)\n"
    )
    assert len(result.applied) == 2


def test_fix_is_idempotent():
    once = fix_text(SOURCE, _relu_linter).text
    assert fix_text(once, _relu_linter).text == once


def test_crlf_newlines_survive():
    crlf = SOURCE.replace("\n", "\r\n")
    fixed = fix_text(crlf, _relu_linter).text
    assert "\r\n" in fixed and "\n" not in fixed.replace("\r\n", "")
    assert "import torch.nn.functional as F\r\n" in fixed


def test_import_already_present_is_not_duplicated():
    text = "import torch\nimport torch.nn.functional as F\n\nz = torch.clamp(q, min=0)\n"
    fixed = fix_text(text, _relu_linter).text
    assert fixed.count("import torch.nn.functional as F") == 1


def test_import_goes_after_docstring_when_there_are_no_imports():
    assert add_imports('"""Doc."""\nx = 1\n', ["import torch"]) == '"""Doc."""\nimport torch\nx = 1\n'


def test_unicode_columns_are_characters():
    text = "import torch\ns = 'héllo'; z = torch.clamp(q, min=0)\n"
    assert "z = F.relu(q)" in fix_text(text, _relu_linter).text


def test_a_fix_that_breaks_the_file_is_not_applied():
    def bad(text):
        f = _relu_linter(text)
        return [
            Finding(
                x.code,
                x.message,
                x.span,
                fix=Fix(Applicability.SAFE, "", (dataclasses.replace(x.fix.edits[0], content="(("),)),
            )
            for x in f
        ]

    assert fix_text(SOURCE, bad).text == SOURCE


def test_unsafe_fix_needs_permission():
    def unsafe(text):
        return [
            Finding(f.code, f.message, f.span, fix=Fix(Applicability.UNSAFE, "", f.fix.edits, f.fix.imports))
            for f in _relu_linter(text)
        ]

    assert fix_text(SOURCE, unsafe).text == SOURCE
    assert "F.relu(x)" in fix_text(SOURCE, unsafe, unsafe=True).text


def test_overlapping_edits_are_rejected():
    with pytest.raises(Exception):
        apply_edits("abcdef\n", [Edit(1, 1, 1, 4, "x"), Edit(1, 2, 1, 5, "y")])


def test_write_atomically_keeps_encoding_and_permissions(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nname = 'été'\n".encode("latin-1"))
    os.chmod(path, 0o754)
    write_atomically(path, "# -*- coding: latin-1 -*-\nname = 'ôté'\n", "iso-8859-1")
    assert path.read_bytes() == "# -*- coding: latin-1 -*-\nname = 'ôté'\n".encode("latin-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


def test_write_atomically_keeps_a_bom(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")
    write_atomically(path, "x = 2\n", "utf-8-sig")
    assert path.read_bytes() == b"\xef\xbb\xbfx = 2\n"


def test_write_atomically_writes_through_a_symlink(tmp_path):
    # Replacing the link itself would leave the real file unfixed and the link a copy.
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    write_atomically(link, "x = 2\n", "utf-8")
    assert link.is_symlink()
    assert real.read_text() == "x = 2\n"


def test_write_atomically_refuses_a_read_only_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError):
        write_atomically(path, "x = 2\n", "utf-8")
    assert path.read_text() == "x = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


def test_a_fix_that_unbinds_a_name_still_in_use_is_not_applied():
    # A rule that inlines `a` and deletes its assignment, missing that `del a` still reads it:
    # the result parses but raises NameError when run. The fixer refuses it.
    text = "import torch\n\n\ndef f(x):\n    a = torch.exp(x)\n    b = a - 1\n    del a\n    return b\n"

    def inliner(current):
        if "a = torch.exp(x)" not in current:
            return []
        edits = (Edit(5, 1, 6, 1, ""), Edit(6, 9, 6, 10, "torch.exp(x)"))
        fix = Fix(Applicability.SAFE, "inline", edits)
        return [Finding("FL999", "inline", Span("m.py", 5, 5, 6, 14), fix=fix)]

    assert fix_text(text, inliner).text == text


def test_a_fix_that_unbinds_a_name_only_other_functions_bind_is_not_applied():
    text = (
        "import torch\n\n\ndef g():\n    a = 1\n    return a\n\n\n"
        "def f(x):\n    a = torch.exp(x)\n    b = a - 1\n    del a\n    return b\n"
    )

    def inliner(current):
        if "    a = torch.exp(x)\n" not in current:
            return []
        edits = (Edit(10, 1, 11, 1, ""), Edit(11, 9, 11, 10, "torch.exp(x)"))
        return [
            Finding("FL999", "inline", Span("m.py", 10, 5, 11, 14), fix=Fix(Applicability.SAFE, "", edits))
        ]

    assert fix_text(text, inliner).text == text


def test_fixes_that_keep_every_name_bound_still_apply():
    assert "F.relu(x)" in fix_text(SOURCE, _relu_linter).text


def test_the_real_rules_never_leave_a_deleted_temporary_unbound():
    # transformers' reformer: `logits = logsumexp(...)`, `exp(x - logits)`, then `del logits`.
    from fuselint.catalog import load_catalog
    from fuselint.config import Config
    from fuselint.source.fixer import unbound_names
    from fuselint.source.lint import lint_text

    text = (
        "import torch\n\n\ndef attend(scores):\n"
        "    logits = torch.logsumexp(scores, dim=-1, keepdim=True)\n"
        "    probs = torch.exp(scores - logits)\n"
        "    del logits\n"
        "    return probs\n"
    )
    catalog, config = load_catalog(), Config()
    fixed = fix_text(text, lambda t: lint_text("m.py", t, catalog, config), unsafe=True).text
    assert unbound_names(ast.parse(fixed)) == set()
