"""Nodes whose sizes only the data decides (unbacked symbols) run through ATen, with the reason.

FL106's fix keeps `x[mask]`, `nonzero` and the like in dynamo's graph as custom ops whose fake
gives the data-sized dim an unbacked size; dynamo's own `capture_dynamic_output_shape_ops` does the
same for `nonzero`. The planner prices bytes and the codegen sizes grids from concrete shapes, so
the backend does not generate such a graph: it runs it as ATen (never wrong), and says why.
"""

from __future__ import annotations

import logging

import pytest
import torch
from backend_helpers import flat, needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.cudagraphs import why_not_recordable

pytestmark = needs_interpreter


def kept_columns(edges, x):
    mask = edges[0] != edges[1]
    kept = edges[:, mask]
    return torch.cos(x[kept[0]]).sin() + 1, kept


def _compile(fn, *args):
    torch._dynamo.reset()
    start = history_mark()
    got = flat(torch.compile(fn, backend=fuselint_backend, dynamic=False)(*args))
    return got, reports_since(start)


def test_the_data_sized_nodes_of_a_graph_run_through_aten_with_their_reason(caplog):
    generator = torch.Generator().manual_seed(0)
    edges = torch.randint(0, 8, (2, 40), generator=generator)
    x = torch.randn(8, 16, generator=generator)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True), caplog.at_level(logging.WARNING):
        got, reports = _compile(kept_columns, edges, x)
    want = flat(kept_columns(edges, x))
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    reasons = [why for r in reports for _, why in r.fallbacks]
    assert any("only the data decides" in why for why in reasons), reasons
    (aten,) = [nodes for r in reports for nodes, why in r.fallbacks if "only the data decides" in why]
    assert {"index", "cos"} <= set(aten)  # the mask read, and the cos of the rows it read
    assert "only the data decides" in caplog.text


def test_a_static_graph_still_gets_kernels():
    x = torch.randn(8, 16)
    got, reports = _compile(lambda t: torch.cos(t).sin() + 1, x)
    assert torch.equal(got[0], torch.cos(x).sin() + 1) or torch.allclose(got[0], torch.cos(x).sin() + 1)
    assert any(r.kernels for r in reports)
    assert not any("only the data decides" in why for r in reports for _, why in r.fallbacks)


def test_a_data_sized_graph_is_not_recorded_as_a_cuda_graph():
    edges = torch.randint(0, 8, (2, 40))
    x = torch.randn(8, 16)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        _, reports = _compile(kept_columns, edges, x)
    (report,) = [r for r in reports if r.graph_module is not None]
    why = why_not_recordable(report.graph_module, [edges, x])
    assert why is not None and "only the data decides" in why


@pytest.mark.parametrize("seed", [1, 2])
def test_new_data_of_the_same_shapes_needs_no_recompile(seed):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend(fuselint_backend)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(kept_columns, backend=counter, dynamic=False)
        generator = torch.Generator().manual_seed(seed)
        for _ in range(3):
            edges = torch.randint(0, 8, (2, 40), generator=generator)
            x = torch.randn(8, 16, generator=generator)
            got, want = flat(compiled(edges, x)), flat(kept_columns(edges, x))
            assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    assert counter.frame_count == 1


def around_a_mask(edges, x):
    """Static work, a data-sized read, static work again: the static runs get kernels."""
    h = torch.cos(x).sin() * 2 + 1
    mask = edges[0] != edges[1]
    kept = edges[:, mask]
    rows = torch.zeros_like(h).index_add_(0, kept[0], h[kept[1]])
    return torch.tanh(rows * 3 - h).exp() + 1


@pytest.mark.parametrize("seed", [0, 1])
def test_the_static_runs_of_a_data_sized_graph_get_kernels_and_aten_runs_the_rest(seed):
    generator = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, 8, (2, 40), generator=generator)
    x = torch.randn(8, 16, generator=generator)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        got, reports = _compile(around_a_mask, edges, x)
    want = flat(around_a_mask(edges, x))
    assert all(torch.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want, strict=True))
    (report,) = reports
    assert len(report.kernels) >= 2  # before the mask and after it
    (aten,) = [nodes for nodes, why in report.fallbacks if "static pieces compiled" in why]
    assert "index" in aten and not any(n.startswith(("sin", "tanh", "exp")) for n in aten)
    assert why_not_recordable(report.graph_module, [edges, x]) is not None


def test_a_split_graph_compiles_once_over_new_data():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend(fuselint_backend)
    generator = torch.Generator().manual_seed(3)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(around_a_mask, backend=counter, dynamic=False)
        for _ in range(3):
            edges = torch.randint(0, 8, (2, 40), generator=generator)
            x = torch.randn(8, 16, generator=generator)
            got, want = flat(compiled(edges, x)), flat(around_a_mask(edges, x))
            assert all(torch.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want, strict=True))
    assert counter.frame_count == 1


def many_reads(x, m):
    """65 masked reads, each between static work: 66 static pieces, more than the history keeps."""
    out = x
    for _ in range(65):
        out = out * 0.5 + 1
        out = out + out[m].sum() * 1e-3
    return out


def test_a_graph_of_more_pieces_than_the_history_keeps_is_one_report_of_all_their_kernels():
    torch._dynamo.reset()
    x = torch.randn(8, generator=torch.Generator().manual_seed(4))
    _compile(lambda t: torch.cos(t).sin() + 1, x)  # an older report in the history
    start = history_mark()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        got = torch.compile(many_reads, backend=fuselint_backend, dynamic=False)(x, x > 0)
    assert torch.allclose(got, many_reads(x, x > 0), rtol=1e-5, atol=1e-5)
    (report,) = reports_since(start)
    (why,) = [why for _, why in report.fallbacks if "static pieces compiled" in why]
    assert "66 static pieces" in why and len(report.kernels) >= 66
