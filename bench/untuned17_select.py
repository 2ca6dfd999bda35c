"""Which transformers model families enter the fix-rate corpus as UNTUNED17: the rule, applied mechanically.

The rule, written and committed before any of them was traced (fixes17):
- transformers 5.23.0; no fuselint fix was written while reading these families.
- Candidates: every family folder under `transformers/models` (a folder holding a `modeling_*.py`),
  alphabetical, but the families already in the corpus (FAMILIES_IN_CORPUS). The walk starts at the
  family of index `random.Random(17).randrange(n)` and goes on in alphabetical order, wrapping around.
- A family's model is its base model type: the `AutoModel` type (`MODEL_MAPPING_NAMES`) named like the
  folder (`-` read as `_`). A family without one is out.
- Its config is the type's default config, built again with every size of SHRINK that the default
  holds as an int (its text, vision, audio, ... sub-configs shrunk the same way, passed as dicts); the
  model is `AutoModel.from_config` under `torch.manual_seed(0)`, eval, CPU. A family whose config or
  model does not build offline is out.
- Its input, by the model's `main_input_name` (seeded): `input_ids` two rows of 16 ids below
  min(vocab_size, 100) (and `decoder_input_ids`, their first 8 columns, for an encoder-decoder);
  `pixel_values` two images of the config's `num_channels` (3 if none) at its `image_size` (224 if
  none); `input_values` two 4000-sample waveforms. Another input name is out; so is a family whose
  eager forward fails under `no_grad` on it.
- It enters if dynamo logs at least one break site inside transformers on that input
  (`bench/real_corpus.py`'s ground truth), whether or not a fix looks likely; the first 10 that do.
  Each step (build, eager forward, trace) has a time limit (LIMITS); a family past it is out. A trace
  that raises after logging break sites still enters (fixes16's rule); the walk stops at the 10th.

Amended at 08:30 UTC for the deadline, with 219 candidates walked, 5 of them breaking, before any later
row was read: the walk ends at candidate CUT (260 of 514) whatever it finds. A second slice
(`--walk 350:514`), started to trace two slices at once, was stopped at 08:29 and its 48 rows are kept
apart (bench/results/untuned17_select_past_cut.jsonl): outside the cut, none of them enters.

    PYTHONPATH=. python bench/untuned17_select.py > bench/results/untuned17_select.jsonl

prints each candidate with its input kind and break sites (or why it is out), one JSON line each.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import listen_breaks, logged_sites  # noqa: E402

# In the corpus before fixes17 (their entries, or read while a fix was written: fixes14's codecs).
FAMILIES_IN_CORPUS = (
    "big_bird",
    "encodec",
    "led",
    "longformer",
    "mimi",
    "pocket_tts_audio_tokenizer",
    "qwen2_vl",
    "reformer",
    "switch_transformers",
    "vits",
)
SEED = 17
LIMIT = 10
CUT = 260  # the deadline's amendment (see the docstring)
LIMITS = {"build": 120, "eager": 120, "trace": 300}
SHRINK = {
    "hidden_size": 32,
    "d_model": 32,
    "n_embd": 32,
    "embed_dim": 32,
    "num_hidden_layers": 2,
    "num_layers": 2,
    "n_layer": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_attention_heads": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "n_head": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 64,
    "ffn_dim": 64,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "d_ff": 64,
}


def families() -> list[str]:
    """Every family folder under transformers/models but the corpus's, in the rule's walk order."""
    import transformers.models as models

    root = Path(models.__file__).parent
    names = sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir() and any(d.glob("modeling_*.py")) and d.name not in FAMILIES_IN_CORPUS
    )
    start = random.Random(SEED).randrange(len(names))
    return names[start:] + names[:start]


def base_type(family: str) -> str | None:
    """The family's `AutoModel` model type (named like its folder), or None."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return next((t for t in sorted(MODEL_MAPPING_NAMES) if t.replace("-", "_") == family), None)


