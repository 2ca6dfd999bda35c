"""Model entries: `path/to/file.py:factory` or `package.module:factory`.

A factory takes no arguments and returns `(model, args)` or `(model, args, kwargs)`,
where model is an nn.Module or any callable. Loading an entry imports only the
entry's own file or module; nothing else of the user's is imported or run.
A factory may ask to be built on the meta device (no weight memory) by carrying the
attribute `fuselint_device = "meta"`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class EntryError(Exception):
    """An entry that cannot be loaded, built or run; str() is one line for the user, `detail`
    the full story (traceback, torch's own log) for --verbose."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Entry:
    spec: str
    factory: Callable[[], Any]
    # Where the entry lives: user frames in this file or under this folder count as the user's.
    path: str
    device: str | None = None


@dataclass(frozen=True)
class Built:
    """What a factory returned: the model (or callable) and its example inputs."""

    model: Any
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def on(self, device: str) -> Built:
        """The model and every tensor of its inputs moved to `device`: a factory that placed
        them itself (an entry that builds on CUDA when it has one) runs where it is asked to."""
        import torch
        from torch.utils._pytree import tree_map

        def move(value: Any) -> Any:
            return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)

        model = self.model.to(device) if isinstance(self.model, torch.nn.Module) else self.model
        return Built(model, move(self.args), move(self.kwargs))


def _split(spec: str) -> tuple[str, str]:
    target, sep, name = spec.rpartition(":")
    # A bare Windows drive letter ("C:\\x.py") has no factory after its colon.
    if not sep or not name or not target or "/" in name or "\\" in name:
        raise EntryError(f"entry {spec!r} must look like path/to/file.py:factory or package.module:factory")
    return target, name


def _import_file(path: Path, spec: str):
    if not path.is_file():
        raise EntryError(f"entry {spec!r}: file {str(path)!r} does not exist")
    module_name = f"fuselint_entry_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise EntryError(f"entry {spec!r}: cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(module_spec)
    # The module's own folder is importable, as when running `python file.py`.
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise EntryError(f"entry {spec!r}: importing {str(path)!r} failed: {_one_line(exc)}") from exc
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def load_entry(spec: str) -> Entry:
    """Import the entry's file or module and find its factory (does not call it)."""
    target, name = _split(spec)
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = _import_file(Path(target), spec)
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise EntryError(f"entry {spec!r}: cannot import module {target!r}: {_one_line(exc)}") from exc
    if not hasattr(module, name):
        raise EntryError(f"entry {spec!r}: {target!r} has no factory named {name!r}")
    factory = getattr(module, name)
    if not callable(factory):
        raise EntryError(f"entry {spec!r}: {name!r} is not callable")
    path = str(Path(getattr(module, "__file__", "") or target).resolve())
    return Entry(spec=spec, factory=factory, path=path, device=getattr(factory, "fuselint_device", None))


def build(entry: Entry) -> Built:
    """Call the factory and check the shape of what it returned."""
    try:
        made = entry.factory()
    except Exception as exc:
        raise EntryError(f"entry {entry.spec!r}: the factory raised {_one_line(exc)}") from exc
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise EntryError(
            f"entry {entry.spec!r}: the factory must return (model, args) or (model, args, kwargs), "
            f"got {type(made).__name__}"
        )
    model, args, *rest = made
    kwargs = rest[0] if rest else {}
    if not callable(model):
        raise EntryError(f"entry {entry.spec!r}: the model {type(model).__name__} is not callable")
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if not isinstance(kwargs, dict):
        raise EntryError(f"entry {entry.spec!r}: kwargs must be a dict, got {type(kwargs).__name__}")
    return Built(model=model, args=tuple(args), kwargs=dict(kwargs))
