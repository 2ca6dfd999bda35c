"""A loop that unpacks a parameter annotated a list of tuples binds each name by its field's
annotation (`dataflow.tuple_element_annotations`), not every name as a tensor.

From diffusers 0.42.1's LTX-2 pipeline (prec26j's sample, #35): `condition_latents:
list[tuple[int, torch.Tensor, float, int]] | None`, unpacked as `for pixel_frame_idx, encoded,
strength, num_pixel_frames in condition_latents`, and `if num_pixel_frames == 1` in a helper was
taken for a tensor branch. Checked against dynamo.
"""

from __future__ import annotations

import ast

import pytest
from source_rules_helpers import dynamo_break_reasons, lines, load_snippet

from fuselint.source.dataflow import tuple_element_annotations

SRC = """
import torch
from torch import nn
from typing import List, Optional, Tuple


class Refiner(nn.Module):
    def place(self, x: torch.Tensor, frames: int):
        if frames == 1:
            x = x + 1
        return x * 2

    def forward(self, x: torch.Tensor, conditions: list[tuple[int, torch.Tensor, float, int]] | None = None):
        for index, latent, strength, frames in conditions:
            x = self.place(x + latent * strength, frames)
            if latent.sum() > 0:
                x = x - 1
        return x


class FieldsOnly(Refiner):
    def forward(self, x: torch.Tensor, conditions: list[tuple[int, torch.Tensor, float, int]] | None = None):
        for index, latent, strength, frames in conditions:
            x = self.place(x + latent * strength, frames)
        return x


class Unsized(nn.Module):
    def place(self, x: torch.Tensor, frames: int):
        if frames == 1:
            x = x + 1
        return x

    def forward(self, x: torch.Tensor, conditions: Optional[List[Tuple[torch.Tensor, ...]]] = None):
        for latent, frames in conditions:
            x = self.place(x + latent, frames)
        return x
"""


def test_each_unpacked_name_is_what_its_field_says():
    # the tensor field still breaks where it is read on the host; the int field does not
    assert lines(SRC, "FL102") == [16, 30]  # 30: `tuple[Tensor, ...]` names no fields, as before


def test_dynamo_breaks_on_the_tensor_field_only():
    torch = pytest.importorskip("torch")
    ns = load_snippet(SRC)
    x = torch.randn(4)
    conditions = [(0, torch.randn(4), 0.5, 1), (3, torch.randn(4), 1.0, 2)]
    assert dynamo_break_reasons(ns["FieldsOnly"](), x, conditions) == []
    assert dynamo_break_reasons(ns["Refiner"](), x, conditions) == ["Data-dependent branching"] * 2


@pytest.mark.parametrize(
    ("annotation", "fields"),
    [
        ("list[tuple[int, torch.Tensor]]", ["int", "torch.Tensor"]),
        ("Optional[List[Tuple[int, float]]]", ["int", "float"]),
        ("typing.Sequence[typing.Tuple[torch.Tensor, int]] | None", ["torch.Tensor", "int"]),
        ("'list[tuple[str, torch.Tensor]]'", ["str", "torch.Tensor"]),
        ("list[tuple[int, ...]]", None),
        ("tuple[torch.Tensor, int]", None),
        ("list[torch.Tensor]", None),
        ("Union[list[tuple[int, int]], torch.Tensor]", None),
    ],
)
def test_field_annotations(annotation, fields):
    got = tuple_element_annotations(ast.parse(annotation, mode="eval").body)
    assert (None if got is None else [ast.unparse(f) for f in got]) == fields


REBOUND = """
import torch
from torch import nn


class Shadowed(nn.Module):
    def forward(self, x: torch.Tensor, conds: list[tuple[int, float]]):
        def inner(conds):
            out = x
            for index, strength in conds:
                if strength > 0.5:
                    out = out * index
            return out

        return inner([(0, x[0]), (1, x[1])])


class Rebound(nn.Module):
    def forward(self, x: torch.Tensor, conds: list[tuple[int, float]]):
        conds = x.view(-1, 2)
        for index, strength in conds:
            if strength > 0.5:
                x = x * index
        return x
"""


def test_the_annotation_is_not_read_for_another_binding_of_the_name():
    # a nested def's own `conds` and a rebound `conds` hold what they are given, not what the
    # parameter's annotation says: their float field is a tensor here, and dynamo breaks on it
    assert lines(REBOUND, "FL102") == [11, 22]


def test_dynamo_breaks_where_the_name_is_bound_again():
    torch = pytest.importorskip("torch")
    ns = load_snippet(REBOUND)
    x = torch.tensor([0.9, 0.1, 0.2, 0.8])
    for cls in ("Shadowed", "Rebound"):
        assert "Data-dependent branching" in dynamo_break_reasons(ns[cls](), x, [(0, 0.7)]), cls
