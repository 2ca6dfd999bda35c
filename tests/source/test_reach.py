"""Whole-program reach: a forward's calls followed into the helpers of other files of the tree."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from cli_runner import run

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import Cache, discover, lint_tree
from fuselint.source.reach import module_name

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "reach"
CATALOG = load_catalog()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of fixtures/reach, so that runs may write caches and fixes."""
    shutil.copytree(FIXTURE, tmp_path / "reach")
    return tmp_path / "reach"


def _lint(root: Path, *names: str, cache: Cache | None = None, config: Config | None = None):
    config = config or Config(root=root)
    files = discover([str(root / n) for n in names] or [str(root)], config)
    return lint_tree(files, CATALOG, config, jobs=1, cache=cache)


def _sites(findings, root: Path) -> set[tuple[str, int, str]]:
    return {(Path(f.span.path).relative_to(root).as_posix(), f.span.line, f.code) for f in findings}


EXPECTED = {
    ("pkg/ops/boxes.py", 10, "FL107"),  # for c in torch.unique(idxs), through a re-export
    ("pkg/ops/boxes.py", 10, "FL106"),  # torch.unique
    ("pkg/ops/boxes.py", 12, "FL106"),  # one-argument torch.where
    ("pkg/ops/boxes.py", 17, "FL101"),  # int(valid.sum()), through `import pkg.ops.boxes as B`
    ("pkg/processors.py", 8, "FL101"),  # .item() in a callable stored on self
    ("pkg/search.py", 11, "FL101"),  # .item() in a property that the reached method reads
    ("pkg/search.py", 21, "FL102"),  # if on a tensor, in a plain class built in forward
    # GreedySearch(3).decode(...) on the object forward builds: dynamo logs the call's line too (gb0092)
    ("pkg/models/detector.py", 25, "FL108"),
    ("pkg/utils.py", 5, "FL103"),  # warnings.warn in deprecate(), called on a deprecated argument
}


def test_a_forward_reaches_helpers_in_other_files(tree):
    assert _sites(_lint(tree).findings, tree) == EXPECTED


def test_helpers_alone_have_no_findings_without_the_forward_that_reaches_them(tree):
    # The same helpers without the model: nothing calls them, so nothing is reported.
    found = _lint(
        tree, "pkg/ops", "pkg/processors.py", "pkg/search.py", "pkg/utils.py", "pkg/__init__.py"
    ).findings
    assert found == []


def test_a_helper_that_no_entry_reaches_has_no_finding(tree):
    assert not [f for f in _lint(tree).findings if f.span.path.endswith("unused.py")]


def test_a_finding_in_a_helper_names_the_path_from_the_forward(tree):
    by_site = {(Path(f.span.path).name, f.span.line, f.code): f.message for f in _lint(tree).findings}
    detector = str(tree / "pkg" / "models" / "detector.py")
    assert by_site[("processors.py", 8, "FL101")].endswith(
        f"(reached from {detector}:Detector.forward → ScaleProcessor.__call__)"
    )
    assert by_site[("boxes.py", 12, "FL106")].endswith(
        f"(reached from {detector}:Detector.forward → batched_nms)"
    )
    # Of two callers, the path named is the one that hands over a sure tensor: Runner.step's
    # `boxes.float()` is a tensor, Detector.forward's comes from a stored callable (maybe a tuple).
    runner = str(tree / "pkg" / "runner.py")
    assert by_site[("boxes.py", 17, "FL101")].endswith(f"(reached from {runner}:Runner.step → keep_count)")


def test_a_helper_called_only_on_a_deprecation_path_says_so_and_can_be_filtered(tree):
    warn = next(f for f in _lint(tree).findings if f.span.path.endswith("utils.py"))
    assert "(only on a deprecated-argument path)" in warn.message
    assert dict(warn.details)["path"] == "deprecation"
    result = run(["check", "--no-cache", "--paths", "normal", "--format", "json", "--exit-zero", "pkg"], tree)
    assert "utils.py" not in result.output
    assert "processors.py" in result.output


def test_a_callable_stored_on_self_is_its_class_call_method_only(tree):
    found = [f for f in _lint(tree).findings if f.span.path.endswith("processors.py")]
    # ScaleProcessor.__call__ is stored on self and called; Other.__call__ is never stored.
    assert [(f.span.line, f.code) for f in found] == [(8, "FL101")]


