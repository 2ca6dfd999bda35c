"""bench/real_corpus.py's models as `--entry` factories: the family models (built by a rule, with no
function of their own) are found by name, as fix_rate's `--prove` and `verify` ask for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuselint.graph.entry import EntryError, load_entry

CORPUS = Path(__file__).resolve().parents[1] / "bench" / "real_corpus.py"


@pytest.mark.parametrize("name", ["hf17_fastspeech2_conformer", "hf19_jetmoe", "hf_vits"])
def test_every_corpus_model_is_an_entry(name):
    entry = load_entry(f"{CORPUS}:{name}")
    assert callable(entry.factory) and entry.factory.__name__ == name


def test_an_unknown_name_is_still_no_factory():
    with pytest.raises(EntryError, match="has no factory named 'hf17_nope'"):
        load_entry(f"{CORPUS}:hf17_nope")
