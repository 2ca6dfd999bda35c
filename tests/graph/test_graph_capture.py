"""Capture: breaks at the user's line with dynamo's reason and id, call counts, modes, devices."""

from __future__ import annotations

import logging

import pytest
import torch
import torch._logging._internal as torch_logs

from fuselint.graph.capture import capture
from fuselint.graph.entry import EntryError, load_entry


def _only_break(cap):
    assert len(cap.breaks) == 1, cap.breaks
    return cap.breaks[0]


def test_print_breaks_at_its_line(captured, trace_fixtures, line_of):
    cap = captured("print_in_forward.py")
    brk = _only_break(cap)
    assert (brk.file, brk.line) == (
        str(trace_fixtures / "print_in_forward.py"),
        line_of("print_in_forward.py", "print("),
    )
    assert brk.gb_id == "gb0059"
    assert "print" in brk.explanation
    assert brk.url.endswith("/gb/gb0059.html")
    # The model's own output is kept, not written to fuselint's stdout.
    assert "hidden torch.Size([4, 128])" in cap.stdout
    assert [g.calls for g in cap.graphs] == [1, 1]


def test_item_breaks_at_its_line(captured, line_of):
    brk = _only_break(captured("item_branch.py"))
    assert brk.line == line_of("item_branch.py", "peak = h.abs().max().item()")
    assert brk.gb_id == "gb0124"
    assert "Tensor.item()" in brk.reason
    assert brk.explored == ""  # real values: the run took the branch the data chose


def test_data_dependent_if_breaks_at_the_if(captured, line_of):
    cap = captured("data_dependent_if.py")
    brk = _only_break(cap)
    assert brk.line == line_of("data_dependent_if.py", "if h.mean() > 0")
    assert brk.gb_id == "gb0170"
    assert brk.reason == "Data-dependent branching"
    assert brk.after_graph == cap.graphs[0].name


def test_deepcopy_break_reports_user_line_not_copy_py(captured, trace_fixtures, line_of):
    brk = _only_break(captured("deepcopy_forward.py"))
    assert brk.file == str(trace_fixtures / "deepcopy_forward.py")
    assert brk.line == line_of("deepcopy_forward.py", "copy.deepcopy(")
    assert brk.dynamo_file.endswith("copy.py")  # where dynamo itself said it broke
    assert "deepcopy" in brk.reason


def test_break_inside_loop_weights_graphs_by_calls(captured, line_of):
    cap = captured("loop_break.py")
    brk = _only_break(cap)
    assert brk.line == line_of("loop_break.py", "if h.abs().max() > 1e4")
    # The loop frame falls back to eager; each layer's two graphs run once per layer.
    assert brk.skipped_frame
    assert brk.after_graph == "graph0"  # the layer's first graph ends at the break
    assert [g.calls for g in cap.graphs] == [4, 4]
    # Each layer module is its own frame: its matmul knows the layer's Linear.
    first = cap.graphs[0]
    assert [first.dag.nodes[n]["module"] for n in first.ops("matmul")] == ["fc"]


def test_clean_block_is_one_graph(captured, line_of):
    cap = captured("transformer_block.py")
    assert cap.breaks == ()
    assert len(cap.graphs) == 1 and cap.graphs[0].calls == 1
    kinds = {d["kind"] for _, d in cap.graphs[0].dag.nodes(data=True)}
    assert {"matmul", "pointwise", "reduction"} <= kinds
    # ATen nodes keep the user's source lines.
    lines = {d["line"] for _, d in cap.graphs[0].dag.nodes(data=True) if d["kind"] == "matmul"}
    assert line_of("transformer_block.py", "self.qkv(self.norm1(x))") in lines


def test_plain_function_with_kwargs(captured):
    cap = captured("functional.py")
    assert cap.breaks == ()
    assert len(cap.graphs[0].ops("pointwise")) >= 8  # the hand-written tanh-GELU, op by op


def test_capture_restores_logging_and_prints_nothing(capfd, fixture_entry):
    watched = [
        "torch._dynamo",
        "torch._dynamo.symbolic_convert.__graph_breaks",
        "torch._dynamo.convert_frame.__graph_breaks",
    ]
    user_handler = logging.NullHandler()
    logging.getLogger("torch._dynamo").addHandler(user_handler)

    def snapshot():
        state = torch_logs._get_log_state()
        loggers = {
            n: (lg.level, lg.propagate, tuple(lg.handlers)) for n in watched for lg in [logging.getLogger(n)]
        }
        return state, set(state.artifact_names), dict(state.log_qname_to_level), loggers

    try:
        before = snapshot()
        cap = capture(load_entry(fixture_entry("data_dependent_if.py")))
        assert cap.breaks
        after = snapshot()
    finally:
        logging.getLogger("torch._dynamo").removeHandler(user_handler)
    assert before[0] is after[0]
    assert before[1:] == after[1:]
    assert "graph_breaks" not in after[1]
    out, err = capfd.readouterr()
    assert "Graph break" not in out + err


