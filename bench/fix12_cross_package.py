"""FL102's count-branch fix on code of a package other than kornia (fix12, issue 10, step 6).

transformers 5.23.0's DeBERTa (v1 and v2) sequence classifiers, given 1-D labels, gather the
logits of the labelled rows: `label_index = (labels >= 0).nonzero()` (FL106), then
`if label_index.size(0) > 0:` (the count FL102's new fix decides with `guard_or_true`). This
traces the original package and a fixed copy (`fuselint check --fix --unsafe-fixes` over the whole
package, in FIXED) with dynamo (eval, no_grad, a tiny config, the same seed) and prints the break
sites in the model files and the loss, for labels with some labelled row and for all rows
unlabelled (-1), where the fix's stated assumption (some labelled row) does not hold.

    CORPUS_VENV/bin/python bench/fix12_cross_package.py FIXED   # FIXED: folder holding transformers/
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, logging, sys
import torch
import transformers
from transformers import DebertaConfig, DebertaForSequenceClassification, DebertaV2Config, DebertaV2ForSequenceClassification

sites = []
class Grab(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        for line in text.splitlines():
            if "modeling_deberta" in line and ".py:" in line:
                sites.append(line.strip().split("/transformers/")[-1][:80])
                break
torch._logging.set_logs(graph_breaks=True)
logging.getLogger("torch._dynamo").addHandler(Grab())
for name in list(logging.root.manager.loggerDict):
    if name.endswith("graph_breaks"):
        logging.getLogger(name).addHandler(Grab())

out = {"file": transformers.__file__}
for label, (cfg_cls, model_cls) in {
    "deberta": (DebertaConfig, DebertaForSequenceClassification),
    "deberta_v2": (DebertaV2Config, DebertaV2ForSequenceClassification),
}.items():
    torch.manual_seed(0)
    config = cfg_cls(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, num_labels=3)
    model = model_cls(config).eval()
    ids = torch.randint(0, 64, (4, 8), generator=torch.Generator().manual_seed(1))
    for case, labels in {"some labelled": torch.tensor([0, -1, 2, 1]), "none labelled": torch.tensor([-1, -1, -1, -1])}.items():
        torch._dynamo.reset()
        sites.clear()
        graphs = []
        def record(gm, _inputs):
            graphs.append(gm)
            return gm.forward
        with torch.no_grad():
            eager = model(input_ids=ids, labels=labels).loss
            compiled = torch.compile(model, backend=record, dynamic=False)(input_ids=ids, labels=labels).loss
        out[f"{label} / {case}"] = {
            "graphs": len(graphs), "sites": sorted(set(sites)),
            "eager loss": float(eager), "compiled loss": float(compiled),
        }
print(json.dumps(out))
"""


def run(path: str | None) -> dict:
    env = None
    if path:
        import os

        env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    fixed = sys.argv[1]
    for title, result in (("original", run(None)), ("fixed", run(fixed))):
        print(f"{title}: {result.pop('file')}")
        for key, row in result.items():
            print(f"  {key}: {row}")


if __name__ == "__main__":
    main()
