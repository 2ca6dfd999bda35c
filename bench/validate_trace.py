"""Trace real architectures (random weights, tiny configs) and compare with torch._dynamo.explain.

Not a test: needs transformers and timm, which fuselint does not depend on. Set up once:
    python3 -m venv .venv-models
    .venv-models/bin/pip install torch==2.13.0 transformers timm   # timm may pull its own torch
Run from the repository root:
    PYTHONPATH=. .venv-models/bin/python bench/validate_trace.py [--train] [--write bench/results/trace_models.md]

Every model is a factory in this file, traced through its entry ("bench/validate_trace.py:bert"),
each in its own process so that peak memory (max RSS) is the model's own. No weights are downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()

# ---------------------------------------------------------------- model factories (entries)


def _ids(vocab: int, batch: int = 2, length: int = 16):
    import torch

    torch.manual_seed(0)
    return torch.randint(0, vocab, (batch, length))


def bert():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
    )
    return BertModel(config), (_ids(1000),)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=2, n_positions=128)
    return GPT2LMHeadModel(config), (_ids(1000),)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        # One forward needs no KV cache; its empty cache tensors cannot be faked on meta.
        use_cache=False,
    )
    return LlamaForCausalLM(config), (_ids(1000),)


def t5():
    from transformers import T5Config, T5Model

    config = T5Config(vocab_size=1000, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2)
    return T5Model(config), (), {"input_ids": _ids(1000), "decoder_input_ids": _ids(1000, length=8)}


def whisper_encoder():
    import torch
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=80,
        max_source_positions=64,
        vocab_size=1000,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=0,
    )
    encoder = WhisperModel(config).get_encoder()
    # The encoder's two stride-2 convolutions halve 128 frames to max_source_positions.
    return encoder, (torch.randn(1, 80, 128),)


# Models that the graph-break corpus and KNOWLEDGE.md name as breaking: ground truth for breaks.


def longformer():
    from transformers import LongformerConfig, LongformerModel

    config = LongformerConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        attention_window=8,
        max_position_embeddings=128,
        pad_token_id=1,
    )
    return LongformerModel(config), (_ids(1000, length=32),)


def big_bird():
    from transformers import BigBirdConfig, BigBirdModel

    config = BigBirdConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        block_size=8,
        num_random_blocks=2,
        attention_type="block_sparse",
    )
    return BigBirdModel(config), (_ids(1000, length=128),)


def esm():
    from transformers import EsmConfig, EsmModel

    config = EsmConfig(
        vocab_size=33,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        pad_token_id=1,
        mask_token_id=32,
        token_dropout=True,
        position_embedding_type="rotary",
    )
    return EsmModel(config), (_ids(33),)


def _timm(name: str):
    import timm
    import torch

    model = timm.create_model(name, pretrained=False)
    return model, (torch.randn(1, 3, 224, 224),)


def resnet50():
    return _timm("resnet50")


def resnext50():
    return _timm("resnext50_32x4d")


MODELS = {
    "bert (transformers)": f"{HERE}:bert",
    "gpt2 (transformers)": f"{HERE}:gpt2",
    "llama (transformers)": f"{HERE}:llama",
    "t5 (transformers)": f"{HERE}:t5",
    "whisper encoder (transformers)": f"{HERE}:whisper_encoder",
    "longformer (transformers)": f"{HERE}:longformer",
    "big_bird (transformers)": f"{HERE}:big_bird",
    "esm (transformers)": f"{HERE}:esm",
    "llama on meta (transformers)": f"{HERE}:llama@meta",
    "longformer on meta (transformers)": f"{HERE}:longformer@meta",
    "resnet50 (timm)": f"{HERE}:resnet50",
    "resnext50_32x4d (timm)": f"{HERE}:resnext50",
}
for _fixture in sorted((ROOT / "fixtures" / "trace").glob("*.py")):
    MODELS[f"fixtures/trace/{_fixture.name}"] = f"{_fixture}:entry"


# ---------------------------------------------------------------- one model, in a child process


def _explain_counts(spec: str, train: bool) -> tuple[int, int]:
    import torch

    from fuselint.graph.entry import build, load_entry

    built = build(load_entry(spec))
    model = built.model
    if isinstance(model, torch.nn.Module):
        model.train(train)
    torch._dynamo.reset()
    with torch.set_grad_enabled(train):
        result = torch._dynamo.explain(model)(*built.args, **built.kwargs)
    torch._dynamo.reset()
    return result.graph_count, result.graph_break_count


def measure_one(spec: str, train: bool) -> dict:
    """Trace one entry ("...:factory[@meta]"); time and peak RSS are this process's own.

    The time excludes imports. explain() always runs on the real (CPU) model: on meta it would
    stop at the first data-dependent break.
    """
    import torch  # noqa: F401  (imported before the clock starts)

    from fuselint.graph.capture import capture
    from fuselint.graph.entry import load_entry

    spec, _, device = spec.partition("@")
    entry = load_entry(spec)
    start = time.perf_counter()
    cap = capture(entry, train=train, device=device or None)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    explain_graphs, explain_breaks = _explain_counts(spec, train)
    return {
        "graphs": len([g for g in cap.graphs if not g.name.endswith("_bw")]),
        "bw_graphs": len([g for g in cap.graphs if g.name.endswith("_bw")]),
        "calls": sum(g.calls for g in cap.graphs if not g.name.endswith("_bw")),
        "ops": sum(len(g.ops()) - len(g.ops("input")) for g in cap.graphs),
        "breaks": len(cap.breaks),
        "break_sites": [f"{Path(b.file).name}:{b.line} {b.gb_id} {b.reason}" for b in cap.breaks],
        "seconds": seconds,
        "peak_mb": peak_mb,
        "explain_graphs": explain_graphs,
        "explain_breaks": explain_breaks,
        "one_branch": sum(1 for b in cap.breaks if b.explored),
    }


def _run_child(spec: str, train: bool) -> dict:
    cmd = [sys.executable, str(HERE), "--one", spec] + (["--train"] if train else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail[:200]}
    return json.loads(lines[-1])


# ---------------------------------------------------------------- table

NOTES = """
Reading the table:
- graphs / calls: captured graphs, and how many times they ran in one call of the model (a graph
  inside a loop runs once per iteration; launch counts are weighted by this).