def test_meta_device_explores_one_branch(captured, line_of):
    cap = captured("item_branch.py", device="meta")
    assert cap.device == "meta"
    brk = _only_break(cap)
    assert brk.explored == "one branch"
    assert brk.line == line_of("item_branch.py", "peak = h.abs().max().item()")
    # The stand-in (1.0) does not exceed 1.0: the run went on past the branch to the end
    # (a run that stops early raises, see test_graph_failures.py).
    assert len(cap.graphs) == 2
    assert cap.graphs[1].ops("pointwise")


def test_meta_data_dependent_if(captured):
    cap = captured("data_dependent_if.py", device="meta")
    assert _only_break(cap).explored == "one branch"
    assert [g.calls for g in cap.graphs] == [1, 1]


def test_meta_stack_needs_no_weight_memory(captured):
    cap = captured("transformer_stack.py", device="meta")
    g = cap.graphs[0]
    assert cap.breaks == () and len(cap.graphs) == 1
    # Shapes are real even though no value was computed.
    assert any(d["shape"] == (2, 16, 172) for _, d in g.dag.nodes(data=True))


def test_training_adds_backward_graphs(captured):
    cap = captured("transformer_block.py", train=True)
    names = [g.name for g in cap.graphs]
    assert names == ["graph0", "graph0_bw"]
    assert [g.calls for g in cap.graphs] == [1, 1]
    assert cap.train
    # Backward has at least as many matmuls as forward (grad of input and of weight).
    fw, bw = cap.graphs
    assert len(bw.ops("matmul")) >= len(fw.ops("matmul"))


def test_inference_has_no_backward(captured):
    assert all(not g.name.endswith("_bw") for g in captured("transformer_block.py").graphs)


def test_training_through_a_break(captured):
    cap = captured("item_branch.py", train=True)
    assert [g.name for g in cap.graphs] == ["graph0", "graph0_bw", "graph1", "graph1_bw"]
    assert _only_break(cap).gb_id == "gb0124"


def test_model_that_fails_to_run_is_an_entry_error(tmp_path):
    path = tmp_path / "mismatch.py"
    path.write_text("import torch\ndef entry():\n    return torch.nn.Linear(3, 3), (torch.randn(2, 5),)\n")
    with pytest.raises(EntryError, match="running the model failed"):
        capture(load_entry(f"{path}:entry"))
    torch._dynamo.reset()


def test_conv_net_with_max_pool(captured):
    cap = captured("conv_stem.py")
    assert cap.breaks == () and len(cap.graphs) == 1
    graph = cap.graphs[0]
    assert len(graph.ops("conv")) == 4
    assert any("max_pool" in graph.dag.nodes[n]["op"] for n in graph.ops())


def test_fusion_graph_keeps_its_given_name():
    import torch

    from fuselint.graph.fusion_graph import FusionGraph

    gm = torch.fx.symbolic_trace(lambda x: torch.ops.aten.cos.default(x))
    for node in gm.graph.nodes:
        node.meta["val"] = torch.empty(4)
    assert FusionGraph.from_fx(gm, name="graph7").name == "graph7"


def test_graph_that_cannot_be_lowered_is_listed_and_the_run_goes_on(monkeypatch, fixture_entry, line_of):
    import fuselint.graph.capture as capture_module

    def refuse(*args, **kwargs):
        raise RuntimeError("no decomposition for this op\nmore")

    monkeypatch.setattr(capture_module, "aot_module_simplified", refuse)
    cap = capture(load_entry(fixture_entry("item_branch.py")))
    assert cap.graphs == ()
    assert cap.unlowered == (
        "graph0: RuntimeError: no decomposition for this op",
        "graph1: RuntimeError: no decomposition for this op",
    )
    assert _only_break(cap).line == line_of("item_branch.py", "peak = h.abs().max().item()")


def test_capture_entries_in_order(fixture_entry):
    from fuselint.graph.capture import capture_entries

    specs = [fixture_entry("functional.py"), fixture_entry("print_in_forward.py")]
    caps = capture_entries(specs)
    assert [c.entry for c in caps] == specs
    assert [len(c.breaks) for c in caps] == [0, 1]
    # Several entries: graph names carry the entry, so graph0 of one is not graph0 of another.
    assert [g.name for g in caps[0].graphs] == ["functional:graph0"]
    assert [g.name for g in caps[1].graphs] == ["print_in_forward:graph0", "print_in_forward:graph1"]
    assert caps[1].breaks[0].after_graph == "print_in_forward:graph0"
    with pytest.raises(EntryError, match="no factory named 'missing'"):
        capture_entries([fixture_entry("functional.py", "missing")])


