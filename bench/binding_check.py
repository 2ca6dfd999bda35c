"""Each ATen op that the call function calls through torch's generated binding
(`fuselint.backend.callgen._binding`), run on the CPU through both entries with real values.

The arguments are the ones PyTorch's OpInfo samples pass to each op as it reaches the dispatcher
(caught by a dispatch mode, so in the form an FX node of AOTAutograd holds them: defaults left
out, dtypes as torch.dtype). Each recorded call runs through the OpOverload's C entry (`_op`) and
through the binding, on fresh copies, and the two are compared: the type and layout of what comes
back, which inputs it is, the values (random ops from one seed), and the inputs after the call (in-
place ops). tests/backend/test_backend_bindings.py checks every admitted op's parsing on the meta
device in CI; this one checks values, on the ~170 ops the samples reach, in about a minute.

    python bench/binding_check.py [--per-op 6]
"""

from __future__ import annotations

import argparse
import collections
import sys
import types
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# torch.testing._internal imports expecttest, which only its TestCase needs
sys.modules.setdefault("expecttest", types.SimpleNamespace(TestCase=unittest.TestCase))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

from fuselint.backend.callgen import _binding  # noqa: E402


def _copy(x: object) -> object:
    return tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, x)


class Record(TorchDispatchMode):
    """Keeps up to `per_op` calls of each admitted op."""

    def __init__(self, calls: dict, per_op: int) -> None:
        super().__init__()
        self.calls, self.per_op = calls, per_op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _binding(func) is not None and len(self.calls[func]) < self.per_op:
            self.calls[func].append((_copy(args), _copy(dict(kwargs))))
        return func(*args, **kwargs)


def record(per_op: int) -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    calls: dict = collections.defaultdict(list)
    for info in op_db:
        for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64):
            if dtype not in info.supported_dtypes("cpu"):
                continue
            try:
                samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))[:4]
            except Exception:  # noqa: BLE001, S112 - a sample generator that fails is skipped
                continue
            for s in samples:
                try:
                    with Record(calls, per_op):
                        info.op(s.input, *s.args, **s.kwargs)
                except Exception:  # noqa: BLE001, S110 - as eager fails, so may the sample
                    pass
    return calls


def _described(value: object, inputs: list) -> object:
    if isinstance(value, torch.Tensor):
        strided = value.layout == torch.strided
        return (
            tuple(value.shape),
            value.dtype,
            value.stride() if strided else None,
            value.storage_offset() if strided else None,
            tuple(i for i, t in enumerate(inputs) if t is value),
        )
    if isinstance(value, (tuple, list)):  # a named tuple reads as the tuple it is
        return tuple(_described(v, inputs) for v in value)
    return type(value).__name__


def run(fn, op, args, kwargs):
    args, kwargs = _copy(args), _copy(kwargs)
    inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    torch.manual_seed(0)
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what each raises is compared
        return ("raised", type(exc).__name__), []
    tensors = [t for t in tree_flatten(list(out) if isinstance(out, tuple) else out)[0]]
    kept = [t for t in tensors + inputs if isinstance(t, torch.Tensor)]
    return ("nothing" if not op._schema.returns else _described(out, inputs)), kept


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.layout != torch.strided or a.is_quantized or a.device.type == "meta":
        return True
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.allclose(a, b, equal_nan=True)
    return torch.equal(a, b)


UNINITIALIZED = {"empty_like", "empty_strided", "empty_permuted"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-op", type=int, default=6)
    options = parser.parse_args()
    calls = record(options.per_op)
    differ, checked = [], 0
    for op, recorded in calls.items():
        for args, kwargs in recorded:
            checked += 1
            want, want_values = run(op._op, op, args, kwargs)
            got, got_values = run(_binding(op), op, args, kwargs)
            if want != got:
                differ.append(f"{op}: overload {want}, binding {got}")
            elif op._schema.name.split("::")[1] not in UNINITIALIZED and not all(
                same_values(a, b) for a, b in zip(want_values, got_values, strict=True)
            ):
                differ.append(f"{op}: other values")
    print(f"{len(calls)} admitted ops, {checked} calls through both entries")
    print("\n".join(differ) if differ else "no difference")


if __name__ == "__main__":
    main()
