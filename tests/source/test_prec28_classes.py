"""prec28: false classes of the ho27 census (vit-pytorch 1.26.11, bench/results/precision_untuned27.md)
and of the seed-27 sample (bench/results/real_breaks_precision.md), each fixed by a general reading and
checked against dynamo.

- A memo method (`@singleton("teacher")`: the wrapper returns `getattr(self, key)` when set, else runs
  the method and `setattr`s it) whose cache the constructor empties and then fills by an eager
  `self.forward(mock)`: its body runs compiled only after the cache is emptied again. Findings there
  are marked `warmed` (vit_pytorch dino/es_vit/lejepa, FL104 `copy.deepcopy`, FL105 `requires_grad`).
- What is read off a parameter taken for a tensor on its name alone (its elements, slices, their
  comparisons) is no more than a guess either, and a nested def called by name with the elements of
  a value the lint holds no tensor keeps its parameters' name-only guesses (vit_pytorch wwt.py's
  `interactions`, int pairs: FL102/FL107).
- `.numpy()` with no copy to the host before it runs on a CPU tensor (`Tensor.numpy()` raises on a
  GPU one): no sync, and dynamo traces it (diffusers' ONNX pipelines). A copy on the line that binds
  the name (`t = x.cpu()`) carries the finding there, once.
- A read that a helper turns off while compiling (kornia's `_can_stop_cascade`), the operands of
  `and`/`or` after one decided while compiling, and the untaken arm of a decided conditional are
  never traced; warnings that advise against an argument's value are misuse roads.
- A parameter filled when None by a method annotated with its own type keeps its tuple fields
  (diffusers LTX-2), and a list of lists of tensors holds lists (vit-pytorch NaViT).
"""

from __future__ import annotations

import copy

import pytest
from source_rules_helpers import dynamo_break_reasons, findings, lines, load_snippet

from fuselint.source.paths import WARMED, off_path

WARM = """
import copy
from functools import wraps

import torch
from torch import nn


def singleton(cache_key):
    def inner_fn(fn):
        @wraps(fn)
        def wrapper(self, *args, **kwargs):
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance
            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner_fn


def set_requires_grad(model, val):
    for p in model.parameters():
        p.requires_grad = val


class Teacher(nn.Module):
    def __init__(self, warm=True):
        super().__init__()
        self.student = nn.Linear(4, 4)
        self.teacher = None
        self.forward(torch.randn(2, 4))

    @singleton("teacher")
    def get_teacher(self):
        teacher = copy.deepcopy(self.student)
        set_requires_grad(teacher, False)
        return teacher

    def reset(self):
        self.teacher = None

    def forward(self, x):
        teacher = self.get_teacher()
        return self.student(x) + teacher(x)


class Lazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = nn.Linear(4, 4)
        self.teacher = None

    @singleton("teacher")
    def get_teacher(self):
        teacher = copy.deepcopy(self.student)
        return teacher

    def forward(self, x):
        teacher = self.get_teacher()
        return self.student(x) + teacher(x)
"""


def test_a_memo_body_the_constructor_fills_is_marked_warmed():
    found = {(f.span.line, f.code): off_path(f) for f in findings(WARM, "FL1")}
    # line 25 `p.requires_grad = val` (through the memo body), line 37 `copy.deepcopy` in Teacher
    assert found[(25, "FL105")] == WARMED
    assert found[(37, "FL104")] == WARMED
    # the same memo without the constructor's eager call runs its body on the first compiled call
    assert found[(57, "FL104")] is None


def test_dynamo_runs_a_warmed_memo_body_only_after_a_reset():
    torch = pytest.importorskip("torch")
    ns = load_snippet(WARM)
    module = ns["Teacher"]()
    assert dynamo_break_reasons(module, torch.randn(2, 4)) == []
    module.reset()
    assert dynamo_break_reasons(module, torch.randn(2, 4)) != []
    assert dynamo_break_reasons(ns["Lazy"](), torch.randn(2, 4)) != []


def test_the_memo_reading_needs_the_wrapper_to_return_the_cache():
    # a decorator that only counts calls (no early return of the cached value) is no memo
    counting = WARM.replace("            if instance is not None:\n                return instance\n", "")
    assert all(off_path(f) is None for f in findings(counting, "FL1"))


PAIRS = """
import torch
from torch import nn


def default(val, d):
    return val if val is not None else d


class Head(nn.Module):
    def __init__(self, pathways=None, patch_pathway_id=0):
        super().__init__()
        self.pathways = pathways
        self.patch_pathway_id = patch_pathway_id

    def forward(self, features, masks, interactions):
        masks = {pair: m for m, pair in zip(masks, interactions)}
        pathways = default(self.pathways, tuple((j, 0) for i, j in interactions if i == self.patch_pathway_id))

        def build(pathway):
            start, end = pathway[0], pathway[-1]
            is_descending = start > end
            out = features[start]
            for source, target in zip(pathway[:-1], pathway[1:]):
                pair = (target, source) if is_descending else (source, target)
                out = out * masks[pair]
            if end == 0:
                out = out + 1
            return out

        return tuple(build(p) for p in pathways)
"""