def test_entry_prefixes_are_distinct():
    from fuselint.graph.capture import entry_prefixes

    assert entry_prefixes(["a/model.py:entry"]) == [""]
    assert entry_prefixes(["a/model.py:entry", "b/model.py:entry", "pkg.mod:big"]) == [
        "model#1:",
        "model#2:",
        "mod.big:",
    ]


def test_values_living_across_a_break_are_linked_to_the_graph_that_resumes(captured):
    # h = gelu(up(x)) leaves graph0 at the print and enters graph1, whose 3rd input it is.
    from fuselint.graph.capture import GraphLink

    assert captured("print_in_forward.py").links == (GraphLink("graph0", 0, "graph1", 2),)
    # a loop around a break also feeds graph1's result back into the next iteration's graph0
    links = captured("loop_break.py").links
    assert GraphLink("graph0", 1, "graph1", 1) in links and GraphLink("graph1", 0, "graph0", 2) in links


def test_an_inference_plan_reads_the_weights_layout_copies_as_made_once(captured):
    # The backend keeps a weight's channels_last copy between calls at inference
    # (backend.kept_layouts); the prediction plans the same graph: those copies are no kernels.
    from fuselint.fusion.plan import GraphFacts
    from fuselint.graph.layout import KEPT, kept_layout_copies

    def copies(graph):  # the shape of each channels_last copy's source -> whether it is kept
        return {
            tuple(graph.dag.nodes[n]["fx"].args[0].meta["val"].shape): bool(
                graph.dag.nodes[n]["fx"].meta.get(KEPT)
            )
            for n in graph.ops()
            if graph.dag.nodes[n]["op"] == "aten.clone.default"
            and graph.dag.nodes[n]["fx"].kwargs.get("memory_format") is torch.channels_last
        }

    inference = captured("conv_stem.py").graphs[0]
    # the 7x7 stem's and the 3x3's weights kept (1x1 weights need no copy); the image is copied per call
    assert copies(inference) == {(16, 3, 7, 7): True, (8, 8, 3, 3): True, (2, 3, 32, 32): False}
    facts = GraphFacts(inference)
    kept = [n for n in inference.ops() if inference.dag.nodes[n]["fx"].meta.get(KEPT)]
    assert len(kept) == 2 and not set(kept) & set(facts.kind)
    # only a parameter's or buffer's copy is kept: the same graph with no static input keeps none
    assert kept_layout_copies(inference.gm, frozenset()) == []


WRITTEN_WEIGHT = """
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(16, 3, 7, 7))
        self.b = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))

    def forward(self, x):
        y = F.conv2d(x, self.w, stride=2, padding=3)
        self.w.mul_(1.0)  # a buffer the forward updates in place
        return self.b(y).mean(dim=(2, 3))


def entry():
    return Net().eval(), (torch.randn(2, 3, 32, 32),)
"""


def test_a_buffer_the_inference_graph_writes_has_its_layout_copy_planned_per_call(tmp_path):
    # The backend compiles with the buffer's write in the graph (keep_inference_input_mutations)
    # and copies a written buffer every call; capture's graph returns the write instead, so the
    # written buffer's copy must not be read as kept there either.
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry
    from fuselint.graph.layout import KEPT

    path = tmp_path / "written_weight.py"
    path.write_text(WRITTEN_WEIGHT)
    (graph,) = capture(load_entry(f"{path}:entry")).graphs
    kept = {
        tuple(n.args[0].meta["val"].shape): bool(n.meta.get(KEPT))
        for n in graph.gm.graph.nodes
        if n.op == "call_function"
        and n.target is torch.ops.aten.clone.default
        and n.kwargs.get("memory_format")
    }
    assert kept == {(2, 3, 32, 32): False, (16, 3, 7, 7): False, (8, 16, 3, 3): True, (8, 8, 3, 3): True}


SIDE_BRANCH = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x):
        side = self.b(x)
        print("a break")
        return self.a(x), side.detach()


def entry():
    return Net(), (torch.randn(2, 4, 8, 8),)
"""


def test_a_training_forward_whose_backward_never_runs_is_planned_for_training(tmp_path):
    # The first graph (conv b) is compiled for training, but no loss reaches its output, so its
    # backward never runs in the capture: it is still a training graph, whose weights change every
    # step, and its weight copies are made every call.
    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry
    from fuselint.graph.layout import KEPT

    (tmp_path / "side.py").write_text(SIDE_BRANCH)
    spec = f"{tmp_path / 'side.py'}:entry"

    def kept(cap):
        return [
            sum(bool(g.dag.nodes[n]["fx"].meta.get(KEPT)) for n in g.ops())
            for g in cap.graphs
            if not g.name.endswith("_bw")
        ]

    assert kept(capture(load_entry(spec))) == [1, 1]  # inference: each conv's 3x3 weight copy kept
    assert kept(capture(load_entry(spec), train=True)) == [0, 0]
    torch._dynamo.reset()