- breaks: distinct break sites (file:line, dynamo id). explain() counts every time a break is hit, so
  it reports more for a break inside a loop, and it misses a break that leaves an empty graph before
  it (copy.deepcopy at the top of forward: 0 breaks in explain, 1 here).
- "on meta": built on the meta device (no weight memory). Host reads (.item(), `if t:`, nonzero) get
  one-element stand-ins, so the run follows one branch, which may differ from the branch real data
  takes (longformer's global-attention path); the breaks found past a stand-in say so.
"""


def _table(rows: list[tuple[str, dict]], train: bool) -> str:
    head = (
        "| model | graphs | calls | ATen ops | breaks | explain graphs | explain breaks "
        "| trace s | peak RSS MB | break sites |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    if train:
        head = head.replace("| graphs |", "| graphs (fw+bw) |")
    body = []
    for name, r in rows:
        if "graphs" not in r:
            body.append(f"| {name} | error: {r.get('error', '?')} | | | | | | | | |")
            continue
        graphs = f"{r['graphs']}+{r['bw_graphs']}" if train else str(r["graphs"])
        sites = "; ".join(r["break_sites"]) or "-"
        if r.get("one_branch"):
            sites += f" ({r['one_branch']} explored on one branch only)"
        if r["error"]:
            sites += f" (stopped: {r['error']})"
        body.append(
            f"| {name} | {graphs} | {r['calls']} | {r['ops']} | {r['breaks']} | {r['explain_graphs']} "
            f"| {r['explain_breaks']} | {r['seconds']:.2f} | {r['peak_mb']:.0f} | {sites.replace('|', '/')} |"
        )
    return head + "\n".join(body) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--one", help="trace this entry in this process and print JSON (used by the driver)")
    parser.add_argument("--train", action="store_true", help="train mode: forward + backward graphs")
    parser.add_argument("--only", default="", help="comma-separated substrings of model names to run")
    parser.add_argument("--write", help="also write the markdown table to this file")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.train)))
        return
    wanted = [w for w in args.only.split(",") if w]
    rows = []
    for name, spec in MODELS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        r = _run_child(spec, args.train)
        rows.append((name, r))
        print(f"{name}: {json.dumps(r)}", file=sys.stderr, flush=True)
    import torch

    mode = "train (forward + backward of the outputs' sum)" if args.train else "inference (eval, no_grad)"
    table = _table(rows, args.train)
    header = (
        f"Trace of real architectures, {mode}: random weights, tiny configs, CPU.\n"
        f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"one process per model (trace s excludes imports; peak RSS includes them).\n"
        "Command: `PYTHONPATH=. .venv-models/bin/python bench/validate_trace.py"
        f"{' --train' if args.train else ''} --write ...`\n\n"
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header += (
        f"Load average when the run ended: {load} (on {os.cpu_count()} cores; trace s grows with it).\n\n"
    )
    print(table)
    if args.write:
        Path(args.write).write_text(header + table + NOTES)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
