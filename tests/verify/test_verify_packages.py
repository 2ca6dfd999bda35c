"""verify follows a model into the installed package its classes come from: that package's files
are fixed too, run in place of the installed ones for the fixed variant, and never written."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from cli_runner import run as _run

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.verify.run import verify
from fuselint.verify.variants import module_path, package_files, package_root

NETS = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("net ran")
        return torch.relu(y)


class Unused(torch.nn.Module):
    def forward(self, x):
        print("never")
        return x
"""

ENTRY = """import torch
from fakepkg.nets import Net


def entry():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 4),)
"""


def _verify(spec: str, backends=("eager",), unsafe: bool = False):
    return verify(spec, load_catalog(), Config(), backends=backends, device="cpu", unsafe=unsafe)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package `fakepkg` importable from a site folder, and an entry folder that only builds its model."""
    site = tmp_path / "site"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("")
    (site / "fakepkg" / "nets.py").write_text(NETS)
    project = tmp_path / "project"
    project.mkdir()
    (project / "entry.py").write_text(ENTRY)
    monkeypatch.syspath_prepend(str(site))
    # trial children (the proof) import it too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    for name in ("fakepkg", "fakepkg.nets"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield site, project
    for name in ("fakepkg", "fakepkg.nets"):
        sys.modules.pop(name, None)


def test_the_package_files_are_those_of_the_model_s_classes_outside_torch_and_the_entry(installed):
    site, project = installed
    import fakepkg.nets

    nets = (site / "fakepkg" / "nets.py").resolve()
    assert package_files(fakepkg.nets.Net(), project) == {nets: "fakepkg.nets"}
    assert package_files(fakepkg.nets.Net(), site) == {}  # inside the entry's folder: the folder's own copy
    assert package_files(torch.nn.Linear(2, 2), project) == {}
    assert package_files(lambda x: x, project) == {}
    assert module_path(nets, "fakepkg.nets") == "fakepkg/nets.py"
    assert module_path(site / "fakepkg" / "__init__.py", "fakepkg") == "fakepkg/__init__.py"
    assert package_root(nets) == (site / "fakepkg").resolve() and package_root(project / "entry.py") is None


def test_a_subclass_made_outside_the_package_brings_its_base_class_s_file(installed):
    # the entry's own subclass of a package model runs the base class's forward
    site, project = installed
    import fakepkg.nets

    class Mine(fakepkg.nets.Net):
        pass

    assert list(package_files(Mine(), project)) == [(site / "fakepkg" / "nets.py").resolve()]


def test_verify_fixes_the_package_file_runs_it_and_leaves_the_installed_one(installed):
    site, project = installed
    import fakepkg.nets

    original_module = fakepkg.nets
    before = (site / "fakepkg" / "nets.py").read_text()
    result = _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    assert result.ok, result
    fixed = {f.path: f for f in result.fixed_files}
    assert list(fixed) == ["fakepkg/nets.py"]  # the entry's own file has nothing to fix
    # Net's print; Unused's, never run, is left out
    assert fixed["fakepkg/nets.py"].codes == ("FL103",) and fixed["fakepkg/nets.py"].fixes == 1
    assert result.row("fixed", "eager").check.ok
    assert (site / "fakepkg" / "nets.py").read_text() == before
    # the process has its modules back: the installed package, not the fixed copy
    assert sys.modules["fakepkg.nets"] is original_module
    assert not any(type(f).__name__ == "FixedSources" for f in sys.meta_path)


def test_without_a_proof_the_fixes_in_package_code_the_model_never_runs_are_left_out(installed):
    """`verify --no-prove`: Unused.forward's print is never run by this model, so its fix is
    neither applied nor shown as a fix of the fixed variant (transformers' activations.py holds
    a dozen activations; a model runs one), and a note counts it, as the proof's does."""
    site, project = installed
    result = _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    fixed = {f.path: f for f in result.fixed_files}
    assert fixed["fakepkg/nets.py"].fixes == 1 and fixed["fakepkg/nets.py"].codes == ("FL103",)
    assert "1 fix(es) in package code this model never runs left out (fakepkg/nets.py)" in result.notes


