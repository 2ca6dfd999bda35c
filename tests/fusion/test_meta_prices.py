"""Tracing on meta prices a model exactly as tracing on CPU: same graphs, same plan, same costs
(tiny Hugging Face configs, with and without a KV cache)."""

from __future__ import annotations

import pytest
import torch

from fuselint.fusion.devices import device
from fuselint.fusion.model import analyse
from fuselint.graph.capture import capture
from fuselint.graph.entry import Entry

tf = pytest.importorskip("transformers")


def _model(name: str):
    if name == "gpt2":
        return tf.GPT2Model(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64))
    if name == "llama":
        return tf.LlamaModel(
            tf.LlamaConfig(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                vocab_size=128,
            )
        )
    if name == "bert":
        return tf.BertModel(
            tf.BertConfig(
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                vocab_size=128,
            )
        )
    return tf.T5EncoderModel(
        tf.T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4, vocab_size=128)
    )


def _entry(name: str, use_cache: bool | None) -> Entry:
    def factory():
        torch.manual_seed(0)
        model = _model(name).eval().to(torch.bfloat16)
        kwargs = {} if use_cache is None else {"use_cache": use_cache}
        return model, (torch.randint(0, 128, (2, 16)),), kwargs

    return Entry(spec=f"tiny-{name}", factory=factory, path=__file__)


def _priced(name: str, use_cache: bool | None, trace: str):
    a = analyse(capture(_entry(name, use_cache), device=trace), device("H100-measured"))
    # node names may differ (the CPU path numbers a few more temporaries), ops may not
    plans = [
        [(g.kind, sorted(p.graph.dag.nodes[c]["op"] for c in g.compute_nodes)) for g in p.groups]
        for p in a.plans
    ]
    ops = [sorted(d["op"] for _n, d in p.graph.dag.nodes(data=True)) for p in a.plans]
    return ops, plans, a.cost.eager, a.cost.fused, sorted(f.code for f in a.findings)


@pytest.mark.parametrize(
    "name,use_cache",
    [("gpt2", True), ("gpt2", False), ("llama", True), ("llama", False), ("bert", None), ("t5", None)],
)
def test_meta_trace_prices_as_cpu_trace(name, use_cache):
    cpu = _priced(name, use_cache, "cpu")
    meta = _priced(name, use_cache, "meta")
    assert meta[0] == cpu[0]  # same graphs
    assert meta[1] == cpu[1]  # same plan
    assert meta[2] == cpu[2] and meta[3] == cpu[3]  # same eager and fused prices
    assert meta[4] == cpu[4]
    assert cpu[2].time_us > cpu[3].time_us > 0


@pytest.mark.parametrize("fixture", ["trace/conv_stem.py"])
def test_meta_trace_of_conv_nets_prices_as_cpu_trace(fixture):
    # The GPU layout pass runs convolutions channels_last; their outputs keep that layout as
    # cuDNN's do on both devices (meta's kernel alone returned contiguous: 3 extra copies)
    from pathlib import Path

    from fuselint.graph.entry import load_entry

    path = Path(__file__).resolve().parents[2] / "fixtures" / fixture
    runs = {}
    for trace in ("cpu", "meta"):
        a = analyse(capture(load_entry(f"{path}:entry"), device=trace), device("H100-measured"))
        ops = [sorted(d["op"] for _n, d in p.graph.dag.nodes(data=True)) for p in a.plans]
        runs[trace] = (ops, a.cost.eager, a.cost.fused)
    assert runs["meta"] == runs["cpu"]
    assert any("convolution" in op for op in runs["cpu"][0][0])


class _DepthwiseBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 4, stride=4)
        self.dw = torch.nn.Conv2d(32, 32, 7, padding=3, groups=32)

    def forward(self, x):
        h = self.stem(x)
        return h + self.dw(h)


def test_eager_conv_layout_is_the_users_on_either_trace():
    # The CPU runs this bf16 depthwise conv channels_last; a GPU runs the user's NCHW model
    # NCHW (PyTorch's depthwise kernel): both traces price what the GPU runs
    def entry():
        torch.manual_seed(0)
        return _DepthwiseBlock().eval().to(torch.bfloat16), (torch.randn(2, 3, 64, 64, dtype=torch.bfloat16),)

    costs = {
        trace: analyse(capture(Entry("dw", entry, __file__), device=trace), device("H100-measured")).cost
        for trace in ("cpu", "meta")
    }
    assert costs["cpu"].eager == costs["meta"].eager and costs["cpu"].fused == costs["meta"].fused
