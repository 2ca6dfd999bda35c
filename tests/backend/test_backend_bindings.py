"""Every ATen op that the call function calls through torch's generated binding (`callgen._binding`)
gives through it what its OpOverload gives: checked op by op on the meta device, with arguments
built from each op's schema and passed as an FX node passes them (defaults left out)."""

from __future__ import annotations

import torch
from backend_helpers import compiled_once, needs_interpreter, stand_in_call_function

from fuselint.backend.callgen import _aten_entry, _binding

aten = torch.ops.aten


def admitted() -> list[torch._ops.OpOverload]:
    """The aten default overloads `_binding` gives a binding for: all of ATen's, not only those
    some earlier code happened to look up (``dir(torch.ops.aten)`` lists those only)."""
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        if namespace != "aten" or "." in name:
            continue
        packet = getattr(aten, name, None)
        if packet is not None and "default" in packet.overloads() and _binding(packet.default):
            ops.append(packet.default)
    return ops


def _tensor() -> torch.Tensor:
    return torch.empty(2, 3, 4, 5, device="meta")


_VALUES = {
    "Tensor": _tensor,
    "List[Tensor]": lambda: [_tensor(), _tensor()],
    "List[Optional[Tensor]]": lambda: [None, torch.zeros(3, dtype=torch.long, device="meta")],
    "int": lambda: 1,
    "SymInt": lambda: 1,
    "float": lambda: 0.5,
    "List[float]": lambda: [0.5],
    "bool": lambda: False,
    "number": lambda: 2,
    "str": lambda: "sum",
    "ScalarType": lambda: torch.float32,
    "Layout": lambda: torch.strided,
    "Device": lambda: torch.device("meta"),
    "MemoryFormat": lambda: torch.contiguous_format,
    "Generator": lambda: None,
}


def _value(arg: torch.Argument, given: bool) -> object:
    kind = str(arg.real_type)
    if kind.startswith("Optional["):
        if not given:
            return None
        kind = kind[len("Optional[") : -1]
    if kind.startswith(("List[int]", "List[SymInt]")):
        return [1] * (arg.N or 1)
    return _VALUES[kind]()


def _dtype(value: object) -> object:
    """A schema's ScalarType default (an int) as the torch.dtype an FX node holds."""
    return aten.scalar_tensor.default(0, dtype=value).dtype if isinstance(value, int) else value


def calls(op: torch._ops.OpOverload):
    """(args, kwargs) as an FX node of `op` holds them: its defaults left out and its optional
    arguments None; then every positional argument written out and the optional ones given."""
    for given in (False, True):
        args, kwargs = [], {}
        for arg in op._schema.arguments:
            if arg.has_default_value():
                if not given or (arg.kwarg_only and arg.default_value is not None):
                    continue
                if arg.default_value is not None:
                    default = arg.default_value
                    args.append(_dtype(default) if "ScalarType" in str(arg.real_type) else default)
                    continue
            value = _value(arg, given)
            if arg.kwarg_only:
                kwargs[arg.name] = value
            else:
                args.append(value)
        yield args, kwargs


def _described(value: object, inputs: list) -> object:
    if isinstance(value, torch.Tensor):
        same = tuple(i for i, t in enumerate(inputs) if t is value)  # in place: the input itself
        return ("tensor", tuple(value.shape), value.dtype, value.stride(), same)
    if isinstance(value, (tuple, list)):  # a binding's named tuple reads as the tuple it is
        return tuple(_described(v, inputs) for v in value)
    return type(value).__name__


def outcome(fn, op: torch._ops.OpOverload, args: list, kwargs: dict) -> object:
    args = [list(a) if isinstance(a, list) else a for a in args]
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what each raises is the point
        return ("raised", type(exc).__name__)
    if not op._schema.returns:  # `-> ()`: nothing reads the value (a _foreach_*_ binding
        return "nothing"  # returns its list, the overload None)
    return _described(out, inputs)


def test_every_admitted_op_gives_through_its_binding_what_its_overload_gives():
    ops = admitted()
    assert len(ops) > 500, len(ops)  # this torch: 614 (about 350 of them loaded by dir(aten))
    assert aten.convolution.default in ops and aten.cudnn_convolution.default in ops
    differ = []
    for op in ops:
        for args, kwargs in calls(op):
            want, got = outcome(op._op, op, args, kwargs), outcome(_binding(op), op, args, kwargs)
            if want != got:
                differ.append(f"{op}: overload {want}, binding {got}")
    assert not differ, "\n".join(differ)


def test_an_op_whose_binding_reads_a_default_otherwise_keeps_its_overload_entry():
    # torch's parser reads `int reduction=at::Reduction::Mean`, the default of the losses'
    # bindings, as 0 ('none'): called without it (as an FX node calls it when it is the mean) the
    # binding gives every element's loss where the overload gives their mean
    a, b = torch.randn(4, 3), torch.rand(4, 3)
    for op, args in (
        (aten.binary_cross_entropy_with_logits.default, (a, b)),
        (aten.hinge_embedding_loss.default, (a, b.sign())),
        (aten.margin_ranking_loss.default, (a, b, b.sign())),
        (aten.kl_div.default, (a, b)),
        (aten.triplet_margin_loss.default, (a, b, b)),
    ):
        entry = _aten_entry(op)
        assert entry is op._op, op
        torch.testing.assert_close(entry(*args), op(*args))


def masked_index(x, mask, index):
    return torch.ops.aten._unsafe_masked_index(x, mask, [None, index], 0.5)


@needs_interpreter
def test_an_op_given_none_among_its_optional_tensors_runs_in_the_call_function():
    # `Tensor?[] indices`: the binding parses a list of tensors and refuses the None
    # ("expected Tensor as element 0 in argument 2"), the overload takes it
    torch.manual_seed(0)
    args = (torch.randn(3, 4), torch.rand(3, 2) > 0.5, torch.tensor([0, 3]))
    fn, first, report = compiled_once(masked_index, args)
    stand_in_call_function(report)
    assert report.runner.call is not None, report.runner.why_not
    torch.testing.assert_close(first, masked_index(*args))
    with torch.no_grad():
        torch.testing.assert_close(fn(*args), masked_index(*args))
    assert _aten_entry(aten._unsafe_masked_index.default) is aten._unsafe_masked_index.default._op