def test_a_guess_keyed_into_a_dict_holds_host_values_and_what_is_read_off_a_guess_is_one():
    # 18: `interactions`' elements key a dict comprehension (line 17): int pairs, no tensor;
    # 21-27: `pathway` is the nested def's name-only guess, handed elements of `pathways`
    assert [(f.span.line, f.code) for f in findings(PAIRS, "FL1")] == []


def test_a_comparison_of_a_guess_with_an_attribute_stays_flagged():
    # vit-pytorch wwt.py:128 is left: a guess against `self.patch_pathway_id` (an int option, but a
    # guessed `k > self.until` stays flagged too: tests/source/test_judge10_docstring_types.py)
    attribute = PAIRS.replace("if end == 0:", "if end == self.patch_pathway_id:")
    assert lines(attribute, "FL102") == [27]


def test_the_same_reads_of_an_annotated_tensor_are_flagged():
    sure = PAIRS.replace(
        "def forward(self, features, masks, interactions):",
        "def forward(self, features, masks, interactions: torch.Tensor):",
    )
    sure = sure.replace("def build(pathway):", "def build(pathway: torch.Tensor):")
    assert lines(sure, "FL102") == [18, 25, 27]
    assert lines(sure, "FL107") == [24]


def test_dynamo_traces_int_pairs_and_breaks_on_a_tensor_of_pairs():
    torch = pytest.importorskip("torch")
    head = load_snippet(PAIRS)["Head"]()
    features = [torch.randn(3), torch.randn(3)]
    masks = [torch.randn(3), torch.randn(3)]
    assert dynamo_break_reasons(head, features, masks, ((0, 1), (1, 0))) == []
    build = load_snippet(PAIRS.replace("masks[pair]", "2"))["Head"]()
    assert dynamo_break_reasons(build, features, masks, torch.tensor([[0, 1], [1, 0]])) != []


ONNX = """
import pickle

import numpy as np
import torch


def step(sample, noise):
    latents = torch.from_numpy(sample) + torch.from_numpy(noise)
    latents = latents.numpy()
    return latents * 2


def decode(x):
    image = x.cpu().permute(0, 2, 3, 1).float().numpy()
    return image


def moved(x):
    y = (x * 2).cpu()
    a = y.numpy()
    b = y.float().numpy()
    return a, b


def saved(x):
    return pickle.dumps((x * 2).numpy())
"""


def test_numpy_of_a_cpu_tensor_is_no_sync_and_a_copy_is_flagged_once_where_it_is():
    src = ONNX.replace("def step", "@torch.compile\ndef step").replace(
        "def decode", "@torch.compile\ndef decode"
    )
    src = src.replace("def moved", "@torch.compile\ndef moved").replace(
        "def saved", "@torch.compile\ndef saved"
    )
    found = {f.span.line: f.message for f in findings(src, "FL101")}
    # line 11 `latents.numpy()` on a CPU tensor: nothing; line 17 the `.cpu()` chain; line 23 the
    # binding `y = (x * 2).cpu()`, once for its two `.numpy()` calls; line 31 the array handed to
    # `pickle.dumps`, where dynamo breaks
    assert sorted(found) == [17, 23, 31]
    assert "for the `.numpy()` on line 24" in found[23]
    assert "`pickle.dumps`" in found[31]


def test_dynamo_traces_numpy_of_a_cpu_tensor():
    torch = pytest.importorskip("torch")
    ns = load_snippet(ONNX)
    sample = torch.randn(2, 3).numpy()
    assert dynamo_break_reasons(ns["step"], sample, copy.deepcopy(sample)) == []
    assert dynamo_break_reasons(ns["decode"], torch.randn(1, 3, 2, 2)) == []
    assert dynamo_break_reasons(ns["saved"], torch.randn(3)) != []


SKIPPED = """
import torch
from torch import nn


def can_stop(x):
    if torch.jit.is_scripting():
        return False
    if torch.jit.is_tracing() or torch.compiler.is_compiling():
        return False
    return not x.requires_grad


class Cascade(nn.Module):
    def forward(self, x):
        checks = range(4, 16, 4) if can_stop(x) else ()
        for i in range(16):
            x = x * 0.5
            if i + 1 in checks and not bool((x > 0.1).any()):
                break
        if not torch.compiler.is_compiling() and bool(x.all()):
            x = x - 1
        y = x.sum() if torch.compiler.is_compiling() else x.sum().item()
        return x + y
"""


def test_a_check_skipped_while_compiling_is_not_flagged():
    # line 19: `checks` is `()` while compiling (the helper returns False there), so `i + 1 in
    # checks` is False and `bool(...)` never runs; line 21: `and` after a False `not
    # is_compiling()`; line 23: the arm a compile-time conditional never takes
    assert lines(SKIPPED, "FL101") == []
    # the same read with a helper that does not turn it off is flagged (line 17 there)
    kept = SKIPPED.replace(
        "    if torch.jit.is_tracing() or torch.compiler.is_compiling():\n        return False\n", ""
    )
    assert lines(kept, "FL101") == [17]


