"""Numerics comparison: what passes, what never passes."""

from collections import OrderedDict
from dataclasses import dataclass

import torch

from fuselint.verify.numerics import compare


def test_equal_nested_outputs_pass():
    a = {"logits": torch.randn(3, 4), "extra": (torch.arange(3), 2)}
    assert compare(a, {"logits": a["logits"].clone(), "extra": (torch.arange(3), 2)}).ok


def test_rounding_noise_passes_and_real_error_fails():
    ref = torch.randn(64, 64)
    assert compare(ref + 1e-7 * torch.randn(64, 64), ref).ok
    bad = ref.clone()
    bad[0, 0] += 10
    result = compare(bad, ref)
    assert not result.ok and "relative error" in result.problem


def test_nan_and_shape_mismatch_never_pass():
    ref = torch.randn(4)
    assert not compare(torch.full((4,), float("nan")), ref).ok
    assert not compare(torch.randn(5), ref).ok
    assert not compare((ref,), [ref, ref]).ok


def test_bf16_has_looser_tolerance():
    ref = torch.randn(256, dtype=torch.float32)
    # bf16 storage rounding (~4e-3) passes for bf16 outputs but fails an fp32 comparison.
    assert compare((ref * 1.003).bfloat16(), ref.bfloat16()).ok
    assert not compare(ref.bfloat16().float(), ref).ok


def test_integer_outputs_must_match_exactly():
    assert not compare(torch.tensor([1, 2]), torch.tensor([1, 3])).ok


# Stand-ins for transformers' containers (CI has no transformers): a ModelOutput is an
# OrderedDict subclass, a DynamicCache an object holding layers whose tensors sit in attributes.
class FakeModelOutput(OrderedDict):
    pass


class FakeLayer:
    def __init__(self, keys, values):
        self.keys, self.values, self.dtype, self.device = keys, values, keys.dtype, keys.device


class FakeCache:
    def __init__(self, layers):
        self.layers = layers

    def __repr__(self):  # as DynamicCache: the same text for any contents
        return f"FakeCache(layers={len(self.layers)})"


@dataclass
class Heads:
    logits: torch.Tensor
    extra: dict


def _llama_like(seed: int):
    torch.manual_seed(seed)
    cache = FakeCache([FakeLayer(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)) for _ in range(2)])
    return FakeModelOutput(logits=torch.randn(1, 3, 10), past_key_values=cache)


def test_an_output_equals_itself_through_opaque_containers():
    result = compare(_llama_like(0), _llama_like(0))
    assert result.ok, result.problem
    assert result.tensors == 5 and result.max_rel_error == 0.0


def test_a_cache_tensor_that_differs_is_named_by_its_path():
    bad = _llama_like(0)
    bad["past_key_values"].layers[1].values[0, 0, 0, 0] += 100
    result = compare(bad, _llama_like(0))
    assert not result.ok
    assert result.problem.startswith("out['past_key_values'].layers[1].values: relative error")


def test_dataclass_outputs_compare_their_fields():
    ref = Heads(torch.ones(2), {"aux": (torch.zeros(3), 7)})
    assert compare(Heads(torch.ones(2), {"aux": (torch.zeros(3), 7)}), ref).ok
    bad = compare(Heads(torch.ones(2), {"aux": (torch.zeros(3), 8)}), ref)
    assert not bad.ok and bad.problem == "out.extra['aux'][1]: 8 != 7"


def test_a_missing_cache_layer_is_a_structure_mismatch():
    short = _llama_like(0)
    short["past_key_values"].layers.pop()
    result = compare(short, _llama_like(0))
    assert not result.ok and "out['past_key_values'].layers[1]" in result.problem


def test_cyclic_objects_terminate():
    a, b = _llama_like(0), _llama_like(0)
    a["past_key_values"].owner = a["past_key_values"]
    b["past_key_values"].owner = b["past_key_values"]
    assert compare(a, b).ok
