"""The eager probe: what a model's eager code passes to SDPA, seen by running it on meta."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fuselint.graph.capture import capture
from fuselint.graph.eager_probe import probe_sdpa
from fuselint.graph.entry import Entry, load_entry


def _probe(trace_fixtures, factory: str):
    return probe_sdpa(load_entry(f"{trace_fixtures / 'tracing_mask.py'}:{factory}"))


def test_probe_records_the_mask_and_causality_eager_passes(trace_fixtures):
    # built only under compile: eager passes is_causal and no mask
    (call,) = _probe(trace_fixtures, "entry_tracing_causal")
    assert (call.query, call.key, call.dtype) == ((2, 4, 32, 16), (2, 4, 32, 16), torch.bfloat16)
    assert call.mask is None and call.is_causal
    # the user's own causal mask is built in eager too
    (call,) = _probe(trace_fixtures, "entry_causal")
    shape, stride, dtype = call.mask
    assert shape == (2, 1, 32, 32) and stride[-1] == 1 and stride[0] == 0 and dtype == torch.bool
    assert not call.is_causal
    # transformers' all-true mask: none in eager
    (call,) = _probe(trace_fixtures, "entry")
    assert call.mask is None and not call.is_causal


def test_capture_hands_the_record_to_every_graph(trace_fixtures):
    cap = capture(load_entry(f"{trace_fixtures / 'tracing_mask.py'}:entry_tracing_causal"), device="meta")
    assert cap.graphs and all(
        g.eager_sdpa == _probe(trace_fixtures, "entry_tracing_causal") for g in cap.graphs
    )


class _ReadsAValue(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a meta tensor holds no value: eager cannot run this on meta
            x = x * 2
        return F.scaled_dot_product_attention(x, x, x)


def test_probe_gives_no_record_where_eager_reads_a_value():
    entry = Entry("t.py:reads", lambda: (_ReadsAValue(), (torch.randn(1, 2, 8, 8),)), "t.py")
    assert probe_sdpa(entry) is None
    # the capture still completes (the cost model then reads eager's calls off the graph)
    cap = capture(entry, device="cpu")
    assert cap.graphs and all(g.eager_sdpa is None for g in cap.graphs)
