"""Host µs of fuselint's generated call function on the CPU, its launches left out: what the runtime
itself spends a call (views, layout checks, allocations, ATen calls and their argument parsing, kept
weights' checks), measurable on a machine without a GPU and across commits.

    TRITON_INTERPRET=1 taskset -c 1 python bench/callgen_host.py [--models gpt2,llama,bert,t5enc]

Each model is the suite's (bench/models.py: the same layers, heads and structure) at a width of 64
and 16 tokens (`convnet`: twelve convolution-BatchNorm-ReLU blocks of 8 channels on a 16x16 image), so that its ATen ops' own arithmetic is a few µs; compiled on the CPU through Triton's
interpreter; then every kernel gets a launcher of the fast path's calling convention that launches
nothing, and the call function is generated as on a GPU. The kernels' outputs are then never
written: the ATen ops read uninitialised memory (their time does not depend on the values). Run the
same script with another checkout first on PYTHONPATH to compare commits; the launches themselves
(Triton's launcher, the driver) are not in the number. Medians of `--rounds` rounds of `--calls` calls.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def tiny(name: str) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    if name == "convnet":
        return _convnet(), (torch.randn(1, 8, 16, 16),)
    import transformers as tf

    if name == "gpt2":
        cfg = tf.GPT2Config(n_layer=4, n_embd=64, n_head=4)
        model = tf.GPT2Model(cfg)
    elif name == "llama":
        cfg = tf.LlamaConfig(
            hidden_size=64,
            intermediate_size=176,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=4,
            vocab_size=1000,
        )
        model = tf.LlamaModel(cfg)
    elif name == "bert":
        cfg = tf.BertConfig(num_hidden_layers=4, hidden_size=64, num_attention_heads=4, intermediate_size=256)
        model = tf.BertModel(cfg)
    elif name == "t5enc":
        cfg = tf.T5Config(d_model=64, d_ff=256, d_kv=16, num_layers=4, num_heads=4)
        model = tf.T5EncoderModel(cfg)
    else:
        raise KeyError(name)
    ids = torch.randint(0, min(cfg.vocab_size, 1000), (1, 16))
    return model.eval(), (ids,)


def _convnet(blocks: int = 12, channels: int = 8) -> torch.nn.Module:
    """`convnet`: ResNet's block body without its shortcut, `blocks` times: a bias-free 3x3
    convolution, BatchNorm (eval), ReLU. On the CPU each convolution is an ATen call of the call
    function (on a GPU it goes to cuDNN directly: no CPU measure of that path)."""
    layers = []
    for _ in range(blocks):
        layers += [
            torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            torch.nn.BatchNorm2d(channels),
            torch.nn.ReLU(),
        ]
    return torch.nn.Sequential(*layers).eval()


class NoLaunch:
    """A fast launcher's fields and calling convention (fuselint.backend.runtime.FastLaunch);
    `run` launches nothing."""

    def __init__(self, kernel) -> None:
        self.grid = (1, 1, 1)
        self.function = object()
        self.packed = object()
        self.consts = tuple(kernel.consts.values())
        self.device_index = 0
        self.stream_of = lambda index: 0
        self.aligned = tuple(False for _ in kernel.in_strides)
        self.alloc = None

    def matches(self, args, strides) -> bool:
        return False

    def run(self, *args) -> None:
        return None


def call_function(name: str):
    """(the generated call function, the graph inputs of one call, its source) of `name`."""
    from fuselint.backend import fuselint_backend, history_mark, reports_since

    torch._dynamo.reset()
    model, args = tiny(name)
    mark = history_mark()
    compiled = torch.compile(model, backend=fuselint_backend)
    with torch.no_grad():
        compiled(*args)
    reports = reports_since(mark)
    if len(reports) != 1:
        raise RuntimeError(f"{name}: {len(reports)} graphs (one expected)")
    (report,) = reports
    for k in report.kernels:
        k._fast = NoLaunch(k)
        k._fast_more = [NoLaunch(k) for _ in k.more]
    runner = report.runner
    runner._generate()
    if runner.call is None:
        raise RuntimeError(f"{name}: no call function ({runner.why_not})")
    seen = []
    cls = type(runner)
    original = cls.__call__

    def spy(self, *a):
        seen.append(a)
        return original(self, *a)

    cls.__call__ = spy
    try:
        with torch.no_grad():
            compiled(*args)
    finally:
        cls.__call__ = original
    return runner.call, seen[0], runner.source


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,llama,bert,t5enc")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=300)
    a = p.parse_args(argv)
    import fuselint

    print(
        f"fuselint from {fuselint.__file__}; torch {torch.__version__}; µs per call, median of {a.rounds} rounds"
    )
    print("| model | call function µs | kernels | views made | layout checks | lines |")
    print("|---|---|---|---|---|---|")
    for name in [m for m in a.models.split(",") if m]:
        call, args, source = call_function(name)
        with torch.no_grad():
            for _ in range(20):
                call(*args)
            rounds = []
            for _ in range(a.rounds):
                start = time.perf_counter()
                for _ in range(a.calls):
                    call(*args)
                rounds.append((time.perf_counter() - start) / a.calls * 1e6)
        kernels = source.count("None, None, None,")
        views = source.count("= _view")
        checks = source.count(".stride() ==")
        print(
            f"| {name} | {statistics.median(rounds):.1f} | {kernels} | {views} | {checks} | {source.count(chr(10))} |",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