def test_a_package_file_whose_only_fixes_the_model_never_runs_is_not_shown_fixed(installed):
    site, project = installed
    (site / "fakepkg" / "nets.py").write_text(NETS.replace('        print("net ran")\n', ""))
    result = _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    assert result.fixed_files == ()
    assert "1 fix(es) in package code this model never runs left out (fakepkg/nets.py)" in result.notes
    assert result.row("fixed", "eager") is None  # nothing the model runs changed: no fixed variant
    # a fix applies there: the note says it was left out, not that none applies
    assert not any(n.startswith("no fix applies") for n in result.notes)
    assert "every fix found was left out (the notes say why): only the original was run" in result.notes


def test_when_the_proof_kept_no_fix_the_note_does_not_say_that_none_applies(installed):
    _site, project = installed
    spec = f"{project / 'entry.py'}:entry"
    result = verify(
        spec, load_catalog(), Config(), backends=("eager",), device="cpu", unsafe=True, keep=lambda f: False
    )
    assert result.fixed_files == () and result.row("fixed", "eager") is None
    assert not any(n.startswith("no fix applies") for n in result.notes)
    assert "every fix found was left out (the notes say why): only the original was run" in result.notes


BUILT = """import torch


def table(n):
    print("table built")
    return torch.arange(n, dtype=torch.float32)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("t", table(4))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.t


class Other(torch.nn.Module):
    def forward(self, x):
        return x + table(4)
"""


def test_a_fix_in_package_code_the_model_runs_only_while_it_is_built_is_applied(installed):
    """`table` runs in Net.__init__, not in its forward: the model runs it (the proof, which
    watches the build too, proves its fix), so verify without a proof applies its fix too."""
    site, project = installed
    (site / "fakepkg" / "nets.py").write_text(BUILT)
    result = _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    fixed = {f.path: f for f in result.fixed_files}
    assert list(fixed) == ["fakepkg/nets.py"] and fixed["fakepkg/nets.py"].fixes == 1
    assert not any("never runs" in n for n in result.notes), result.notes
    assert result.row("fixed", "eager").check.ok


def test_no_fix_anywhere_says_so(installed):
    site, project = installed
    (site / "fakepkg" / "nets.py").write_text(
        NETS.replace('        print("net ran")\n', "").replace('        print("never")\n', "")
    )
    result = _verify(f"{project / 'entry.py'}:entry")
    assert result.fixed_files == ()
    assert (
        "no fix applies to the entry's source: only the original was run"
        " (nor to the package files its model is made of)" in result.notes
    )


@pytest.mark.slow
def test_verify_proves_the_package_fix_and_counts_fixes_in_code_the_model_never_runs(installed):
    _site, project = installed
    args = ["verify", "--device", "cpu", "--backend", "eager", "--prove-backends", "", "--format", "json"]
    result = _run([*args, "--unsafe-fixes", "--entry", "entry.py:entry"], project)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [f["path"] for f in report["fixed_files"]] == ["fakepkg/nets.py"]
    # Unused.forward's print is never run: one note for it, not a rejection line
    assert "1 fix(es) in package code this model never runs left out (fakepkg/nets.py)" in report["notes"]
    assert not any(n.startswith("fix rejected") for n in report["notes"])
    # nor a line of its own on stderr: the proof's summary is there, the rejection only counted
    assert "fuselint: proved 1 fix(es), rejected 1" in result.stderr
    assert "fix rejected" not in result.stderr


def test_each_variant_reads_its_own_source_and_the_installed_lines_come_back(installed, monkeypatch):
    """The fixed text is what `inspect` (TorchScript) reads for the fixed classes only: the original
    model's classes read the installed file, during verify and after it."""
    import inspect

    import fuselint.verify.run as run

    site, project = installed
    import fakepkg.nets

    installed_forward = inspect.getsource(fakepkg.nets.Net.forward)
    seen = {}
    compiled = run._compiled

    def spy(built, backend):
        original = type(built.model) is fakepkg.nets.Net
        seen["original" if original else "fixed"] = inspect.getsource(type(built.model).forward)
        return compiled(built, backend)

    monkeypatch.setattr(run, "_compiled", spy)
    result = _verify(f"{project / 'entry.py'}:entry", backends=("eager", "torchscript"), unsafe=True)
    assert [f.path for f in result.fixed_files] == ["fakepkg/nets.py"]
    assert seen["original"] == installed_forward
    assert seen["fixed"] != installed_forward and "is_compiling" in seen["fixed"]
    assert inspect.getsource(fakepkg.nets.Net.forward) == installed_forward


