"""One proof trial, in its own process: run a model entry on a given version of its source.

    python -m fuselint.verify.prove_child REQUEST.json RESULT.json

The parent (`fuselint.verify.prove`) starts one child per trial, so a trace that crashes the
interpreter or hangs cannot take the command line down (the parent kills it at its timeout),
and every trial starts from a clean dynamo and a clean `sys.modules`.

The request names the entry, and maps source files to the text to run in their place: an
import hook loads that text under the original file's name, so dynamo reports breaks at the
user's own paths and nothing is written over the user's files. The trial then, stopping at the
first step that already decides it:

1. builds the model from the seed (the baseline trial saves its weights and inputs; every
   later trial loads them, so a fix that draws parameters in another order still runs the
   same weights on the same inputs) and runs it eagerly;
2. compares those outputs with the baseline's (exactly, or within the pattern proofs'
   tolerance for a composite rewrite);
3. traces it with dynamo (`dynamic=False`): break sites, graphs, break events;
4. calls the compiled model again with new inputs of the same shapes: graphs compiled by
   that call are recompiles;
5. compiles it with each backend asked for (fuselint, inductor) and compares with eager.

The result is JSON: the parent decides.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import linecache
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any


class FixedSources(importlib.abc.MetaPathFinder):
    """Finds modules as the path finder does; those whose file is in `texts` run the given text."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self.loaded: set[str] = set()
        # The top-level names the fixed files can be imported under: every import of another
        # package (torch's own, hundreds during a compile) is left to the usual finders.
        self.tops = {name for p in texts for name in _top_level_names(Path(p))}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.partition(".")[0] not in self.tops:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
            return None
        origin = str(Path(spec.origin).resolve())
        if origin not in self.texts:
            return None
        spec.loader = FixedLoader(self, origin)
        return spec


def _top_level_names(path: Path) -> set[str]:
    """Every name a file can be imported under at the top: its stem and the name of each
    folder above it (a namespace package has no __init__.py that would say where it starts)."""
    return {path.stem, *path.parent.parts}


class FixedLoader(importlib.abc.Loader):
    def __init__(self, finder: FixedSources, origin: str) -> None:
        self.finder, self.origin = finder, origin

    def create_module(self, spec: Any) -> None:
        return None

    def get_source(self, _name: str) -> str:
        return self.finder.texts[self.origin]

    def exec_module(self, module: Any) -> None:
        text = self.finder.texts[self.origin]
        # Tracebacks, dynamo's messages and `inspect` read the fixed lines, not the file's.
        lines = text.splitlines(keepends=True)
        linecache.cache[self.origin] = (len(text), None, lines, self.origin)
        module.__file__ = self.origin
        self.finder.loaded.add(self.origin)
        exec(compile(text, self.origin, "exec", dont_inherit=True), module.__dict__)  # noqa: S102


def _load_entry(spec: str, finder: FixedSources):
    """The entry, its own file run from the fixed text when that file is among the fixes."""
    from fuselint.graph.entry import Entry, EntryError, load_entry

    target, _, name = spec.rpartition(":")
    path = Path(target)
    if not (target.endswith(".py") and str(path.resolve()) in finder.texts):
        return load_entry(spec)
    origin = str(path.resolve())
    module_name = "fuselint_entry_fixed"
    module_spec = importlib.util.spec_from_file_location(
        module_name, origin, loader=FixedLoader(finder, origin)
    )
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise EntryError(f"entry {spec!r}: importing the fixed {target!r} failed: {exc}") from exc
    factory = getattr(module, name, None)
    if not callable(factory):
        raise EntryError(f"entry {spec!r}: the fixed {target!r} has no factory named {name!r}")
    return Entry(spec=spec, factory=factory, path=origin, device=getattr(factory, "fuselint_device", None))


