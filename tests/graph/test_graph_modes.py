"""Meta runs that go to the end with the graphs of a CPU run, and the traced mode said plainly
when it is not the mode the factory returned."""

from __future__ import annotations

from collections import Counter

import pytest


def _ops(cap) -> Counter:
    return Counter(d["op"] for g in cap.graphs for _, d in g.dag.nodes(data=True))


def _shape(cap) -> list[tuple[list[str], int]]:
    return [([d["op"] for _, d in g.dag.nodes(data=True)], g.dag.number_of_edges()) for g in cap.graphs]


@pytest.mark.parametrize("fixture", ["attention_masks.py", "transformer_block.py"])
def test_meta_lowers_attention_as_a_real_device_does(captured, fixture):
    cpu, meta = captured(fixture, device="cpu"), captured(fixture, device="meta")
    assert _shape(meta) == _shape(cpu)
    assert "aten.bmm.default" not in _ops(meta)  # not SDPA's math path


def test_meta_runs_a_kv_cache_to_the_end_with_the_graphs_of_a_cpu_run(captured):
    cpu, meta = captured("kv_cache.py", device="cpu"), captured("kv_cache.py", device="meta")
    assert meta.device == "meta"
    assert [g.dag.number_of_nodes() for g in meta.graphs] == [g.dag.number_of_nodes() for g in cpu.graphs]
    assert _ops(meta) == _ops(cpu)
    assert meta.breaks == cpu.breaks == ()


def test_a_train_mode_factory_traced_for_inference_says_so(captured):
    cap = captured("dropout_mlp.py")
    assert cap.factory_train is True and cap.train is False
    assert "train mode; traced in eval mode" in cap.mode_note and "--train" in cap.mode_note
    assert not any("dropout" in op or "bernoulli" in op for op in _ops(cap))


def test_the_factorys_own_mode_needs_no_note(captured):
    assert captured("dropout_mlp.py", factory="inference").mode_note == ""
    assert captured("dropout_mlp.py", train=True).mode_note == ""


def test_train_flag_over_an_eval_factory_says_so(captured):
    cap = captured("dropout_mlp.py", factory="inference", train=True)
    assert "eval mode; traced in train mode, as --train asks" in cap.mode_note
