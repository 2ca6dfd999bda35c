"""verify: the original and the fixed source, each under eager and the chosen backends.

For every (variant, backend) pair: compile, check the outputs against eager on the
original source, and time the call. The plan's prediction for the same model sits beside
the measurement, so a user sees whether fuselint's advice held on their GPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._pytree import tree_map

from fuselint.catalog import Catalog
from fuselint.config import Config
from fuselint.graph.entry import Built, Entry, EntryError, build, load_entry
from fuselint.verify.numerics import Comparison, compare
from fuselint.verify.timing import measure
from fuselint.verify.variants import FixedFile, copy_with_fixes

BACKENDS = ("eager", "fuselint", "inductor", "inductor-max-autotune", "cudagraphs")


@dataclass(frozen=True)
class Row:
    variant: str  # "original" | "fixed"
    backend: str
    ms: float | None
    compile_s: float | None
    check: Comparison | None
    error: str = ""


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

    @property
    def ok(self) -> bool:
        return all(r.check is not None and r.check.ok for r in self.rows if not r.error)

    def row(self, variant: str, backend: str) -> Row | None:
        return next((r for r in self.rows if r.variant == variant and r.backend == backend), None)


def _entry_root(entry: Entry) -> Path:
    """The folder whose Python files make up the model's source (copied for the fixed variant)."""
    return Path(entry.path).resolve().parent


@contextlib.contextmanager
def _isolated_modules(root: Path) -> Iterator[None]:
    """Import a copy of `root` without the originals (same module names) shadowing it."""
    saved = {
        name: mod
        for name, mod in sys.modules.items()
        if getattr(mod, "__file__", None) and Path(mod.__file__).resolve().is_relative_to(root)
    }
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n, m in sys.modules.items() if n in saved or _under(m, root)]:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def _under(module, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    return bool(file) and Path(file).resolve().is_relative_to(root)


def _to(value, device: str):
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def _prepare(built: Built, device: str) -> Built:
    model = built.model
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return Built(model, _to(built.args, device), _to(built.kwargs, device))


def _compiled(model, backend: str):
    if backend == "eager":
        return model
    if backend == "inductor-max-autotune":
        return torch.compile(model, mode="max-autotune-no-cudagraphs")
    if backend == "fuselint":
        import fuselint.backend  # noqa: F401  (registers the backend name)
    return torch.compile(model, backend=backend)


def _run_variant(variant: str, built: Built, backends: tuple[str, ...], device: str, reference) -> list[Row]:
    rows = []
    for backend in backends:
        torch._dynamo.reset()
        try:
            fn = _compiled(built.model, backend)
            with torch.no_grad():
                start = time.perf_counter()
                out = fn(*built.args, **built.kwargs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                compile_s = time.perf_counter() - start
                check = compare(out, reference)
                timing = measure(lambda fn=fn: fn(*built.args, **built.kwargs), device)
            rows.append(
                Row(variant, backend, timing.median_ms, compile_s if backend != "eager" else None, check)
            )
        except Exception as exc:  # a backend that fails is reported, not fatal
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            rows.append(Row(variant, backend, None, None, None, f"{type(exc).__name__}: {first}"[:300]))
    return rows


def _predict(spec: str, variant: str, device_table) -> Prediction | None:
    from fuselint.fusion.model import analyse
    from fuselint.graph.capture import capture

    try:
        analysis = analyse(capture(load_entry(spec)), device_table)
    except EntryError:
        return None
    c = analysis.cost
    return Prediction(variant, c.eager.time_us, c.fused.time_us, c.eager.launches, c.fused.launches)


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
) -> Verification:
    """Run the whole comparison for one entry; raises EntryError when it cannot be built."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if "eager" not in backends:
        backends = ("eager", *backends)
    entry = load_entry(spec)
    torch.manual_seed(seed)
    original = _prepare(build(entry), device)
    with torch.no_grad():
        reference = original.model(*original.args, **original.kwargs)
    rows = _run_variant("original", original, backends, device, reference)
    predictions = []
    if predict_on is not None:
        p = _predict(spec, "original", predict_on)
        if p:
            predictions.append(p)

    fixed_files: list[FixedFile] = []
    notes = []
    if with_fixed and ":" in spec and Path(spec.rpartition(":")[0]).suffix == ".py":
        root = _entry_root(entry)
        with tempfile.TemporaryDirectory(prefix="fuselint-verify-") as tmp:
            fixed_files = copy_with_fixes(root, Path(tmp), catalog, config, unsafe=unsafe)
            if fixed_files:
                target, _, factory = spec.rpartition(":")
                fixed_spec = f"{Path(tmp) / Path(target).resolve().relative_to(root)}:{factory}"
                with _isolated_modules(root):
                    torch.manual_seed(seed)
                    fixed = build(load_entry(fixed_spec))
                    if isinstance(original.model, torch.nn.Module) and isinstance(
                        fixed.model, torch.nn.Module
                    ):
                        # Same weights as the original: the fix rewrites code, not parameters.
                        try:
                            fixed.model.load_state_dict(original.model.state_dict())
                        except RuntimeError:
                            notes.append("the fixed model's parameters differ; both were built from one seed")
                    # Report the fixes in files the model really runs, not every file copied.
                    used = {
                        Path(m.__file__).resolve().relative_to(Path(tmp).resolve()).as_posix()
                        for m in list(sys.modules.values())
                        if _under(m, Path(tmp).resolve())
                    }
                    fixed_files = [f for f in fixed_files if Path(f.path).as_posix() in used]
                    fixed = Built(fixed.model, original.args, original.kwargs)
                    fixed = _prepare(fixed, device)
                    rows += _run_variant("fixed", fixed, backends, device, reference)
                    if predict_on is not None:
                        p = _predict(fixed_spec, "fixed", predict_on)
                        if p:
                            predictions.append(p)
            else:
                notes.append("no fix applies to the entry's source: only the original was run")
    return Verification(spec, device, tuple(rows), tuple(fixed_files), tuple(predictions), tuple(notes))


def dump_dir(path: str | None) -> None:
    """Ask the backend to write every generated kernel's source into `path`."""
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        os.environ["FUSELINT_DUMP_DIR"] = str(Path(path).resolve())
