"""verify: the original and the fixed source, each under eager and the chosen backends.

For every (variant, backend) pair: compile, check the outputs against eager on the
original source, and time the call. The plan's prediction for the same model sits beside
the measurement, so a user sees whether fuselint's advice held on their GPU.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fuselint.catalog import Catalog
from fuselint.config import Config
from fuselint.graph.entry import Built, Entry, EntryError, build, load_entry
from fuselint.verify.numerics import Comparison, compare
from fuselint.verify.timing import measure_together
from fuselint.verify.variants import (
    FixedFile,
    copy_with_fixes,
    fix_package_files,
    functions_run,
    never_run_note,
    package_sources,
)

BACKENDS = ("eager", "fuselint", "inductor", "inductor-max-autotune", "cudagraphs", "torchscript")


@dataclass(frozen=True)
class Row:
    variant: str  # "original" | "fixed"
    backend: str
    ms: float | None
    compile_s: float | None
    check: Comparison | None
    error: str = ""
    how: str = ""  # how the backend took the model ("traced" for TorchScript), when it says
    spread: float = 1.0  # median / fastest run (a CPU) or fastest round (a GPU) of the row's timings


@dataclass(frozen=True)
class Prediction:
    variant: str
    eager_us: float
    fused_us: float
    eager_launches: float
    fused_launches: float


@dataclass(frozen=True)
class Verification:
    entry: str
    device: str
    rows: tuple[Row, ...]
    fixed_files: tuple[FixedFile, ...] = ()
    predictions: tuple[Prediction, ...] = ()
    notes: tuple[str, ...] = field(default=())
    platform: str = ""  # what measured it: the GPU and the torch and triton versions

    @property
    def ok(self) -> bool:
        return all(r.check is not None and r.check.ok for r in self.rows if not r.error)

    def row(self, variant: str, backend: str) -> Row | None:
        return next((r for r in self.rows if r.variant == variant and r.backend == backend), None)


def _entry_root(entry: Entry) -> Path:
    """The folder whose Python files make up the model's source (copied for the fixed variant)."""
    return Path(entry.path).resolve().parent


@contextlib.contextmanager
def _modules_swapped(ours: Callable[[str, object], bool], using: dict) -> Iterator[dict]:
    """`sys.modules` with the modules `ours(name, module)` picks taken out and `using` put in until
    the end; then what was imported meanwhile that `ours` picks goes, and the taken-out modules come
    back. Yields them."""
    taken = {name: mod for name, mod in sys.modules.items() if ours(name, mod)}
    for name in taken:
        del sys.modules[name]
    sys.modules.update(using)
    try:
        yield taken
    finally:
        for name in [n for n, m in list(sys.modules.items()) if ours(n, m)]:
            del sys.modules[name]
        sys.modules.update(taken)


def _isolated_modules(root: Path) -> contextlib.AbstractContextManager:
    """Import a copy of `root` without the originals (same module names) shadowing it."""
    return _modules_swapped(lambda _name, mod: _under(mod, root), {})


class _PackageWindow:
    """The fixed packages' window (`_fixed_packages`). `finder.loaded` names the fixed files that
    were imported. `as_variant(v)` gives variant v's compile its own copy of the packages: the
    original's puts the installed modules back in `sys.modules` (dynamo builds its guards from
    modules by name) and the installed files' lines in `linecache` (TorchScript reads source
    there); the fixed one's, the fixed texts' lines."""

    def __init__(self, texts: dict[str, str], tops: set[str], saved: dict, finder: object) -> None:
        self.texts, self.tops, self.saved, self.finder = texts, tops, saved, finder

    def ours(self, name: str, _module: object = None) -> bool:
        return name.partition(".")[0] in self.tops

    @contextlib.contextmanager
    def as_variant(self, variant: str) -> Iterator[None]:
        original = variant == "original"
        with _source_lines(self.texts, fixed=not original), contextlib.ExitStack() as stack:
            if original:
                stack.enter_context(_modules_swapped(self.ours, self.saved))
            yield


