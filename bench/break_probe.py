"""Dynamo's graph breaks for the precision probes (bench/precision_*_probes.py), read with the
project's own tools: `real_corpus.listen_breaks` collects the `graph_breaks` log records and
`fuselint.graph.breaks_log.parse_break` reads each one (its frames, gb id and reason).

`torch._dynamo.explain` and the graph-break counters miss some breaks (`warnings.warn`, an
`.item()` slice bound) and `fullgraph=True` captures `.item()` instead of breaking, so the
probes read the log.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable

import torch
from real_corpus import listen_breaks
from torch import nn

from fuselint.graph.breaks_log import parse_break


def listen():
    """Start collecting break records: the handler's `.texts` fills as dynamo logs breaks."""
    return listen_breaks()


def break_sites(texts: list[str], user: Callable[[str], str | None]) -> list[str]:
    """One `"file:line (reason gbNNNN)"` per line that broke, in the order dynamo logged them.

    `user(path)` names a frame's file as it should print, or None for a frame that is not user
    code (torch's own, a library's); the innermost user frame is the site."""
    sites: list[str] = []
    for text in texts:
        parsed = parse_break(text)
        if parsed is None:
            continue
        frames = [(f, n) for f, n, _ in parsed.frames] + [(parsed.file, parsed.line)]
        where = next((f"{name}:{line}" for f, line in reversed(frames) if (name := user(f))), None)
        if where is None or any(site.startswith(f"{where} ") for site in sites):
            continue  # no user line, or a line already listed (dynamo logs some breaks twice)
        gb = f" {parsed.gb_id}" if parsed.gb_id else ""
        sites.append(f"{where} ({parsed.reason[:60]}{gb})")
    return sites


def op_count(gm) -> int:
    """FX ops in a captured graph (what a counting backend records per graph)."""
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def package_site(path: str, packages: tuple[str, ...], script: str | None = None) -> str | None:
    """A `break_sites` namer: a frame in one of `packages` named from the package folder down
    (`x_transformers/x_transformers.py`), a frame in the probe `script` itself as "probes"."""
    for package in packages:
        if f"/{package}/" in path:
            return package + "/" + path.rsplit(f"/{package}/", 1)[1]
    if script is not None and path.endswith(script):
        return "probes"
    return None


def counting_compile(fn, breaks, **options) -> tuple[Callable, list[int]]:
    """`fn` compiled in a fresh dynamo state by a backend that records each captured graph's op
    count in the returned list (it fills as graphs compile), with the break log emptied."""
    torch._dynamo.reset()
    breaks.texts.clear()
    graphs: list[int] = []

    def backend(gm, _example):
        graphs.append(op_count(gm))
        return gm.forward

    return torch.compile(fn, backend=backend, **options), graphs


def compile_row(
    label: str,
    fn,
    args: tuple,
    breaks,
    user: Callable[[str], str | None],
    kwargs: dict | None = None,
    mode: contextlib.AbstractContextManager | None = None,
    error_width: int = 100,
) -> str:
    """`| label | graphs, ops | break sites |` for one call of `fn` compiled (`counting_compile`),
    warnings silenced, inside `mode` (e.g. no_grad); a dynamo hard error is a result too."""
    compiled, graphs = counting_compile(fn, breaks)
    error = ""
    with warnings.catch_warnings(), mode or contextlib.nullcontext():
        warnings.simplefilter("ignore")
        try:
            compiled(*args, **(kwargs or {}))
        except Exception as exc:
            error = f"; compile ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:error_width]}"
    sites = "; ".join(break_sites(breaks.texts, user)) or "-"
    return f"| {label} | {len(graphs)}, {sum(graphs)} | {sites}{error} |"


def grad_mode(label: str):
    """Inference runs under no_grad; a run labelled "train ..." keeps autograd on."""
    return contextlib.nullcontext() if label.startswith("train") else torch.no_grad()


def _loss(out):
    """A scalar to call backward on: the sum of every float tensor that needs a gradient."""
    tensors = out if isinstance(out, (tuple, list)) else [out]
    parts = [t.float().sum() for t in tensors if isinstance(t, torch.Tensor) and t.requires_grad]
    return sum(parts) if parts else None


