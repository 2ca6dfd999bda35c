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


def aten_forwards(fn, *args, dynamic: bool = False) -> list[tuple[torch.fx.GraphModule, tuple]]:
    """Forward ATen graphs of fn(*args) lowered with Inductor's decompositions (no grad), each
    with the real arguments it ran with (parameters and buffers are lifted to inputs)."""
    graphs: list[torch.fx.GraphModule] = []
    calls: dict[int, tuple] = {}  # graph index -> the arguments of its first run

    def recorder(gm, example_inputs):
        def keep(fw_gm, _inputs):
            index = len(graphs)
            graphs.append(fw_gm)

            def run(*real):
                calls.setdefault(index, real)
                return fw_gm(*real)

            return run

        return aot_module_simplified(
            gm, example_inputs, fw_compiler=keep, decompositions=select_decomp_table()
        )

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=recorder, dynamic=dynamic)(*args)
    torch._dynamo.reset()
    return [(gm, calls.get(i, ())) for i, gm in enumerate(graphs)]


def aten_graphs(fn, *args, dynamic: bool = False, layout: bool = True) -> list[FusionGraph]:
    """aten_forwards' graphs as FusionGraphs, their convolutions laid out as on a GPU
    (fuselint.graph.layout) unless layout=False."""
    fgs = [
        FusionGraph.from_fx(gpu_conv_layout(gm, inference=True) if layout else gm)
        for gm, _args in aten_forwards(fn, *args, dynamic=dynamic)
    ]
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
