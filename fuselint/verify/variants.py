"""The fixed variant of a model: a copy of its source folder with fuselint's fixes applied.

verify compares the source as the user wrote it with the source `fuselint check --fix`
would leave, so the copy is made with the same catalog, settings and fix engine.

A model built from an installed package (a Hugging Face or timm model the entry only creates)
runs that package's code, not the entry's: the files that define the model's module classes
(`package_files`) are fixed too, as texts that the fixed variant imports in their place
(`fix_package_files`; the installed files are never written).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fuselint.catalog import Catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text, line_length_for
from fuselint.source.lint import discover, lint_text, read_source
from fuselint.verify.prove_child import watch_functions


@dataclass(frozen=True)
class FixedFile:
    path: str  # relative to the copied folder
    fixes: int
    codes: tuple[str, ...]


def copy_with_fixes(
    src: Path, dst: Path, catalog: Catalog, config: Config, *, unsafe: bool, keep=None
) -> list[FixedFile]:
    """Copy every Python file under `src` to `dst`, fixing what fuselint can fix (only the
    fixes `keep` accepts, when given: those a proof kept)."""
    fixed = []
    dst.mkdir(parents=True, exist_ok=True)
    for path in discover([str(src)], config):
        rel = path.relative_to(src)
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text, encoding, error = read_source(path)
        if error is not None:
            shutil.copy2(path, target)
            continue
        result = _fixed(path, text, catalog, config, unsafe, keep)
        target.write_text(result.text, encoding=encoding, newline="")
        if result.applied:
            fixed.append(_fixed_file(str(rel), result))
    return fixed


def _fixed(
    path: Path,
    text: str,
    catalog: Catalog,
    config: Config,
    unsafe: bool,
    keep,
    ran: set[tuple[str, str]] | None = None,
    *,
    never_ran: bool = False,
):
    """`text` of `path` as `check --fix` leaves it (only the fixes `keep` accepts, when given;
    with `ran`, only those outside every function or in one that ran, or with `never_ran` only
    those in a function that never ran)."""
    from fuselint.verify.prove import only_kept

    def lint(t: str, p: str = str(path)) -> list:
        found = only_kept(lint_text(p, t, catalog, config), keep)
        if ran is None:
            return found
        runs = _runs(str(Path(p).resolve()), t, ran)
        return only_kept(found, (lambda f: not runs(f)) if never_ran else runs)

    return fix_text(text, lint, unsafe=unsafe, line_length=line_length_for(path))


def _runs(path: str, text: str, ran: set[tuple[str, str]]) -> Callable[[object], bool]:
    """Whether a finding of `text` (the file `path`) lies outside every function or inside one
    that ran (the innermost function around its line)."""
    from fuselint.verify.prove import function_spans

    spans = function_spans(text)

    def runs(finding) -> bool:
        line = finding.span.line
        function = max((s for s in spans if s[0] <= line <= s[1]), default=(0, 0, ""))[2]
        return not function or (path, function) in ran

    return runs


def _fixed_file(shown: str, result) -> FixedFile:
    # As `check --fix` counts: the findings a user was shown that the fixes removed.
    return FixedFile(shown, result.fixed, tuple(sorted({f.code for f in result.applied})))


def package_root(path: Path) -> Path | None:
    """The top-level package folder that `path` (a module file) is part of: the highest folder
    of the chain of folders with an `__init__.py` above it; None for a file outside a package."""
    top = None
    folder = path.parent
    while (folder / "__init__.py").is_file():
        top = folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return top


def package_files(model: object, root: Path) -> dict[Path, str]:
    """{file: module name} of the installed packages' modules that define the classes `model`
    is made of (its own and each submodule's, and the classes they inherit from: a forward may
    call a base class's method, BERT's `get_extended_attention_mask`), outside the entry's folder
    `root` and outside torch. Only modules of a package (a dotted name: `timm.models.resnet`, a
    namespace package's too)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return {}
    root, skip = root.resolve(), _skipped_folders()
    found = {}
    classes = {cls for module in model.modules() for cls in type(module).__mro__}
    for name in {getattr(cls, "__module__", None) for cls in classes}:
        name = name if isinstance(name, str) else None
        path = _package_module(getattr(sys.modules.get(name or ""), "__file__", None), name, root, skip)
        if path is not None:
            found[path] = name
    return dict(sorted(found.items()))


def _package_module(file: str | None, name: str | None, root: Path, skip) -> Path | None:
    """`file` when it is the source of a package's module (a dotted `name`) outside `root` and
    outside the folders `skip` (`_skipped_folders`) leaves out."""
    if not file or not file.endswith(".py") or "." not in (name or ""):
        return None
    path = Path(file).resolve()
    folders, stdlib, site = skip
    if path.is_relative_to(root) or any(path.is_relative_to(f) for f in folders):
        return None
    in_site = any(path.is_relative_to(s) for s in site)
    return None if not in_site and any(path.is_relative_to(s) for s in stdlib) else path


def _skipped_folders() -> tuple[tuple[Path, ...], tuple[Path, ...], tuple[Path, ...]]:
    """(torch's and fuselint's folders, the standard library's, the site-packages folders): not
    the model's package are the first two, but a venv's or a system Python's site-packages sits
    inside its standard library's folder (`lib/python3.11/site-packages`), and is."""
    import site
    import sysconfig

    import torch

    import fuselint

    def resolved(folders) -> tuple[Path, ...]:
        return tuple(sorted({Path(f).resolve() for f in folders if f}))

    paths = sysconfig.get_paths()
    sites = [paths.get("purelib"), paths.get("platlib"), *site.getsitepackages(), site.getusersitepackages()]
    return (
        resolved([Path(torch.__file__).parent, Path(fuselint.__file__).parent]),
        resolved([paths.get("stdlib"), paths.get("platstdlib")]),
        resolved(sites),
    )


def forward_files(
    call: Callable[[], object], root: Path, functions: set[tuple[str, str]] | None = None
) -> tuple[object, dict[Path, str]]:
    """Run `call` (the model's forward on its inputs) and return (its result, {file: module name}
    of the installed packages' modules whose Python functions ran meanwhile), as `package_files`
    picks them: the attention and masking functions a transformers model calls, timm's layer helpers.
    `functions`, when given, gets (resolved file, qualified name) of each function that ran there.
    Watched as the proof's trials watch (`prove_child.watch_functions`), in this thread only."""
    names = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            names.setdefault(file, name)
    ran: set[tuple[str, str]] = set()
    with watch_functions(ran):
        result = call()
    root, skip = root.resolve(), _skipped_folders()
    found = {}
    for file in {file for file, _ in ran}:
        path = _package_module(file, names.get(file), root, skip)
        if path is not None:
            found[path] = names[file]
    if functions is not None:
        functions.update(_resolved(ran))
    return result, dict(sorted(found.items()))


@contextlib.contextmanager
def functions_run(functions: set[tuple[str, str]]):
    """Add (resolved file, qualified name) to `functions` for each function that runs meanwhile
    (in this thread): verify watches the model's build with it, as the proof's trials do (a
    package function the model runs only in its `__init__` is code the model runs)."""
    ran: set[tuple[str, str]] = set()
    try:
        with watch_functions(ran):
            yield
    finally:
        functions.update(_resolved(ran))


def _resolved(ran: set[tuple[str, str]]) -> set[tuple[str, str]]:
    files = {file: str(Path(file).resolve()) for file in {file for file, _ in ran}}
    return {(files[file], name) for file, name in ran}


def package_sources(
    built, root: Path, functions: set[tuple[str, str]] | None = None
) -> tuple[object, dict[Path, str]]:
    """Run the built entry's forward once and return (its output, {file: module name} of the
    installed package files the model runs): those of its classes and their bases
    (`package_files`) and those whose functions the forward ran (`forward_files`, which fills
    `functions`)."""
    out, ran = forward_files(lambda: built.model(*built.args, **built.kwargs), root, functions)
    return out, dict(sorted({**package_files(built.model, root), **ran}.items()))


def module_path(path: Path, name: str) -> str:
    """The file of module `name` as a path from its top-level package (`timm/models/resnet.py`)."""
    parts = name.split(".")
    return "/".join(parts if path.name == "__init__.py" else parts[:-1]) + "/" + path.name


def never_run_note(fixes: int, files: list[str]) -> str:
    """verify's one note for the fixes in package code the model never runs (left out, proven
    or not): a package file holds much code one model never runs."""
    return f"{fixes} fix(es) in package code this model never runs left out ({', '.join(files)})"


def fix_package_files(
    files: dict[Path, str],
    catalog: Catalog,
    config: Config,
    *,
    unsafe: bool,
    keep=None,
    ran: set[tuple[str, str]] | None = None,
) -> tuple[dict[str, str], list[FixedFile], list[FixedFile]]:
    """({file: its fixed text}, what was fixed, in the same order, what was left out) for the
    package files (`package_files`) that a fix applies to; a FixedFile's path is `module_path`'s.
    `ran` ((resolved file, qualified name) of the functions the model ran, `forward_files`): a fix
    inside a function that never ran is left out, as the proof leaves it (a package file holds
    much code one model never runs: transformers' activations.py a dozen activations); the third
    list counts those."""
    texts: dict[str, str] = {}
    fixed, unrun = [], []
    for path, name in files.items():
        text, _encoding, error = read_source(path)
        if error is not None:
            continue
        result = _fixed(path, text, catalog, config, unsafe, keep, ran)
        if result.applied:
            texts[str(path)] = result.text
            fixed.append(_fixed_file(module_path(path, name), result))
        if ran is not None:
            left = _fixed(path, text, catalog, config, unsafe, keep, ran, never_ran=True)
            if left.applied:
                unrun.append(_fixed_file(module_path(path, name), left))
    return texts, fixed, unrun