@contextlib.contextmanager
def _fixed_packages(texts: dict[str, str], tops: set[str]) -> Iterator[_PackageWindow]:
    """Import the top-level packages `tops` afresh, the files of `texts` (resolved file -> fixed
    text) running their fixed text under their own names (the installed files are not written),
    until the end; then the modules the process had come back."""
    from fuselint.verify.prove_child import FixedSources

    window = _PackageWindow(texts, tops, {}, FixedSources(texts))
    finders = list(sys.meta_path)
    with _modules_swapped(window.ours, {}) as saved:
        window.saved = saved
        sys.meta_path.insert(0, window.finder)
        try:
            # the fixed modules' loader puts their text in linecache under the installed file's name
            with _source_lines(texts, fixed=False):
                yield window
        finally:
            # ours, and any import hook the fresh copy installed (transformers adds one at import)
            sys.meta_path[:] = finders


@contextlib.contextmanager
def _source_lines(texts: dict[str, str], *, fixed: bool) -> Iterator[None]:
    """The lines `inspect` (TorchScript's compiler, tracebacks) reads for the files of `texts`:
    their fixed text, or (not `fixed`) the installed file's. The original model's classes and the
    fixed ones share a file name, and linecache holds one text per name; its entries come back after."""
    saved = {path: linecache.cache.get(path) for path in texts}
    for path, text in texts.items():
        if fixed:
            linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)
        else:
            linecache.cache.pop(path, None)
    try:
        yield
    finally:
        for path, entry in saved.items():
            if entry is None:
                linecache.cache.pop(path, None)
            else:
                linecache.cache[path] = entry


def _forget_modules_under(root: Path) -> None:
    for name in [n for n, m in list(sys.modules.items()) if _under(m, root)]:
        sys.modules.pop(name, None)