@contextlib.contextmanager
def watch_functions(ran: set[tuple[str, str]], files: dict[str, str] | None = None):
    """Add (file as its code names it, qualified name) to `ran` for each function that runs
    meanwhile in this thread, of `files` only when given: a fix in a function the entry never
    runs is not proven by it (the trials), nor taken without a proof (verify). Only call events
    are seen (no line tracing), so the model runs at nearly full speed."""
    previous = sys.gettrace()

    def tracer(frame: Any, event: str, _arg: Any) -> None:
        code = frame.f_code
        if event == "call" and (files is None or code.co_filename in files):
            ran.add((code.co_filename, getattr(code, "co_qualname", code.co_name)))  # 3.10: no co_qualname

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


def _deterministic(device: str) -> None:
    """On a GPU, the ops' deterministic algorithms: a trial's outputs are compared with the
    original's bit for bit, and an op that adds with atomics (index_add, scatter_add, an
    embedding's backward) or a cuDNN algorithm picked by timing would differ from run to run
    and reject a fix that changed nothing. Ops without a deterministic algorithm only warn
    (their fixes may then be rejected: prove on the CPU). The CPU's ops are deterministic."""
    import torch

    if device.startswith("cuda"):
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


def _new_inputs(value: Any, integers: bool) -> Any:
    """Inputs of the same shapes and dtypes with new values: floats drawn anew, integers
    drawn in the range the original took (when `integers`), booleans and the rest kept."""
    import torch
    from torch.utils._pytree import tree_map

    def redraw(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if t.is_floating_point():
            return torch.randn_like(t)
        if integers and t.dtype != torch.bool and t.numel() > 1:
            low, high = int(t.min()), int(t.max())
            return torch.randint(low, high + 1, t.shape, dtype=t.dtype, device=t.device)
        return t.clone()

    return tree_map(redraw, value)


def _outputs(value: Any) -> list[tuple[str, Any]]:
    """(path, leaf) of an output: tensors (detached, on the CPU) and plain values; opaque
    objects by class name (see verify.numerics.flatten)."""
    import torch

    from fuselint.verify.numerics import Kind, flatten

    out = []
    for name, leaf in flatten(value):
        if isinstance(leaf, torch.Tensor):
            leaf = leaf.detach().cpu().clone()
        elif isinstance(leaf, Kind):
            leaf = f"<{leaf.name}>"
        elif not isinstance(leaf, (type(None), bool, int, float, complex, str, bytes)):
            leaf = repr(leaf)
        out.append((name, leaf))
    return out


def compare_outputs(got: list, want: list, exact: bool) -> tuple[str, float]:
    """('' or the first difference, the largest absolute difference seen).

    Not verify.numerics.compare: a break fix must be bit-exact (dtype and Python numbers
    included), and a composite rewrite is held to its rule proof's max-abs criterion
    (pattern_proof.tolerance), where verify measures compiled against eager by a norm."""
    import torch

    from fuselint.source.pattern_proof import tolerance

    if [k for k, _ in got] != [k for k, _ in want]:
        return "the output's structure differs", float("inf")
    worst = 0.0
    for (name, a), (_, b) in zip(got, want, strict=True):
        if not isinstance(b, torch.Tensor):
            if isinstance(a, torch.Tensor) or a != b:
                return f"{name}: {a!r} != {b!r}", float("inf")
            continue
        if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return f"{name}: shape or dtype differs", float("inf")
        if not b.is_floating_point() and not b.is_complex():
            if not torch.equal(a, b):
                return f"{name}: integer outputs differ", float("inf")
            continue
        a64, b64 = a.double(), b.double()
        if not torch.equal(torch.isnan(a64), torch.isnan(b64)):
            return f"{name}: NaN where the original has none (or the reverse)", float("nan")
        finite = ~torch.isnan(b64)
        if not torch.equal(a64[finite].isinf(), b64[finite].isinf()):
            return f"{name}: infinities differ", float("inf")
        keep = finite & ~b64.isinf()
        diff = (a64[keep] - b64[keep]).abs().max().item() if keep.any() else 0.0
        worst = max(worst, diff)
        if exact:
            if not torch.equal(a64[~keep & finite], b64[~keep & finite]) or diff > 0:
                return f"{name}: max abs diff {diff:.3g} (a break fix must be exact)", worst
        else:
            scale = b64[keep].abs().max().item() if keep.any() else 0.0
            try:
                limit = tolerance(b.dtype)
            except KeyError:
                limit = 1e-4
            if diff / max(scale, 1e-30) >= limit:
                return f"{name}: relative error {diff / max(scale, 1e-30):.3g} >= {limit:g}", worst
    return "", worst


def _break_sites(records: list[tuple[str, str]]) -> tuple[list[list], int]:
    """Distinct break sites (file, line, gb id, reason) at the user's lines, and the events."""
    from fuselint.graph.breaks_log import parse_break
    from fuselint.graph.capture import user_location

    sites: dict[tuple[str, int, str], list] = {}
    events = 0
    for text, _compile_id in records:
        raw = parse_break(text)
        if raw is None:
            continue
        events += 1
        file, line = user_location(raw)
        key = (file, line, raw.gb_id or raw.reason)
        sites.setdefault(key, [file, line, raw.gb_id, raw.reason[:160]])
    return [sites[k] for k in sorted(sites)], events


def _call(model: Any, args: tuple, kwargs: dict, train: bool, seed: int) -> Any:
    import torch

    # An entry that keeps state between calls (a scheduler's step index, a Heun step's first-order
    # half) says how to start over: every run compares the same call, not the next step's.
    reset = getattr(model, "reset_state", None)
    if callable(reset):
        reset()
    _seed(seed)  # random ops in forward (dropout in train mode, LSH rotations) draw the same
    if train:
        return model(*args, **kwargs)
    with torch.no_grad():
        return model(*args, **kwargs)


def _brief(exc: BaseException) -> str:
    from fuselint.graph.capture import root_cause

    cause = root_cause(exc)
    lines = [ln.strip() for ln in str(cause).strip().splitlines() if ln.strip()]
    return f"{type(cause).__name__}: {lines[0][:200]}" if lines else type(cause).__name__


def _trace(model: Any, built: Any, second: Any, train: bool, seed: int, result: dict) -> None:
    import torch
    import torch._dynamo

    from fuselint.graph.capture import _listening_to_breaks

    compiled_graphs: list[int] = []

    def recorder(gm: torch.fx.GraphModule, _inputs: list) -> Any:
        compiled_graphs.append(len(gm.graph.nodes))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=recorder, dynamic=False)
    with _listening_to_breaks() as handler:
        _call(compiled, built.args, built.kwargs, train, seed)
        result["graphs"] = len(compiled_graphs)
        result["sites"], result["events"] = _break_sites(handler.records)
        first_records = len(handler.records)
        if second is not None:
            args, kwargs = second
            _call(compiled, args, kwargs, train, seed + 1)
            again, _ = _break_sites(handler.records[first_records:])
            result["second"] = {"graphs": len(compiled_graphs) - result["graphs"], "sites": again}
    torch._dynamo.reset()


