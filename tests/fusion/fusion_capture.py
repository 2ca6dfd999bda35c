"""Capture ATen graphs the way the backend sees them (test helper of the fusion room)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import torch
import torch._inductor.lowering  # max_pool's decomposition looks it up
from torch._functorch.aot_autograd import aot_module_simplified
from torch._inductor.decomposition import select_decomp_table

from fuselint.graph.fusion_graph import FusionGraph
from fuselint.graph.layout import gpu_conv_layout


def aten_graphs(fn, *args, dynamic: bool = False, layout: bool = True) -> list[FusionGraph]:
    """Forward ATen graphs of fn(*args) lowered with Inductor's decompositions (no grad), their
    convolutions laid out as on a GPU (fuselint.graph.layout)."""
    graphs: list[torch.fx.GraphModule] = []

    def recorder(gm, example_inputs):
        def keep(fw_gm, _inputs):
            graphs.append(fw_gm)
            return fw_gm.forward

        return aot_module_simplified(
            gm, example_inputs, fw_compiler=keep, decompositions=select_decomp_table()
        )

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=recorder, dynamic=dynamic)(*args)
    torch._dynamo.reset()
    fgs = [FusionGraph.from_fx(gpu_conv_layout(gm, inference=True) if layout else gm) for gm in graphs]
    for i, fg in enumerate(fgs):
        fg.name = f"graph{i}"  # from_fx's loop over outputs overwrites its `name` argument
    return fgs


def aten_graph(fn, *args, dynamic: bool = False, layout: bool = True) -> FusionGraph:
    (fg,) = aten_graphs(fn, *args, dynamic=dynamic, layout=layout)
    return fg


@functools.cache
def traced_reference(name: str) -> FusionGraph:
    """The ATen graph of a reference in fusion_references, traced once per test session."""
    from fusion_references import REFERENCES

    fn, args = REFERENCES[name][0]()
    return aten_graph(fn, *args)


def entry_of_module(source: str, tmp_path: Path, name: str):
    """Write a rule example (a module with `def entry()`) to tmp_path, import it, call entry.

    Returns (path, callable, args).
    """
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn, args = module.entry()
    return path, fn, args