def test_dynamo_never_runs_a_check_skipped_while_compiling():
    torch = pytest.importorskip("torch")
    module = load_snippet(SKIPPED)["Cascade"]()
    assert dynamo_break_reasons(module, torch.rand(4)) == []
    kept = SKIPPED.replace(
        "    if torch.jit.is_tracing() or torch.compiler.is_compiling():\n        return False\n", ""
    )
    assert dynamo_break_reasons(load_snippet(kept)["Cascade"](), torch.rand(4)) != []


def test_is_exporting_is_no_compile_time_constant():
    # torch.compile traces `torch.compiler.is_exporting()` as False: the `else` arm runs and breaks
    src = """
import torch
from torch import nn


class Full(nn.Module):
    def forward(self, mask):
        return True if torch.compiler.is_exporting() else bool(mask.reshape(()))
"""
    assert lines(src, "FL101") == [8]
    torch = pytest.importorskip("torch")
    assert dynamo_break_reasons(load_snippet(src)["Full"](), torch.ones(1, dtype=torch.bool)) != []


WARNINGS = """
import logging
import torch
from torch import nn

logger = logging.getLogger(__name__)
SUPPORTED = [(64, 64), (32, 32)]


class Pipeline(nn.Module):
    def forward(self, x, height=64, width=64, ensemble_size=1):
        if (height, width) not in SUPPORTED:
            height, width = 64, 64
            logger.warning(f"Reshaped to (height, width)=({height}, {width}), Supported shapes are {SUPPORTED}")
        if ensemble_size == 2:
            logger.warning("`ensemble_size` == 2 results are similar to no ensembling (1); consider increasing the value to at least 3.")
        if x.isnan().any():
            logger.warning("NaN values in the output: consider a smaller learning rate")
        return x[..., :height, :width]
"""


def test_warnings_that_map_or_advise_against_an_argument_are_misuse_roads():
    found = {f.span.line: off_path(f) for f in findings(WARNINGS, "FL103")}
    # 14: mapped to a supported size; 16: an argument named and advised against; 18: about the
    # data (no argument named), stays normal
    assert found == {14: "misuse", 16: "misuse", 18: None}
    torch = pytest.importorskip("torch")
    module = load_snippet(WARNINGS)["Pipeline"]()
    logged = "logging.Logger method not supported for non-export cases"
    # the NaN check breaks on every call (a data-dependent branch); the warning only off its road
    assert logged not in dynamo_break_reasons(module, torch.rand(2, 64, 64))
    assert logged in dynamo_break_reasons(module, torch.rand(2, 64, 64), 48, 48)
    assert logged in dynamo_break_reasons(module, torch.rand(2, 64, 64), 64, 64, 2)


FILLED = """
import torch
from torch import nn


class Pipe(nn.Module):
    def encode(self, xs) -> list[tuple[int, torch.Tensor, float, int]]:
        return [(0, x, 1.0, x.shape[0]) for x in xs]

    def place(self, latent, frames: int):
        if frames == 1:
            latent = latent + 1
        return latent

    def forward(self, xs, conds: list[tuple[int, torch.Tensor, float, int]] | None = None):
        if conds is None:
            conds = self.encode(xs)
        out = []
        for idx, latent, strength, frames in conds:
            out.append(self.place(latent * strength, frames))
        return out
"""


def test_a_parameter_filled_when_none_with_its_own_type_keeps_its_fields():
    # diffusers LTX-2 `pipeline_ltx2_dfr.py:878` (seed 26 #35): `frames` is the int field
    assert lines(FILLED, "FL102") == []
    # filled by a method annotated otherwise, the fields are not known: `frames` stays a tensor
    other = FILLED.replace("-> list[tuple[int, torch.Tensor, float, int]]", "-> list")
    assert lines(other, "FL102") == [11]


def test_dynamo_traces_the_int_field():
    torch = pytest.importorskip("torch")
    module = load_snippet(FILLED)["Pipe"]()
    assert dynamo_break_reasons(module, [torch.randn(1, 2), torch.randn(3, 2)]) == []


IMAGES = """
import torch
from torch import nn


class Packer(nn.Module):
    def forward(self, batched: list[torch.Tensor] | list[list[torch.Tensor]]):
        if torch.is_tensor(batched[0]):
            batched = [batched]
        out = []
        for images in batched:
            for image in images:
                out.append(image.flatten())
        return torch.cat(out)
"""


def test_a_list_of_lists_of_tensors_holds_lists():
    # vit-pytorch NaViT `for image in images` (ho27 #18): a Python list of images, not a tensor's rows
    assert lines(IMAGES, "FL107") == []
    # annotated a list of tensors only, each `images` is a tensor and line 12 loops over its rows
    flat = IMAGES.replace("list[torch.Tensor] | list[list[torch.Tensor]]", "list[torch.Tensor]")
    assert lines(flat, "FL107") == [12]
    torch = pytest.importorskip("torch")
    module = load_snippet(IMAGES)["Packer"]()
    assert dynamo_break_reasons(module, [torch.randn(2, 2), torch.randn(3, 2)]) == []