def _shrunk_kwargs(config) -> dict:
    """SHRINK's sizes that `config` holds as ints, and its sub-configs shrunk the same way (as dicts)."""
    from transformers import PretrainedConfig

    kwargs = {}
    for name, size in SHRINK.items():
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            kwargs[name] = size
    for name, value in vars(config).items():
        if isinstance(value, PretrainedConfig):
            sub = value.to_dict()
            sub.update(_shrunk_kwargs(value))
            kwargs[name] = sub
    return kwargs


def build(model_type: str):
    """The family's tiny model: its default config rebuilt with SHRINK's sizes, seeded, eval."""
    import torch
    from transformers import AutoModel
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_cls = CONFIG_MAPPING[model_type]
    config = config_cls(**_shrunk_kwargs(config_cls()))
    torch.manual_seed(0)
    return AutoModel.from_config(config).eval()


def inputs(model) -> tuple[str, dict] | None:
    """(kind, keyword inputs) of the rule for `model`, seeded; None for another input name."""
    import torch

    torch.manual_seed(1)
    config = model.config
    kind = model.main_input_name
    if kind == "input_ids":
        vocab = getattr(config, "vocab_size", None) or getattr(config.get_text_config(), "vocab_size", 100)
        ids = torch.randint(0, min(vocab, 100), (2, 16))
        feed = {"input_ids": ids}
        params = inspect.signature(model.forward).parameters
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            feed["decoder_input_ids"] = ids[:, :8]
        return kind, feed
    if kind == "pixel_values":
        size = getattr(config, "image_size", None) or 224
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(config, "num_channels", None) or 3
        return kind, {"pixel_values": torch.randn(2, channels, size, size)}
    if kind == "input_values":
        return kind, {"input_values": torch.randn(2, 4000)}
    return None


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _limited(step: str, call):
    signal.alarm(LIMITS[step])
    try:
        return call()
    finally:
        signal.alarm(0)


def sites_of(model, feed: dict) -> list[str]:
    """Dynamo's break sites inside transformers (real_corpus's rule: the innermost frame there)."""
    import torch
    import transformers

    root = str(Path(transformers.__file__).resolve().parent) + os.sep
    handler = listen_breaks()
    handler.texts.clear()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=lambda gm, _: gm.forward, dynamic=False)
    with torch.no_grad():
        _limited("trace", lambda: compiled(**feed))
    return logged_sites(handler.texts, root)


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:100] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


def candidate_row(family: str) -> dict:
    """One family's row: its model type, input kind and break sites, or why it is out."""
    import torch

    row: dict = {"family": family}
    model_type = base_type(family)
    if model_type is None:
        row["out"] = "no AutoModel type named like the family"
        return row
    row["type"] = model_type
    try:
        model = _limited("build", lambda: build(model_type))
    except (Exception, _Timeout) as exc:  # noqa: BLE001 - out: its config or model does not build
        row["out"] = f"not built: {_why(exc)}"
        return row
    fed = inputs(model)
    if fed is None:
        row["out"] = f"input {model.main_input_name!r} not in the rule"
        return row
    row["kind"], feed = fed
    try:
        with torch.no_grad():
            _limited("eager", lambda: model(**feed))
    except (Exception, _Timeout) as exc:  # noqa: BLE001 - out: the eager forward fails
        row["out"] = f"eager forward fails: {_why(exc)}"
        return row
    try:
        row["sites"] = sites_of(model, feed)
    except (Exception, _Timeout) as exc:  # noqa: BLE001 - a trace that fails is a row
        row["sites"] = []
        row["error"] = _why(exc)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--walk",
        help="START:STOP, only these candidates of the walk, every row printed (to trace two slices at "
        "once; the first 10 that break in the merged walk order enter)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    chosen = 0
    walk = families()[:CUT]
    if args.walk:
        start, stop = (int(n) for n in args.walk.split(":"))
        walk, chosen = walk[start:stop], -len(walk)  # a slice: no limit, entry decided on merging
    for family in walk:
        if chosen == LIMIT:
            break
        row = candidate_row(family)
        if row.get("sites"):
            chosen += 1
            row["enters"] = True
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