def test_a_property_getter_runs_only_where_it_is_read(tree):
    found = {f.span.line: f.message for f in _lint(tree).findings if f.span.path.endswith("search.py")}
    assert found[11].endswith("GreedySearch.decode → GreedySearch.best_score)")
    assert 15 not in found  # worst_score is never read


def test_a_method_compiled_by_a_call_reaches_helpers(tree):
    found = _lint(tree, "pkg/runner.py", "pkg/ops/boxes.py").findings
    assert [(Path(f.span.path).name, f.span.line, f.code) for f in found] == [("boxes.py", 17, "FL101")]
    assert "runner.py:Runner.step → keep_count)" in found[0].message


def test_a_tensor_passed_by_a_caller_overrides_an_int_annotation(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "pad.py").write_text(
        textwrap.dedent(
            """
            import torch


            def pad_to(x, length: int):
                if length > 3:
                    return torch.nn.functional.pad(x, (0, 1))
                return x
            """
        )
    )
    (tmp_path / "pkg" / "model.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            from .pad import pad_to


            class Model(nn.Module):
                def forward(self, x):
                    return pad_to(x, x.sum()), pad_to(x, x.shape[0])
            """
        )
    )
    found = _lint(tmp_path).findings
    assert [(Path(f.span.path).name, f.span.line, f.code) for f in found] == [("pad.py", 6, "FL102")]
    # A parameter taken for a tensor on its name alone is no proof: the annotation stands.
    model = tmp_path / "pkg" / "model.py"
    model.write_text(
        model.read_text()
        .replace("def forward(self, x):", "def forward(self, x, total):")
        .replace("pad_to(x, x.sum()), ", "pad_to(x, total), ")
    )
    assert _lint(tmp_path).findings == []
    # Alone, the annotation is believed: `length` is an int.
    (tmp_path / "pkg" / "model.py").write_text(
        (tmp_path / "pkg" / "model.py").read_text().replace("pad_to(x, total), ", "")
    )
    assert _lint(tmp_path).findings == []


def test_module_names_follow_packages(tree):
    assert module_name(tree / "pkg" / "ops" / "boxes.py") == ("pkg.ops.boxes", False)
    assert module_name(tree / "pkg" / "ops" / "__init__.py") == ("pkg.ops", True)


def test_a_warm_run_parses_no_file_and_reports_the_same(tree):
    config = Config(root=tree)
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    before = lint.PARSED["files"]
    cold = _lint(tree, cache=cache, config=config).findings
    parsed_cold = lint.PARSED["files"] - before
    assert parsed_cold >= 9  # every file of the package at least once
    before = lint.PARSED["files"]
    warm = _lint(tree, cache=cache, config=config).findings
    assert lint.PARSED["files"] - before == 0
    assert warm == cold


def test_an_edit_reparses_only_the_edited_file(tree):
    config = Config(root=tree)
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    _lint(tree, cache=cache, config=config)
    search = tree / "pkg" / "search.py"
    search.write_text(search.read_text().replace("if best.sum() > 0:", "if best.sum().item() > 0:"))
    before = lint.PARSED["files"]
    found = _lint(tree, cache=cache, config=config).findings
    assert lint.PARSED["files"] - before == 1
    assert ("pkg/search.py", 21, "FL101") in _sites(found, tree)


def test_a_one_file_run_keeps_what_the_cached_tree_reaches(tree):
    # pre-commit names one staged file; the forwards that reach it live in other, unchanged files.
    config = Config(root=tree)
    cache = Cache(tree / ".fuselint_cache" / "test.pickle")
    _lint(tree, cache=cache, config=config)
    before = lint.PARSED["files"]
    found = _lint(tree, "pkg/ops/boxes.py", cache=cache, config=config).findings
    assert lint.PARSED["files"] - before == 0
    assert _sites(found, tree) == {s for s in EXPECTED if s[0] == "pkg/ops/boxes.py"}
    # Edited, it is parsed again, and still reached from the unchanged model file.
    boxes = tree / "pkg" / "ops" / "boxes.py"
    boxes.write_text(boxes.read_text() + "\n\ndef extra():\n    return 1\n")
    found = _lint(tree, "pkg/ops/boxes.py", cache=cache, config=config).findings
    assert _sites(found, tree) == {s for s in EXPECTED if s[0] == "pkg/ops/boxes.py"}


def test_the_report_does_not_depend_on_the_order_of_files(tree):
    config = Config(root=tree)
    files = discover([str(tree)], config)
    forward = lint_tree(files, CATALOG, config, jobs=1).findings
    backward = lint_tree(list(reversed(files)), CATALOG, config, jobs=1).findings
    assert [(f.span, f.message) for f in forward] == [(f.span, f.message) for f in backward]


def test_relint_after_fix_keeps_findings_only_reach_produces(tree):
    processors = tree / "pkg" / "processors.py"
    # A fixable `.item()` (unsafe fix: keep the 0-d tensor) and an unfixable bincount in the
    # same reached helper: after --fix, the bincount must still be reported. (A nonzero has a fix
    # since fix11: FL106's unbacked-size custom op.)
    text = processors.read_text()
    text = text.replace("        scale =", "        hidden = hidden.float()\n        scale =")
    text = text.replace(
        "        return hidden / scale\n",
        "        rows = torch.bincount(hidden.long().flatten())\n        return hidden / scale, rows\n",
    )
    processors.write_text(text)
    result = run(
        ["check", "--no-cache", "--fix", "--unsafe-fixes", "--format", "json", "--exit-zero", "pkg"], tree
    )
    assert result.exit_code == 0, result.output
    assert ".item()" not in processors.read_text()  # the fix was applied
    found = json.loads(result.output)
    left = [(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in found]
    assert ("processors.py", 10, "FL106") in left
    message = next(f["message"] for f in found if Path(f["filename"]).name == "processors.py")
    assert "reached from pkg/models/detector.py:Detector.forward → ScaleProcessor.__call__" in message


def test_an_explicit_self_does_not_shift_the_arguments(tmp_path):
    # `Base.position(self, mask, False)`: `use_audio` gets False, not the tensor `mask`.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "base.py").write_text(
        "class Base:\n"
        "    def position(self, ids, use_audio: bool = False):\n"
        "        shift = 1 if use_audio else 0\n"
        "        return ids + shift\n"
    )
    (tmp_path / "pkg" / "model.py").write_text(
        "from torch import nn\n\n"
        "from .base import Base\n\n\n"
        "class Model(nn.Module, Base):\n"
        "    def forward(self, ids, mask):\n"
        "        return Base.position(self, mask, False)\n"
    )
    assert _lint(tmp_path).findings == []
    # Passed a tensor where the flag goes, the same line is a host sync.
    model = tmp_path / "pkg" / "model.py"
    model.write_text(model.read_text().replace("mask, False)", "ids, mask.any())"))
    assert [(Path(f.span.path).name, f.span.line, f.code) for f in _lint(tmp_path).findings] == [
        ("base.py", 3, "FL102")
    ]


def test_a_processor_handed_to_a_setter_is_the_stored_callable(tmp_path):
    # diffusers' Attention: `processor = A() if ... else B()`, `self.set_processor(processor)`,
    # and `set_processor` stores its argument; forward calls `self.processor(...)`.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "processors.py").write_text(
        "class Fast:\n"
        "    def __call__(self, attn, hidden):\n"
        "        return hidden * hidden.max().item()\n\n\n"
        "class Slow:\n"
        "    def __call__(self, attn, hidden):\n"
        "        return hidden.nonzero()\n"
    )
    (tmp_path / "pkg" / "attention.py").write_text(
        "import torch\n"
        "from torch import nn\n\n"
        "from .processors import Fast, Slow\n\n\n"
        "class Attention(nn.Module):\n"
        "    def __init__(self, processor=None, fast=True):\n"
        "        super().__init__()\n"
        "        if processor is None:\n"
        "            processor = Fast() if fast else Slow()\n"
        "        self.set_processor(processor)\n\n"
        "    def set_processor(self, processor):\n"
        "        self.processor = processor\n\n"
        "    def forward(self, hidden):\n"
        "        return self.processor(self, torch.relu(hidden))\n"
    )
    found = [(Path(f.span.path).name, f.span.line, f.code) for f in _lint(tmp_path).findings]
    assert found == [("processors.py", 3, "FL101"), ("processors.py", 8, "FL106")]


def test_a_decorator_of_another_file_puts_the_wrapper_it_returns_in_scope(tmp_path):
    # transformers' `@capture_outputs` on forward: its `wrapper` runs on every call of forward.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "capture.py").write_text(
        "import functools\n\n\n"
        "def capture_outputs(func=None, *, tie=True):\n"
        "    def wrapped_fn(func):\n"
        "        @functools.wraps(func)\n"
        "        def wrapper(self, x):\n"
        "            print('capturing')\n"
        "            return func(self, x)\n\n"
        "        return wrapper\n\n"
        "    return wrapped_fn(func) if func is not None else wrapped_fn\n\n\n"
        "def unused(func):\n"
        "    def wrapper(x):\n"
        "        print('never applied')\n"
        "        return func(x)\n\n"
        "    return wrapper\n"
    )
    model = tmp_path / "pkg" / "model.py"
    model.write_text(
        "from torch import nn\n\n"
        "from .capture import capture_outputs\n\n\n"
        "class Model(nn.Module):\n"
        "    @capture_outputs\n"
        "    def forward(self, x):\n"
        "        return x * 2\n"
    )
    found = _lint(tmp_path).findings
    assert [(Path(f.span.path).name, f.span.line, f.code) for f in found] == [("capture.py", 8, "FL103")]
    assert "reached from" in found[0].message and "Model.forward → @capture_outputs" in found[0].message
    # Called with arguments (`@capture_outputs(tie=False)`), the same wrapper runs.
    model.write_text(model.read_text().replace("@capture_outputs\n", "@capture_outputs(tie=False)\n"))
    assert [(Path(f.span.path).name, f.span.line) for f in _lint(tmp_path).findings] == [("capture.py", 8)]
    # Undecorated, nothing reaches it.
    model.write_text(model.read_text().replace("    @capture_outputs(tie=False)\n", ""))
    assert _lint(tmp_path).findings == []


def test_a_file_linted_again_for_new_roots_reuses_its_pattern_findings(tree, monkeypatch):
    # Pattern rules do not depend on roots: the re-lint of boxes.py (reached from the model
    # only after the first round) keeps the first round's pattern result, reach note added.
    boxes = tree / "pkg" / "ops" / "boxes.py"
    boxes.write_text(
        boxes.read_text().replace("return int(valid.sum())", "return int(torch.log(1 + valid.sum()))")
    )
    from fuselint.source import patterns

    runs: list[str] = []
    engine = patterns.pattern_findings

    def counted(sf, rules):
        runs.append(Path(sf.path).name)
        return engine(sf, rules)

    monkeypatch.setattr(patterns, "pattern_findings", counted)
    before = lint.PARSED["files"]
    found = _lint(tree).findings
    assert lint.PARSED["files"] - before > len(set(runs))  # some files were linted again ...
    assert runs.count("boxes.py") == 1  # ... boxes.py among them, its patterns searched once
    log1p = [f for f in found if f.code == "FL211"]
    assert [(Path(f.span.path).name, f.span.line) for f in log1p] == [("boxes.py", 17)]
    assert "reached from" in log1p[0].message


def test_a_functions_own_returns_leave_out_nested_scopes_and_generators():
    import ast

    from fuselint.source import nodes
    from fuselint.source.reach import own_returns

    def reference(fn):
        found, todo = [], list(fn.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(node, ast.Return):
                found.append(node)
            todo.extend(ast.iter_child_nodes(node))
        return {id(r) for r in found}

    text = (
        "def plain(x):\n    if x:\n        return 1\n    return 2\n"
        "def nested(x):\n    def inner():\n        return 3\n    return inner\n"
        "def gen(x):\n    yield x\n    return 4\n"
        "def outer():\n    @deco((yield))\n    def inner():\n        return 5\n"
        "async def lam(f=lambda: 6):\n    return [k for k in f()]\n"
    )
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    texts = [text, *(p.read_text(encoding="utf-8") for p in sorted(fixtures.rglob("*.py"))[:40])]
    checked = 0
    for source in texts:
        tree = ast.parse(source)
        with nodes.remembered_walks():
            for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                got = own_returns(fn)
                assert (None if got is None else {id(r) for r in got}) == reference(fn)
                checked += 1
    assert checked > 40
    funcs = {f.name: f for f in ast.walk(ast.parse(text)) if isinstance(f, ast.FunctionDef)}
    assert own_returns(funcs["gen"]) is None and len(own_returns(funcs["plain"])) == 2
    assert len(own_returns(funcs["nested"])) == 1
