"""FL230's chains: the hand-written matchers of an earlier commit vs the rule-pattern matcher now.

Every reduction group of the plans of real models (tiny configs, random weights) is matched
both ways, before FL230's hand-written/spread filters, and the chains (composite, node set)
are compared. Not a test: needs transformers and the corpus packages.

    PYTHONPATH=. python bench/composites_agreement.py [--base f015835]
"""

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fusion"))
sys.path.insert(0, str(ROOT / "bench"))
import torch  # noqa: E402
from fusion_capture import aten_graphs  # noqa: E402

from fuselint.fusion import composites as new  # noqa: E402
from fuselint.fusion.plan import plan  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument(
    "--base", default="f015835", help="commit whose fusion/composites.py had the hand-written matchers"
)
base = parser.parse_args().base
source = subprocess.check_output(
    ["git", "show", f"{base}:fuselint/fusion/composites.py"], cwd=ROOT, text=True
)
old_path = Path(tempfile.mkdtemp()) / "old_composites.py"
old_path.write_text(source)
spec = importlib.util.spec_from_file_location("old_composites", old_path)
old = importlib.util.module_from_spec(spec)
sys.modules["old_composites"] = old
spec.loader.exec_module(old)
NAMES = {"softmax": "softmax", "LayerNorm": "layer_norm", "RMSNorm": "rms_norm"}


def hf(cfg_cls, model_cls, **kw):
    import transformers

    cfg = getattr(transformers, cfg_cls)(**kw)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(cfg).eval()


small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)


def models():
    yield (
        "gpt2",
        hf("GPT2Config", "GPT2Model", n_embd=32, n_layer=2, n_head=2, vocab_size=100),
        (torch.randint(0, 100, (2, 16)),),
    )
    yield "bert", hf("BertConfig", "BertModel", **small), (torch.randint(0, 100, (2, 16)),)
    yield (
        "llama",
        hf("LlamaConfig", "LlamaModel", num_key_value_heads=2, **small),
        (torch.randint(0, 100, (2, 16)),),
    )
    yield (
        "qwen2",
        hf("Qwen2Config", "Qwen2Model", num_key_value_heads=2, **small),
        (torch.randint(0, 100, (2, 16)),),
    )
    yield (
        "t5enc",
        hf(
            "T5Config",
            "T5EncoderModel",
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            vocab_size=100,
        ),
        (torch.randint(0, 100, (2, 16)),),
    )
    import real_corpus

    for name in ("hf_switch", "hf_big_bird", "esm2"):
        m, args = getattr(real_corpus, name)()
        yield name, m.eval(), args


def chains(mod, nodes):
    return sorted(
        (NAMES.get(c.name, c.name), tuple(sorted(n.name for n in c.nodes)))
        for c in mod.find_composites(nodes)
    )


total = {"old": 0, "new": 0, "same": 0, "groups": 0}
for name, model, args in models():
    t0 = time.time()
    try:
        fgs = aten_graphs(model, *args)
    except Exception as exc:
        print(name, "capture failed:", type(exc).__name__, str(exc)[:100])
        continue
    o = n = same = groups = 0
    tnew = told = 0.0
    for fg in fgs:
        p = plan(fg)
        for g in p.groups:
            if g.kind != "reduction":
                continue
            groups += 1
            nodes = [fg.dag.nodes[x]["fx"] for x in g.nodes]
            a = time.perf_counter()
            co = chains(old, nodes)
            told += time.perf_counter() - a
            a = time.perf_counter()
            cn = chains(new, nodes)
            tnew += time.perf_counter() - a
            o += len(co)
            n += len(cn)
            same += len(set(co) & set(cn))
            if co != cn:
                print("  DIFF", name, fg.name, "old", co, "new", cn)
    print(
        f"{name}: graphs {len(fgs)}, reduction groups {groups}, chains old {o} new {n} identical {same}; match time old {told * 1e3:.1f} ms new {tnew * 1e3:.1f} ms"
    )
    for k, v in (("old", o), ("new", n), ("same", same), ("groups", groups)):
        total[k] += v
print("TOTAL", total)