def _backend(name: str, model: Any, built: Any, train: bool, seed: int, exact_to: list) -> str:
    """'' when the backend compiles the model and matches eager; else why not (one line)."""
    import torch
    import torch._dynamo

    from fuselint.verify.numerics import compare

    if name == "fuselint":
        import fuselint.backend  # noqa: F401  (registers the backend)
    torch._dynamo.reset()
    try:
        out = _call(torch.compile(model, backend=name), built.args, built.kwargs, train, seed)
    except Exception as exc:  # noqa: BLE001 - a backend that fails is the answer
        return f"error: {_brief(exc)}"
    finally:
        torch._dynamo.reset()
    got = _outputs(out)
    check = compare(
        [t for _, t in got if isinstance(t, torch.Tensor)],
        [t for _, t in exact_to if isinstance(t, torch.Tensor)],
    )
    return "" if check.ok else f"mismatch: {check.problem}"


def run_trial(request: dict) -> dict:
    """The whole trial; never raises for a failure of the user's code (it is the result)."""
    import torch

    from fuselint.graph.entry import Built, build

    for folder in request.get("sys_path", []):
        if folder not in sys.path:
            sys.path.append(folder)
    texts = {p: Path(f).read_text(encoding="utf-8") for p, f in request.get("sources", {}).items()}
    finder = FixedSources(texts)
    sys.meta_path.insert(0, finder)
    result: dict = {"error": "", "stage": "build", "times": {}}
    started = time.perf_counter()

    def stage(name: str) -> None:
        result["times"][result["stage"]] = round(
            time.perf_counter() - started - sum(result["times"].values()), 2
        )
        result["stage"] = name

    seed, train = request.get("seed", 0), request.get("train", False)
    reference = request.get("reference")
    baseline = not reference
    ran: set[tuple[str, str]] = set()
    try:
        entry = _load_entry(request["spec"], finder)
        device = request.get("device") or "cpu"
        _deterministic(device)
        _seed(seed)
        with torch.device(device), watch_functions(ran, texts):
            built = build(entry).on(device)
        model = built.model
        if isinstance(model, torch.nn.Module):
            model.train(train)
        saved = torch.load(reference, weights_only=False) if reference else None
        if saved is not None:
            if saved.get("state") is not None and isinstance(model, torch.nn.Module):
                try:
                    model.load_state_dict(saved["state"])
                except RuntimeError as exc:
                    result["note"] = f"the fixed model's parameters differ: {_brief(exc)}"
            if saved.get("inputs") is not None:
                built = Built(model, *saved["inputs"])
        built = Built(model, built.args, built.kwargs)
        # The weights as built, before a forward can update a buffer in place.
        state = (
            {k: v.detach().clone() for k, v in model.state_dict().items()}
            if baseline and isinstance(model, torch.nn.Module)
            else None
        )
        stage("eager")
        with watch_functions(ran, texts):
            outputs = _outputs(_call(model, built.args, built.kwargs, train, seed))
        result["ran"] = sorted(ran)
        second = saved.get("second") if saved else None
        if baseline:
            _seed(seed + 1)
            second = _valid_second_inputs(model, built, train, seed, result)
            artifact = {"state": state, "inputs": (built.args, built.kwargs), "second": second}
            try:
                torch.save({**artifact, "outputs": outputs}, request["save"])
            except Exception:  # noqa: BLE001 - unpicklable inputs: later trials rebuild them
                torch.save(
                    {"state": state, "inputs": None, "second": None, "outputs": outputs}, request["save"]
                )
                result["note"] = "the inputs cannot be saved: each trial rebuilds them from the seed"
        else:
            problem, worst = compare_outputs(outputs, saved["outputs"], exact=request.get("exact", True))
            result["outputs"] = {"problem": problem, "max_abs_diff": worst}
            if problem:
                return _done(result, finder, started)
        stage("trace")
        _trace(model, built, second, train, seed, result)
        limit, again = request.get("max_sites"), request.get("max_second_graphs")
        if limit is not None and len(result["sites"]) > limit:
            return _done(result, finder, started)
        if again is not None and result.get("second", {}).get("graphs", 0) > again:
            return _done(result, finder, started)  # recompiles: lost whatever the backends say
        result["backends"] = {}
        for name in request.get("backends", []):
            stage(name)
            result["backends"][name] = _backend(name, model, built, train, seed, outputs)
        stage("done")
    except Exception as exc:  # noqa: BLE001 - the user's model failing is the trial's result
        result["error"] = _brief(exc)
        result["detail"] = "".join(traceback.format_exception(exc))[-4000:]
    return _done(result, finder, started)


def _valid_second_inputs(model: Any, built: Any, train: bool, seed: int, result: dict) -> Any:
    """New inputs of the same shapes that the original model accepts: every value redrawn if
    it runs on them, else only the floating-point ones; None when neither runs."""
    for integers in (True, False):
        args, kwargs = _new_inputs((built.args, built.kwargs), integers)
        try:
            _call(model, args, kwargs, train, seed + 1)
        except Exception:  # noqa: BLE001 - values the model does not take: try fewer
            continue
        result["second_inputs"] = "all values redrawn" if integers else "floating-point values redrawn"
        return args, kwargs
    result["second_inputs"] = "none: the model rejects new values"
    return None


def _done(result: dict, finder: FixedSources, started: float) -> dict:
    result["loaded"] = sorted(finder.loaded)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run_trial(request)
    Path(argv[1]).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
