"""Entries: file and module specs, and one clear error type for everything that goes wrong."""

from __future__ import annotations

import textwrap

import pytest
import torch

from fuselint.graph.entry import EntryError, build, load_entry


def test_file_entry_builds_model_and_args(trace_fixtures, fixture_entry):
    entry = load_entry(fixture_entry("item_branch.py"))
    built = build(entry)
    assert isinstance(built.model, torch.nn.Module)
    assert built.args[0].shape == (8, 32)
    assert entry.path == str(trace_fixtures / "item_branch.py")


def test_function_entry_with_kwargs(fixture_entry):
    built = build(load_entry(fixture_entry("functional.py")))
    assert callable(built.model) and not isinstance(built.model, torch.nn.Module)
    assert set(built.kwargs) == {"residual"}


def test_module_entry(tmp_path, monkeypatch):
    (tmp_path / "tinymodels").mkdir()
    (tmp_path / "tinymodels" / "__init__.py").write_text("")
    (tmp_path / "tinymodels" / "mlp.py").write_text(
        textwrap.dedent(
            """
            import torch
            def make():
                return torch.nn.Linear(3, 3), (torch.randn(2, 3),)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    built = build(load_entry("tinymodels.mlp:make"))
    assert isinstance(built.model, torch.nn.Linear)


def test_factory_can_ask_for_meta_device(fixture_entry):
    assert load_entry(fixture_entry("transformer_stack.py", "big")).device == "meta"
    assert load_entry(fixture_entry("transformer_stack.py")).device is None


@pytest.mark.parametrize(
    "spec, says",
    [
        ("no/such/file.py:entry", "does not exist"),
        ("{fixtures}/item_branch.py:nope", "no factory named 'nope'"),
        ("no_such_module_xyz:entry", "cannot import module"),
        ("justaname", "must look like"),
    ],
)
def test_load_errors_are_one_line(spec, says, trace_fixtures):
    with pytest.raises(EntryError) as info:
        load_entry(spec.format(fixtures=trace_fixtures))
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_factory_errors_are_entry_errors(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(
        "def raises():\n    raise RuntimeError('no weights here\\nsecond line')\n"
        "def wrong():\n    return 3\n"
        "import_error = None\n"
    )
    with pytest.raises(EntryError, match="the factory raised RuntimeError: no weights here$"):
        build(load_entry(f"{path}:raises"))
    with pytest.raises(EntryError, match=r"must return \(model, args\)"):
        build(load_entry(f"{path}:wrong"))
    with pytest.raises(EntryError, match="is not callable"):
        load_entry(f"{path}:import_error")


def test_import_error_in_entry_file(tmp_path):
    path = tmp_path / "bad_import.py"
    path.write_text("import not_a_real_module_xyz\ndef entry():\n    pass\n")
    with pytest.raises(EntryError, match="importing .* failed: ModuleNotFoundError"):
        load_entry(f"{path}:entry")


def test_built_on_moves_the_model_and_every_input_tensor_and_leaves_the_rest():
    import torch

    from fuselint.graph.entry import Built

    model = torch.nn.Linear(2, 2)
    moved = Built(model, (torch.ones(2), 3), {"mask": [torch.zeros(1)], "flag": True}).on("meta")
    assert moved.model.weight.device.type == "meta"
    assert moved.args[0].device.type == "meta" and moved.args[1] == 3
    assert moved.kwargs["mask"][0].device.type == "meta" and moved.kwargs["flag"] is True
    plain = Built(len, (torch.ones(1),)).on("meta")
    assert plain.model is len and plain.args[0].device.type == "meta"
