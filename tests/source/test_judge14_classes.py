"""judge14's classes (pytorch-metric-learning 2.9.0, the tune package; see
bench/results/precision_untuned14.md), each checked against dynamo:

1. A base `forward` that calls `self.compute_loss(...)`, kept by many subclasses that each define
   `compute_loss` and no `forward`: every subclass runs its own hook from its own entry, so each
   definition is reached, past the bound on overrides that reach6 set for guessed dispatch.
2. A class whose base is a class of its own file (`class Both(WithReducer)` beside
   `class WithReducer(Records)`, `Records(nn.Module)` in another file): the lookup order goes on
   through the same-file base into the other file, so the tree knows the class is a module.
3. FL106 on `x[mask]` where `mask` is surely a boolean tensor and `x` of unknown kind (a helper of
   another file returned it): a boolean tensor indexes only a tensor.
4. A side road: `if self.collect_stats:` whose body only stores host numbers on `self` (`.item()`)
   breaks only when the opt-in flag is on; findings there say so and `--paths normal` drops them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, lines, load_snippet, tree_findings

from fuselint.source.paths import RECORDING, off_path

RECORDS = """
    import torch


    class Records(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.count = 0
"""

BASE = """
    from .records import Records


    class WithReducer(Records):
        def reduce(self, losses):
            return losses.mean()


    class Both(WithReducer):
        pass


    class BaseLoss(Both):
        def forward(self, x, labels):
            return self.reduce(self.compute_loss(x, labels))

        def compute_loss(self, x, labels):
            raise NotImplementedError
"""

# Ten subclasses, more than the eight overrides that guessed virtual dispatch follows.
LOSS = """
    from .base import BaseLoss


    class Loss{i}(BaseLoss):
        def compute_loss(self, x, labels):
            keep = labels > {i}
            return x[keep]
"""

OWN_FORWARD = """
    from .base import BaseLoss


    class Wrapped(BaseLoss):
        def forward(self, x, labels):
            return x.sum()

        def compute_loss(self, x, labels):
            return x[labels > 0]
"""


def _tree(tmp_path: Path, count: int = 10) -> list:
    files = {
        "pkg/__init__.py": "",
        "pkg/records.py": RECORDS,
        "pkg/base.py": BASE,
        "pkg/wrapped.py": OWN_FORWARD,
    }
    files.update({f"pkg/loss{i}.py": LOSS.format(i=i) for i in range(count)})
    return tree_findings(tmp_path, files)


def test_every_subclass_keeping_the_forward_reaches_its_own_hook(tmp_path):
    found = _tree(tmp_path)
    flagged = sorted(Path(f.span.path).name for f in found if f.code == "FL106")
    assert flagged == sorted(f"loss{i}.py" for i in range(10))
    note = next(f.message for f in found if Path(f.span.path).name == "loss3.py")
    assert "base.py:BaseLoss.forward → Loss3.compute_loss" in note


def test_a_subclass_with_its_own_forward_does_not_run_the_base_hook(tmp_path):
    # `Wrapped.forward` never calls compute_loss: nothing reaches its definition.
    assert not any(Path(f.span.path).name == "wrapped.py" for f in _tree(tmp_path))


def test_without_the_same_file_base_the_class_is_no_module(tmp_path):
    # `BaseLoss(Both)` is a module only through `Both -> WithReducer -> Records`: with the chain
    # cut at the same-file base, its forward is no entry and nothing is reached.
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": BASE.replace("from .records import Records", "Records = object"),
    }
    files.update({f"pkg/loss{i}.py": LOSS.format(i=i) for i in range(3)})
    assert tree_findings(tmp_path, files) == []


def test_dynamo_breaks_in_the_subclass_hook():
    torch = pytest.importorskip("torch")
    ns = load_snippet(
        RECORDS
        + BASE.replace("from .records import Records", "")
        + LOSS.format(i=1).replace("from .base import BaseLoss", "")
    )
    loss = ns["Loss1"]()
    reasons = dynamo_break_reasons(loss, torch.randn(6, 3), torch.arange(6))
    assert any("Dynamic shape operator" in r for r in reasons)


MASKED = """
    import torch
    from torch import nn
    from tripletlib import all_triplets


    class Miner(nn.Module):
        def forward(self, x, labels):
            anchors = all_triplets(labels)
            keep = x.sum(1) > 0
            return anchors[keep]


    class Listed(nn.Module):
        def forward(self, x, names):
            keep = x.sum(1) > 0
            return x + len(names[0])
"""


def test_a_boolean_tensor_mask_on_a_value_of_unknown_kind_is_flagged():
    # `all_triplets` lies outside the tree: its result is of unknown kind; the mask is surely a
    # boolean tensor, and only a tensor takes one as an index.
    assert lines(MASKED, "FL106") == [11]


def test_dynamo_breaks_on_the_boolean_mask_index():
    torch = pytest.importorskip("torch")
    source = MASKED.replace("from tripletlib import all_triplets", "all_triplets = torch.arange")
    miner = load_snippet(source)["Miner"]()
    reasons = dynamo_break_reasons(miner, torch.randn(6, 3), 6)
    assert any("Dynamic shape operator" in r for r in reasons)


STATS = """
    import torch
    from torch import nn


    class Miner(nn.Module):
        def __init__(self, collect_stats=False):
            super().__init__()
            self.collect_stats = collect_stats
            self.training_steps = 0

        def forward(self, d):
            if self.collect_stats:
                with torch.no_grad():
                    self.mean_dist = torch.mean(d).item()
                    if len(d) > 0:
                        self.max_dist = torch.max(d).item()
            if self.training:
                self.last = d.sum().item()
            if self.collect_stats:
                self.first = d[0].item()
                return d * 2
            return d + 1
"""


def test_statistics_behind_a_self_flag_are_a_recording_road():
    found = {f.span.line: off_path(f) for f in findings(STATS, "FL101")}
    assert found == {15: RECORDING, 17: RECORDING, 19: None, 21: None}
    assert "only while the flag that guards it is on" in next(
        f.message for f in findings(STATS, "FL101") if f.span.line == 15
    )


def test_dynamo_breaks_on_the_recording_road_only_with_the_flag_on():
    torch = pytest.importorskip("torch")
    miner = load_snippet(STATS)["Miner"]
    d = torch.rand(5)
    assert dynamo_break_reasons(miner(collect_stats=False).eval(), d) == []
    assert dynamo_break_reasons(miner(collect_stats=True).eval(), d) != []