def test_the_fixed_copy_s_modules_are_not_left_in_the_process(installed):
    """The fixed entry's module (it imported the fixed package) goes with the fixed copy's folder."""
    site, project = installed
    import fakepkg.nets

    before = set(sys.modules)
    _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    left = [
        name
        for name in set(sys.modules) - before
        if "fuselint-verify-" in str(getattr(sys.modules[name], "__file__", None))
    ]
    assert left == []
    assert all(
        getattr(m, "Net", fakepkg.nets.Net) is fakepkg.nets.Net
        for name, m in list(sys.modules.items())
        if name.startswith("fuselint_entry_") and name not in before
    )


HELPERS = """import math

import torch


def scaled(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
"""

MINE = """import torch
from fakepkg.helpers import scaled


class Mine(torch.nn.Module):
    def forward(self, x):
        return scaled(x) + 1


def entry():
    return Mine(), (torch.randn(2, 4),)
"""


def test_a_package_function_the_forward_calls_is_followed(installed):
    # the user's own model, calling a package's plain function (transformers' attention functions)
    site, project = installed
    (site / "fakepkg" / "helpers.py").write_text(HELPERS)
    (project / "mine.py").write_text(MINE)
    sys.modules.pop("fakepkg.helpers", None)
    from fuselint.graph.entry import build, load_entry
    from fuselint.verify.variants import forward_files

    built = build(load_entry(f"{project / 'mine.py'}:entry"))
    model, args = built.model, built.args
    out, ran = forward_files(lambda: model(*args), project)
    assert torch.allclose(out, torch.nn.functional.gelu(args[0], approximate="tanh") + 1, atol=1e-6)
    assert ran == {(site / "fakepkg" / "helpers.py").resolve(): "fakepkg.helpers"}
    result = _verify(f"{project / 'mine.py'}:entry", unsafe=True)
    # a hand-written tanh GELU in a plain function: FL204's fix (F.gelu), found only by running the forward
    assert [(f.path, f.codes) for f in result.fixed_files] == [("fakepkg/helpers.py", ("FL204",))]
    assert result.ok and result.row("fixed", "eager").check.ok
    sys.modules.pop("fakepkg.helpers", None)


def test_a_site_packages_inside_the_standard_library_s_folder_is_still_a_package_folder(tmp_path):
    # a venv's platstdlib is `venv/lib/python3.11`, and its site-packages sits inside it
    from fuselint.verify.variants import _package_module

    lib = tmp_path / "lib" / "python3.11"
    site = lib / "site-packages"
    skip = ((), (lib.resolve(),), (site.resolve(),))
    installed, stdlib_module = site / "pkg" / "m.py", lib / "json" / "decoder.py"
    assert _package_module(str(installed), "pkg.m", tmp_path / "project", skip) == installed.resolve()
    assert _package_module(str(stdlib_module), "json.decoder", tmp_path / "project", skip) is None
    assert _package_module(str(installed), "m", tmp_path / "project", skip) is None  # not a package's


def test_an_import_hook_the_fixed_copy_installs_goes_with_it(installed):
    # transformers adds a finder to sys.meta_path when imported; the fixed copy's import must not leave one
    site, project = installed
    (site / "fakepkg" / "__init__.py").write_text(
        "import sys\n\n\nclass Hook:\n    def find_spec(self, *a):\n        return None\n\n\nsys.meta_path.append(Hook())\n"
    )
    import fakepkg.nets  # noqa: F401  (the installed package, its hook added once)

    finders = list(sys.meta_path)
    result = _verify(f"{project / 'entry.py'}:entry", unsafe=True)
    assert [f.path for f in result.fixed_files] == ["fakepkg/nets.py"]
    assert sys.meta_path == finders
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "Hook"]


def test_verify_proves_its_fixes_on_the_device_it_measures_on(monkeypatch):
    # Session 26: verify proved on the CPU whatever it measured on, and an entry that builds on
    # CUDA when it can (the suite's) failed its own baseline there.
    from fuselint.cli import _verify_prove_settings

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _verify_prove_settings(None, 60.0, "inductor").device == "cuda"
    assert _verify_prove_settings("cuda:1", 60.0, "inductor").device == "cuda:1"
    assert _verify_prove_settings("cpu", 60.0, "").device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _verify_prove_settings(None, 60.0, "inductor").device == "cpu"
