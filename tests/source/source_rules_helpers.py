"""Shared helpers for the source-rule tests: lint a snippet or a tree of files, get (code, line)
pairs, and ask dynamo whether a function breaks the graph."""

from __future__ import annotations

import logging
import textwrap
import types
import warnings
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.findings import Finding
from fuselint.source.fixer import fix_text
from fuselint.source.lint import discover, lint_text, lint_tree

CATALOG = load_catalog()


def findings(source: str, select: str = "FL") -> list[Finding]:
    return lint_text("snippet.py", textwrap.dedent(source), CATALOG, Config(select=(select,)))


def lines(source: str, code: str) -> list[int]:
    """The lines flagged with `code`, in order."""
    return [f.span.line for f in findings(source, code) if f.code == code]


def fixed(source: str, code: str, unsafe: bool = True) -> str:
    config = Config(select=(code,))
    return fix_text(
        textwrap.dedent(source), lambda t: lint_text("snippet.py", t, CATALOG, config), unsafe=unsafe
    ).text


def tree_findings(root: Path, files: dict[str, str], **settings) -> list[Finding]:
    """The FL1 findings of a tree made of `files` (path under `root` -> source) under `root`."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    config = Config(root=root, select=("FL1",), **settings)
    return lint_tree(discover([str(root)], config), CATALOG, config, jobs=1).findings


def load_snippet(source: str, filename: str = "snippet.py") -> dict:
    """The names a snippet of our own defines, run as a module."""
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), filename, "exec"), namespace)  # noqa: S102 - our own snippet
    return namespace


def load_namespace(source: str, name: str) -> types.SimpleNamespace:
    """`load_snippet` as attributes: the before and after forms of a fixture, side by side."""
    return types.SimpleNamespace(**load_snippet(source, f"{name}.py"))


def dynamo_break_reasons(fn, *args) -> list[str]:
    """The first line of each break reason dynamo counts compiling `fn` and calling it on `args`,
    without fullgraph (which hides a captured `.item()` or size read); torch 2.13 counts a
    data-dependent branch under "unimplemented", not "graph_break"."""
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    torch.compile(fn, backend="eager")(*args)
    return [k.splitlines()[0] for k in (*counters["graph_break"], *counters["unimplemented"])]


def bit_equal(a, b) -> bool:
    """Same pytree of tensors, each with the same shape, dtype and bits."""
    from torch.utils._pytree import tree_leaves

    torch = pytest.importorskip("torch")
    left, right = tree_leaves(a), tree_leaves(b)
    return len(left) == len(right) and all(
        p.shape == q.shape and p.dtype == q.dtype and torch.equal(p, q)
        for p, q in zip(left, right, strict=True)
    )


def confirm_fixture_fix(text: str, after_text: str, cls: str, make) -> set[tuple]:
    """A fixture's break, confirmed by dynamo before the fix and gone after it, with the fixed model
    (eager and compiled) bit-equal to the original on three fresh inputs from `make(generator)`.
    Returns the output shapes seen, so a caller can check data-sized outputs vary."""
    from torch.utils._pytree import tree_leaves

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    before = getattr(load_namespace(text, "before"), cls)().eval()
    torch.manual_seed(0)
    after = getattr(load_namespace(after_text, "after"), cls)().eval()
    generator = torch.Generator().manual_seed(0)
    args = make(generator)
    assert dynamo_break_reasons(before, *args)
    assert dynamo_break_reasons(after, *args) == []
    torch._dynamo.reset()
    compiled = torch.compile(after, backend="eager", dynamic=False)
    sizes = set()
    with torch.no_grad():
        for _ in range(3):
            args = make(generator)
            expected = before(*args)
            assert bit_equal(expected, after(*args))
            assert bit_equal(expected, compiled(*args))
            sizes.add(tuple(t.shape for t in tree_leaves(expected)))
    return sizes


def breaks_under_dynamo(fn, *args, **kwargs) -> bool:
    """Whether dynamo breaks the graph compiling `fn` and calling it on `args` (fullgraph raises
    on a break; a data-dependent read, a graph break without fullgraph, raises UserError there)."""
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.compile(fn, fullgraph=True, backend="eager")(*args, **kwargs)
        except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError):
            return True
    return False


def dynamo_graphs(fn, *args, compiled: bool = True) -> tuple[int, object, object]:
    """(graphs dynamo made, eager output, compiled output) of one call of `fn` under no_grad;
    every graph after the first is a break. `compiled=False` runs eager only (0 graphs)."""
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    out = None
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            eager = fn(*args)
            if compiled:
                out = torch.compile(fn, backend=backend)(*args)
        finally:
            logging.disable(logging.NOTSET)
    return len(graphs), eager, out


def frames_over_inputs(module, inputs: list[tuple]) -> int:
    """The frames dynamo compiles for `module` under `fullgraph=True` over calls on each of `inputs`
    (1: no recompile), after checking that each compiled output equals the eager one."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(module, backend=counter, fullgraph=True)
    with torch.no_grad():
        for args in inputs:
            assert torch.equal(compiled(*args), module(*args))
    return counter.frame_count


def logged_breaks(fn, *args) -> list:
    """Every break dynamo logs compiling `fn` on `args` (`RawBreak`s, in order), read from the
    `graph_breaks` log, which names breaks that `explain` and the counters miss
    (`torch._dynamo.graph_break()` inside a library call such as an optimizer's step)."""
    torch = pytest.importorskip("torch")
    from fuselint.graph.breaks_log import parse_break

    class Records(logging.Handler):
        def __init__(self) -> None:
            super().__init__(level=logging.DEBUG)
            self.texts: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.texts.append(record.getMessage())

    handler = Records()
    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    torch._dynamo.reset()
    torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager")(*args)
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        torch._logging.set_logs()
    return [parsed for text in handler.texts if (parsed := parse_break(text)) is not None]


def logged_break_lines(fn, *args, filename: str) -> set[int]:
    """The lines of `filename` where dynamo logs a graph break compiling `fn` on `args`: for each
    logged break (`logged_breaks`), the innermost frame in that file."""
    found = set()
    for parsed in logged_breaks(fn, *args):
        frames = [(f, n) for f, n, _ in parsed.frames] + [(parsed.file, parsed.line)]
        found.update(next(([n] for f, n in reversed(frames) if f == filename), []))
    return found