def compile_run(
    label: str, fn, args, breaks, user: Callable[[str], str | None], kwargs=None
) -> tuple[str, list[str]]:
    """One `| label | graphs, ops | sites |` row (`counting_compile`) and its sites, named by
    `user` (see `break_sites`). A label starting "train" runs in train mode with autograd and calls
    backward on the sum of the outputs that need a gradient; any other runs in eval under no_grad."""
    torch.manual_seed(0)
    owner = fn if isinstance(fn, nn.Module) else getattr(fn, "__self__", None)
    if isinstance(owner, nn.Module):
        owner.train(label.startswith("train"))  # the mode the label names, set before compiling
    compiled, graphs = counting_compile(fn, breaks)
    error = ""
    with warnings.catch_warnings(), grad_mode(label):
        warnings.simplefilter("ignore")
        try:
            out = compiled(*args, **(kwargs or {}))
            if label.startswith("train"):
                loss = _loss(out)
                if loss is not None:
                    loss.backward()
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0][:100]  # some errors have no message
            error = f"; compile ERROR {type(exc).__name__}: {first}"
    sites = break_sites(breaks.texts, user)
    return f"| {label} | {len(graphs)}, {sum(graphs)} | {'; '.join(sites) or '-'}{error} |", sites


def probe_header() -> None:
    """The first lines of a probes table."""
    print(f"torch {torch.__version__}, backend eager, dynamic=False, eval + no_grad unless 'train'\n")
    print("| call | graphs, ops | break sites (innermost package line) |")
    print("|---|---|---|")


def print_probes(runs, script: str, packages: tuple[str, ...] = ()) -> None:
    """A probe script's whole table: the header, then one `compile_run` row per (label, fn, args),
    break sites named in `packages` or as the probe `script`'s own lines."""
    breaks = listen()
    probe_header()
    for label, fn, args in runs:
        row, _sites = compile_run(label, fn, args, breaks, lambda path: package_site(path, packages, script))
        print(row, flush=True)


def probe_rows(runs, run: Callable, packages, breaks, *, build: bool = False, keep=None) -> list[dict]:
    """Print one row per probe (`run(label, fn, args, breaks, kwargs)`, a probe file's
    `compile_run`) and return its break sites in `packages` as {package, model, file, line, gb}
    records. A probe is (label, fn, args[, kwargs]); with `build`, fn is a factory called first,
    and one that fails is a row of its own. `keep(label)` false: the row prints, no records."""
    records = []
    for label, fn, *rest in runs:
        if build:
            try:
                fn = fn()
            except Exception as exc:  # a probe that cannot build its model is a result, not a crash
                print(f"| {label} | - | build ERROR {type(exc).__name__}: {str(exc)[:100]} |", flush=True)
                continue
        row, sites = run(label, fn, rest[0], breaks, rest[1] if len(rest) > 1 else None)
        print(row, flush=True)
        if keep is not None and not keep(label):
            continue
        for site in sites:
            where, _, why = site.partition(" (")
            path, _, line = where.rpartition(":")
            package = path.split("/")[0]
            if package in packages:
                gb = why.rstrip(")").rsplit(" ", 1)[-1]
                records.append({"package": package, "model": label, "file": path.split("/", 1)[1],
                                "line": int(line), "gb": gb if gb.startswith("gb") else ""})  # fmt: skip
    return records


def write_sites(out: str | None, records: list[dict]) -> None:
    """The probes' sites as JSON (what bench/rescore_judged.py --recall reads)."""
    if out:
        with open(out, "w") as fh:
            json.dump({"torch": torch.__version__, "sites": records}, fh, indent=1)
            fh.write("\n")


class CallWith(nn.Module):
    """A module whose forward runs `fn(module, *args)`: a method other than `forward` compiled."""

    def __init__(self, module, fn) -> None:
        super().__init__()
        self.module, self.fn = module, fn

    def forward(self, *args):
        return self.fn(self.module, *args)


def probe_main(
    runs: Callable[[], list],
    packages: tuple[str, ...],
    script: str,
    argv: list[str],
    drop_failed: bool = False,
) -> None:
    """A probe file's main: its table on stdout and, with `--json OUT`, its sites. Breaks are
    named by the package line they sit on, or by a line of `script` (the probe file's name).
    `drop_failed`: a call that fails (a compile ERROR row) gives no sites."""
    out = argv[argv.index("--json") + 1] if "--json" in argv else None

    def run(label, fn, args, breaks, kwargs=None):
        row, sites = compile_run(
            label, fn, args, breaks, lambda path: package_site(path, packages, script), kwargs
        )
        return row, [] if drop_failed and "compile ERROR" in row else sites

    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    write_sites(out, probe_rows(runs(), run, packages, breaks, build=True))
