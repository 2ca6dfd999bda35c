"""Dynamo checks behind bench/results/precision_untuned17.md (FL1 recall and precision on pykeen
1.11.1, the HELD-OUT package of reach17; entry points chosen by the rule written there before any
lint; torch 2.13 CPU).

Every model of `pykeen.models.model_resolver`, built on a seeded 40-triple factory with its
defaults (again with inverse triples when that fails), compiled whole for three calls:
`score_hrt(hrt)` and `score_t(hr)` in eval under no_grad, and "train" `score_hrt(hrt)` with
backward. Break sites come from dynamo's `graph_breaks` log (bench/break_probe.py).

    cd bench && PYTHONPATH=$PWD/..:$PWD python precision_untuned17_probes.py [--json SITES.json]

`--json` writes every pykeen break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned17_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import random
import sys

import torch
from break_probe import probe_main

PACKAGES = ("pykeen",)


def triples() -> list[tuple[str, str, str]]:
    """40 distinct (head, relation, tail) labels over 12 entities and 3 relations, seeded."""
    rng = random.Random(0)
    drawn: set[tuple[str, str, str]] = set()
    while len(drawn) < 40:
        h, t = rng.sample(range(12), 2)
        drawn.add((f"e{h}", f"r{rng.randrange(3)}", f"e{t}"))
    return sorted(drawn)


def runs() -> list:
    import numpy as np
    from pykeen.models import model_resolver
    from pykeen.triples import TriplesFactory

    labeled = np.array(triples(), dtype=str)
    plain = TriplesFactory.from_labeled_triples(labeled)
    inverse = TriplesFactory.from_labeled_triples(labeled, create_inverse_triples=True)
    hrt = plain.mapped_triples[:8]
    hr = hrt[:, :2]

    def build(cls):
        try:
            return cls(triples_factory=plain)
        except Exception:  # the rule: a model that needs inverse triples is built with them
            torch.manual_seed(0)
            return cls(triples_factory=inverse)

    def call(cls, method: str, train: bool):
        def make():
            torch.manual_seed(0)
            model = build(cls).train(train)
            return lambda batch: getattr(model, method)(batch)

        return make

    out = []
    for name in sorted(model_resolver.lookup_dict):
        cls = model_resolver.lookup_dict[name]
        out += [
            (f"{cls.__name__} score_hrt", call(cls, "score_hrt", False), (hrt,)),
            (f"{cls.__name__} score_t", call(cls, "score_t", False), (hr,)),
            (f"train {cls.__name__} score_hrt", call(cls, "score_hrt", True), (hrt,)),
        ]
    return out


if __name__ == "__main__":
    probe_main(runs, PACKAGES, "precision_untuned17_probes.py", sys.argv)
