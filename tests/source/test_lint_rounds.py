"""Reach's later rounds reuse what roots do not change: a file linted again is not summarized again."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from test_reach import CATALOG, FIXTURE

from fuselint.config import Config
from fuselint.source import lint
from fuselint.source.lint import discover, lint_tree
from fuselint.source.module import SourceFile
from fuselint.source.nodes import new_memo
from fuselint.source.reach import Index


@pytest.fixture
def tree(tmp_path):
    return shutil.copytree(FIXTURE, tmp_path / "reach")


def test_a_file_linted_again_for_new_roots_is_summarized_once(tree, monkeypatch):
    config = Config(root=tree)
    files = discover([str(tree)], config)
    plain = lint_tree(files, CATALOG, config, jobs=1)

    summarized = _counted_calls(monkeypatch, "summarize", lambda args: args[1])  # by module name
    before = lint.PARSED["files"]
    again = lint_tree(files, CATALOG, config, jobs=1)
    assert lint.PARSED["files"] - before > len(files)  # some files were linted in a later round
    assert set(summarized.values()) == {1}
    assert len(summarized) == len(files)
    assert again.findings == plain.findings
    assert {n: r.summary for n, r in again.results.items()} == {
        n: r.summary for n, r in plain.results.items()
    }


def _counted_calls(monkeypatch, name: str, key) -> Counter:
    """Calls of `lint.<name>` from here on, counted by `key(args)`."""
    counts: Counter = Counter()
    function = getattr(lint, name)

    def counted(*args):
        counts[key(args)] += 1
        return function(*args)

    monkeypatch.setattr(lint, name, counted)
    return counts


def _indexes_built(monkeypatch) -> list[lint._RoundIndex]:
    """The indexes the rounds build from here on, in order."""
    built: list[lint._RoundIndex] = []
    init = lint._RoundIndex.__init__

    def counted(self, summaries):
        built.append(self)
        init(self, summaries)

    monkeypatch.setattr(lint._RoundIndex, "__init__", counted)
    return built


def test_the_rounds_share_one_index_whose_targets_are_a_fresh_indexs(tree, monkeypatch):
    config = Config(root=tree)
    files = discover([str(tree)], config)
    built = _indexes_built(monkeypatch)
    before = lint.PARSED["files"]
    result = lint_tree(files, CATALOG, config, jobs=1)
    assert lint.PARSED["files"] - before > len(files)  # more than one round ran
    assert len(built) == 1
    fresh = Index({n: r.summary for n, r in result.results.items() if r.summary is not None})
    calls = [c for r in result.results.values() for c in r.calls]
    assert any(built[0].targets(c) for c in calls)
    assert [built[0].targets(c) for c in calls] == [fresh.targets(c) for c in calls]


def test_relint_resolves_through_the_changed_files_new_summary(tree, monkeypatch):
    # `relint` lints the changed text without its summary: a function added to it must resolve.
    config = Config(root=tree)
    files = discover([str(tree)], config)
    first = lint_tree(files, CATALOG, config, jobs=1)
    processors = str(tree / "pkg" / "processors.py")
    text = (tree / "pkg" / "processors.py").read_text() + "\n\ndef added(x):\n    return x\n"
    built = _indexes_built(monkeypatch)
    found = first.relint({processors: text})
    assert "added" in built[-1].summaries[processors].functions
    (tree / "pkg" / "processors.py").write_text(text)
    again = lint_tree(files, CATALOG, config, jobs=1)
    assert found == [f for f in again.findings if f.span.path == processors]


def test_the_process_pool_lints_as_one_process_does_and_keeps_the_files_order(tree):
    # 10 files of the reach fixture and 12 model files: enough for the pool (16 files or more).
    models = tree / "models"
    models.mkdir()
    for source in sorted(FIXTURE.parent.glob("*.py")):
        shutil.copy(source, models / source.name)
    config = Config(root=tree)
    files = discover([str(tree)], config)
    assert len(files) >= 16
    one = lint_tree(files, CATALOG, config, jobs=1)
    two = lint_tree(files, CATALOG, config, jobs=2)
    assert two.findings == one.findings
    assert list(two.results) == [str(f) for f in files]
    assert two.results == one.results
    assert any(f.span.path.startswith(str(models)) for f in two.findings)


def test_a_kept_file_is_linted_again_without_a_parse_and_as_a_fresh_one(tree, monkeypatch):
    # What a pool worker does (`_init_worker`): keep the parsed files and their memos across rounds.
    config = Config(root=tree)
    files = discover([str(tree)], config)
    plain = lint_tree(files, CATALOG, config, jobs=1)
    linted = _counted_calls(monkeypatch, "lint_unit", lambda args: args[0])  # by path
    monkeypatch.setattr(lint, "_KEPT", lint._KeptFiles(10**9))
    before = lint.PARSED["files"]
    kept = lint_tree(files, CATALOG, config, jobs=1)
    assert max(linted.values()) > 1  # some files were linted in a later round
    assert lint.PARSED["files"] - before == len(files)
    assert kept.results == plain.results
    assert kept.findings == plain.findings


def test_kept_files_fit_their_room_and_a_changed_text_is_parsed_again(tree):
    kept = lint._KeptFiles(30)
    sf = SourceFile.parse("a.py", "x = 1\n")
    memo = new_memo()
    memo[0][("flows", None)] = {1: ([], [])}
    memo[0][("walk", sf.tree)] = [sf.tree]
    assert kept.put("a.py", sf.text, sf, memo)
    assert kept.get("a.py", "x = 1\n") == (sf, memo)
    assert list(memo[0]) == [("walk", sf.tree)]  # the flows hang on one round's roots
    assert kept.get("a.py", "x = 2\n") is None
    assert not kept.put("b.py", "y = 1\n" * 5, SourceFile.parse("b.py", "y = 1\n" * 5), new_memo())
    assert kept.get("b.py", "y = 1\n" * 5) is None


def test_a_worker_takes_its_own_files_first_then_anyones_then_the_smallest_of_the_busiest():
    linter = lint._Linter(CATALOG, Config(), 2)
    batch = {name: [(name, (), None, None)] for name in ("own0", "own1a", "own1b", "own1c", "free")}
    # Each queue is popped from its end: largest batches last in the list.
    queues = [[batch["own0"]], [batch["own1c"], batch["own1b"], batch["own1a"]], [batch["free"]]]
    assert linter._next(queues, 0) == batch["own0"]
    assert linter._next(queues, 0) == batch["free"]
    assert linter._next(queues, 0) == batch["own1c"]  # the smallest left of worker 1's
    assert linter._next(queues, 1) == batch["own1a"]
    assert linter._next(queues, 1) == batch["own1b"]
    assert linter._next(queues, 0) is None


def test_the_round_index_remembers_lookup_orders_and_instance_classes_as_a_fresh_index_finds_them(
    tree, monkeypatch
):
    # Classes with bases in other files, and a function whose result is one of them.
    (tree / "pkg" / "bases.py").write_text(
        "from torch import nn\nfrom pkg.kinds import Child\n\n\nclass Base(nn.Module):\n"
        "    def forward(self, x):\n        return self.step(x)\n\n    def step(self, x):\n        return x\n\n\n"
        "def make() -> Child:\n    return Child()\n"
    )
    (tree / "pkg" / "kinds.py").write_text(
        "from pkg.bases import Base, make\n\n\nclass Child(Base):\n    def step(self, x) -> Base:\n"
        "        return x.nonzero()\n\n\nclass Uses(Child):\n    def forward(self, x):\n"
        "        return make().step(x).step(x)\n"
    )
    config = Config(root=tree)
    files = discover([str(tree)], config)
    built = _indexes_built(monkeypatch)
    inherited = _counted_calls(monkeypatch, "inherited_modules", lambda args: id(args[0]))  # by index
    result = lint_tree(files, CATALOG, config, jobs=1)
    assert len(built) == 1 and list(inherited.values()) == [1]  # once for all of the index's rounds
    index = built[0]
    summaries = {n: r.summary for n, r in result.results.items() if r.summary is not None}
    fresh = Index(summaries)
    classes = [(p, c) for p, s in summaries.items() for c in s.classes]
    assert any(len(fresh.classes_of(*c)) > 1 for c in classes)  # a class with a base in the tree
    for _twice in range(2):
        assert [index.classes_of(*c) for c in classes] == [fresh.classes_of(*c) for c in classes]
    asked = sorted({key[0] for key in index._inner} | set(index._instances))
    chains = ["pkg.bases.make", "pkg.bases.make.step", "pkg.bases.make.step.step", "pkg.kinds.Child.step"]
    names = [*asked, *chains, *(f"{s.module}.{c}" for p, s in summaries.items() for c in s.classes)]
    assert index.instance_classes("pkg.bases.make.step") == [(str(tree / "pkg" / "bases.py"), "Base")]
    assert any(key[1] for key in index._inner)  # the value flow asked past the top
    for depth in (0, 1, 2):
        assert [index.instance_classes(q, depth) for q in names] == [
            Index(summaries).instance_classes(q, depth) for q in names
        ]


def test_a_kept_function_linted_again_lists_its_fresh_calls_once_and_as_a_fresh_lint(tmp_path, monkeypatch):
    # `Model.forward` calls a method of an object it builds (a fresh call): its file is linted
    # again when `caller.py`'s entry reaches `helper`. With the file kept, the second round reuses
    # the forward's built locals and method calls; its result is a fresh lint's.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Solver:\n    def solve(self, x):\n"
        "        return x.nonzero()\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        solver = Solver()\n        return solver.solve(x)\n\n\ndef helper(x):\n"
        "        s = Solver()\n        return s.solve(x) + x.item()\n"
    )
    (pkg / "caller.py").write_text(
        "import torch\nfrom torch import nn\nfrom pkg.model import helper\n\n\n"
        "class Caller(nn.Module):\n    def forward(self, x):\n        return helper(x)\n"
    )
    config = Config(root=tmp_path)
    files = discover([str(pkg)], config)
    plain = lint_tree(files, CATALOG, config, jobs=1)
    model = str(pkg / "model.py")
    assert len(plain.results[model].fresh) == 2 and plain.results[model].reached
    from fuselint.source import unresumable

    made = Counter()
    original = unresumable._built_names

    def counted(fn, nodes, summary):
        made[(fn.cls.name if fn.cls else "", fn.node.name)] += 1
        return original(fn, nodes, summary)

    monkeypatch.setattr(unresumable, "_built_names", counted)
    monkeypatch.setattr(lint, "_KEPT", lint._KeptFiles(10**9))
    linted = _counted_calls(monkeypatch, "lint_unit", lambda args: args[0])
    kept = lint_tree(files, CATALOG, config, jobs=1)
    assert linted[model] > 1 and ("Model", "forward") in made and ("", "helper") in made
    assert set(made.values()) == {1}  # each function's, over all rounds
    assert kept.results == plain.results
    assert kept.findings == plain.findings