def _under(module, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    return bool(file) and Path(file).resolve().is_relative_to(root)


def _prepare(built: Built, device: str) -> Built:
    built = built.on(device)
    if isinstance(built.model, torch.nn.Module):
        built.model.eval()
    return built


class BackendRefused(Exception):
    """The backend cannot take this model; the message is the row's reason."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        # dynamo's "backend='inductor' raised:" names the error on the next line (CppCompileError: ...)
        first = f"{first} {lines[1]}"
    # The tracer quotes the whole output it could not type, tensors and all: keep its name.
    first = re.sub(r"(cannot infer type of \w+)\(.*", r"\1", first)
    first = re.sub(r" at 0x[0-9a-fA-F]+", "", first)  # object addresses change from run to run
    return f"{type(exc).__name__}: {first}"


def _torchscript(built: Built):
    """torch.jit.script, else torch.jit.trace on the example inputs; PyTorch's own fuser
    settings (NNC on the GPU) are left as they are. Returns (module, how)."""
    try:
        return torch.jit.script(built.model), "scripted"
    except Exception as exc:  # scripting rejects most real models: try tracing
        script_error = _one_line(exc)
    try:
        traced = torch.jit.trace(
            built.model,
            built.args if built.args or not built.kwargs else None,
            example_kwarg_inputs=built.kwargs or None,
            strict=False,  # dict outputs (a ModelOutput) are allowed
            check_trace=False,  # verify checks the numerics itself, against eager
        )
    except Exception as exc:
        raise BackendRefused(
            f"cannot be scripted ({script_error[:120]}) nor traced ({_one_line(exc)[:120]})"
        ) from exc
    return traced, "traced"


def _compiled(built: Built, backend: str):
    """The callable for `backend`, and how it was made (shown in the row)."""
    model = built.model
    if backend == "eager":
        return model, ""
    if backend == "torchscript":
        return _torchscript(built)
    if backend == "inductor-max-autotune":
        return torch.compile(model, mode="max-autotune-no-cudagraphs"), ""
    if backend == "fuselint":
        import fuselint.backend  # noqa: F401  (registers the backend name)
    return torch.compile(model, backend=backend), ""


def _error_row(variant: str, backend: str, exc: BaseException) -> Row:
    reason = str(exc) if isinstance(exc, BackendRefused) else _one_line(exc)
    return Row(variant, backend, None, None, None, reason[:300])


@dataclass(frozen=True)
class _Ready:
    """A variant compiled under a backend, checked, waiting to be timed."""

    variant: str
    backend: str
    call: Callable[[], object]
    how: str
    compile_s: float | None
    check: Comparison


def _compile_backend(
    variants: list[tuple[str, Built]],
    backend: str,
    device: str,
    reference,
    window: _PackageWindow | None = None,
) -> tuple[list[_Ready], dict[str, Row]]:
    """Every variant under one backend, compiled and checked against eager: the callables to
    time, and the rows of the variants the backend failed. `window`: the fixed packages', when
    the fixed variant runs any (each variant compiles with its own copy)."""
    ready, failed = [], {}
    for variant, built in variants:
        try:
            with torch.no_grad():
                start = time.perf_counter()
                # the first call compiles: each variant with its own copy of the packages in place
                with window.as_variant(variant) if window is not None else contextlib.nullcontext():
                    fn, how = _compiled(built, backend)
                    out = fn(*built.args, **built.kwargs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                compile_s = time.perf_counter() - start
            check = compare(out, reference)
            call = functools.partial(_call, fn, built)
            ready.append(
                _Ready(variant, backend, call, how, None if backend == "eager" else compile_s, check)
            )
        except Exception as exc:  # a backend that fails is reported, not fatal
            failed[variant] = _error_row(variant, backend, exc)
    return ready, failed


def _call(fn, built: Built):
    return fn(*built.args, **built.kwargs)


def _timings(ready: list[_Ready], device: str) -> list:
    """A Timing per callable, all in the same rounds. When one fails while timed, each backend's
    callables are timed together on their own, and in a backend whose rounds fail each callable
    alone: a callable that fails has its own exception, its siblings their timings."""
    try:
        with torch.no_grad():
            return measure_together([r.call for r in ready], device)
    except Exception:  # noqa: BLE001 - found out below, backend by backend
        pass
    timings: list = [None] * len(ready)
    for backend in dict.fromkeys(r.backend for r in ready):  # a backend named twice is one group
        group = [i for i, r in enumerate(ready) if r.backend == backend]
        try:
            with torch.no_grad():
                found = measure_together([ready[i].call for i in group], device)
        except Exception:  # noqa: BLE001 - found out below, callable by callable
            found = [_timing_alone(ready[i].call, device) for i in group]
        for i, timing in zip(group, found, strict=True):
            timings[i] = timing
    return timings


def _timing_alone(call: Callable[[], object], device: str):
    """One callable's Timing, or the exception it raised while timed (the row says why)."""
    try:
        with torch.no_grad():
            return measure_together([call], device)[0]
    except Exception as exc:  # noqa: BLE001 - the row says why
        return exc


def _run_backends(
    variants: list[tuple[str, Built]],
    backends: tuple[str, ...],
    device: str,
    reference,
    window: _PackageWindow | None = None,
) -> list[Row]:
    """Every variant under every backend: all compiled first (dynamo keeps each backend's code
    apart), then all timed in the same interleaved rounds, so that no row is timed while the
    host runs at another speed than the rows it is compared with. Rows by variant, then backend."""
    torch._dynamo.reset()
    ready: list[_Ready] = []
    rows: dict[tuple[str, str], Row] = {}
    # Each backend compiles each code object once more; the default limit (8) would leave a
    # frame of a long --backend list to eager without a word (older torch calls it cache_size_limit).
    limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    with torch._dynamo.config.patch(**{limit: max(8, 2 * len(backends) * len(variants))}):
        for backend in backends:
            made, failed = _compile_backend(variants, backend, device, reference, window)
            ready += made
            rows.update({(variant, backend): row for variant, row in failed.items()})
        timings = _timings(ready, device)
    for r, timing in zip(ready, timings, strict=True):
        rows[r.variant, r.backend] = (
            _error_row(r.variant, r.backend, timing)
            if isinstance(timing, Exception)
            else Row(r.variant, r.backend, timing.ms, r.compile_s, r.check, how=r.how, spread=timing.spread)
        )
    torch._dynamo.reset()
    return [rows[variant, backend] for variant, _ in variants for backend in backends]


def _predict(spec: str, variant: str, device_table) -> Prediction | None:
    from fuselint.fusion.model import analyse
    from fuselint.graph.capture import capture

    try:
        analysis = analyse(capture(load_entry(spec)), device_table)
    except EntryError:
        return None
    c = analysis.cost
    return Prediction(variant, c.eager.time_us, c.fused.time_us, c.eager.launches, c.fused.launches)


@dataclass(frozen=True)
class _Fixing:
    """What the fixed variant takes: the fixes of `catalog` under `config` (`unsafe` ones too when
    asked; only those `keep` accepts, a proof's, when given) in the entry's folder and in the package
    files the model runs (`modules`, `variants.package_sources`), there only in code it ran (`ran`)."""

    catalog: Catalog
    config: Config
    unsafe: bool
    keep: Callable | None
    modules: dict[Path, str]
    ran: set[tuple[str, str]]


def _build_fixed(
    spec: str,
    entry: Entry,
    original: Built,
    tmp: Path,
    fixing: _Fixing,
    device: str,
    seed: int,
    notes: list[str],
    stack: contextlib.ExitStack,
) -> tuple[str, Built, list[FixedFile], _PackageWindow | None] | None:
    """The fixed variant (and its packages' window), built from a fixed copy of the entry's folder
    under `tmp` (to be called inside `_isolated_modules`) and the fixed texts of the package files
    the model runs (imported in their place until `stack` closes); None when no fix applies."""
    catalog, config, unsafe, modules = fixing.catalog, fixing.config, fixing.unsafe, fixing.modules
    root = _entry_root(entry)
    refused: list = []  # a fix `keep` left out: then some fix applies, the proof took none
    keep = functools.partial(_kept, fixing.keep, refused) if fixing.keep is not None else None
    fixed_files = copy_with_fixes(root, tmp, catalog, config, unsafe=unsafe, keep=keep)
    texts, package_fixed, unrun = fix_package_files(
        modules, catalog, config, unsafe=unsafe, keep=keep, ran=fixing.ran
    )
    if unrun:
        notes.append(never_run_note(sum(f.fixes for f in unrun), [f.path for f in unrun]))
    if not fixed_files and not texts:
        if refused or unrun:
            notes.append("every fix found was left out (the notes say why): only the original was run")
        else:
            notes.append(
                "no fix applies to the entry's source: only the original was run"
                + (" (nor to the package files its model is made of)" if modules else "")
            )
        return None
    tops = {modules[Path(p)].partition(".")[0] for p in texts}
    window = stack.enter_context(_fixed_packages(texts, tops)) if texts else None
    target, _, factory = spec.rpartition(":")
    fixed_spec = f"{tmp / Path(target).resolve().relative_to(root)}:{factory}"
    torch.manual_seed(seed)
    fixed = build(load_entry(fixed_spec))
    if isinstance(original.model, torch.nn.Module) and isinstance(fixed.model, torch.nn.Module):
        # Same weights as the original: the fix rewrites code, not parameters.
        try:
            fixed.model.load_state_dict(original.model.state_dict())
        except RuntimeError:
            notes.append("the fixed model's parameters differ; both were built from one seed")
    # Report the fixes in files the model really runs, not every file copied.
    used = {
        Path(m.__file__).resolve().relative_to(tmp.resolve()).as_posix()
        for m in list(sys.modules.values())
        if _under(m, tmp.resolve())
    }
    fixed_files = [f for f in fixed_files if Path(f.path).as_posix() in used]
    if window is not None:
        loaded = window.finder.loaded
        fixed_files += [f for f, path in zip(package_fixed, texts, strict=True) if path in loaded]
    built = _prepare(Built(fixed.model, original.args, original.kwargs), device)
    return fixed_spec, built, fixed_files, window


def _kept(keep, refused: list, finding) -> bool:
    """`keep(finding)`, the findings it refuses added to `refused`."""
    if keep(finding):
        return True
    refused.append(finding)
    return False


def verify(
    spec: str,
    catalog: Catalog,
    config: Config,
    *,
    backends: tuple[str, ...] = ("eager", "fuselint", "inductor"),
    device: str | None = None,
    unsafe: bool = False,
    with_fixed: bool = True,
    predict_on=None,
    seed: int = 0,
    keep=None,
) -> Verification:
    """Run the whole comparison for one entry; raises EntryError when it cannot be built.
    `keep`: which fixes the fixed variant applies (a proof's `keeps`), None for all."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if "eager" not in backends:
        backends = ("eager", *backends)
    entry = load_entry(spec)
    torch.manual_seed(seed)
    # The functions the model runs, as the proof's trials see them: while it is built (a package
    # helper its __init__ calls) and in its forward (`package_sources`).
    ran: set[tuple[str, str]] = set()
    with functions_run(ran):
        original = _prepare(build(entry), device)
    try:
        with torch.no_grad():  # the package files the model runs are fixed too
            reference, modules = package_sources(original, _entry_root(entry), ran)
    except Exception as exc:  # the user's model fails on its own: nothing to compare against
        raise EntryError(f"entry {spec!r}: running the model failed: {_one_line(exc)}") from exc
    variants = [("original", original)]
    specs = [("original", spec)]
    fixed_files: list[FixedFile] = []
    notes: list[str] = []
    window: _PackageWindow | None = None
    with contextlib.ExitStack() as stack:
        if with_fixed and ":" in spec and Path(spec.rpartition(":")[0]).suffix == ".py":
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fuselint-verify-")))
            # The fixed copy's modules (its entry's, which holds the fixed package's) go with it.
            stack.callback(_forget_modules_under, tmp.resolve())
            # The fixed copy stays importable, under the original's module names, until the end.
            stack.enter_context(_isolated_modules(_entry_root(entry)))
            fixing = _Fixing(catalog, config, unsafe, keep, modules, ran)
            made = _build_fixed(spec, entry, original, tmp, fixing, device, seed, notes, stack)
            if made:
                fixed_spec, fixed, fixed_files, window = made
                variants.append(("fixed", fixed))
                specs.append(("fixed", fixed_spec))
        rows = _run_backends(variants, backends, device, reference, window)
        # Predictions come after every timing: capturing resets dynamo, dropping compiled code.
        # The fixed source is predicted while its copy is importable under the original's names,
        # the original once they are back.
        fixed_prediction = (
            _predict(specs[1][1], "fixed", predict_on) if predict_on is not None and len(specs) > 1 else None
        )
    original_prediction = _predict(spec, "original", predict_on) if predict_on is not None else None
    predictions = [p for p in (original_prediction, fixed_prediction) if p]
    return Verification(
        spec, device, tuple(rows), tuple(fixed_files), tuple(predictions), tuple(notes), _platform(device)
    )


def _platform(device: str) -> str:
    """ "NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0": a timing means little without its machine."""
    parts = [torch.cuda.get_device_name(device)] if device.startswith("cuda") else []
    parts.append(f"torch {torch.__version__}")
    try:
        import triton

        parts.append(f"triton {triton.__version__}")
    except ImportError:
        pass
    return ", ".join(parts)


def dump_dir(path: str | None) -> None:
    """Ask the backend to write every generated kernel's source into `path`."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        os.environ["FUSELINT_DUMP_DIR"] = str(Path(path).resolve())
