"""Break sites that real models hit (issue 11 part 2): numpy numbers and buffers in branches, RNN modules.

Each fixture's findings sit on the lines where dynamo (torch 2.13) breaks the graph; the snippets
check what must stay quiet.
"""

from __future__ import annotations

import logging
import types
import warnings
from pathlib import Path

import pytest
from source_rules_helpers import findings, lines

BREAKS = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"


def _codes_by_line(name: str) -> dict[int, str]:
    text = (BREAKS / name).read_text()
    return {f.span.line: f.code for f in findings(text, "FL1")}


def _dynamo_break_lines(name: str, cls: str, *shape: int) -> set[int]:
    torch = pytest.importorskip("torch")
    path = BREAKS / name
    module = types.ModuleType("fixture")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - our own fixture
    model = getattr(module, cls)().eval()
    torch._dynamo.reset()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            explained = torch._dynamo.explain(model)(torch.randn(*shape))
        finally:
            logging.disable(logging.NOTSET)
    return {
        frame.lineno
        for reason in explained.break_reasons
        for frame in reason.user_stack[-1:]
        if frame.filename == str(path)
    }


def test_branch_on_numpy_of_config_numbers_is_flagged_on_every_jump():
    found = _codes_by_line("numpy_config.py")
    # the `and` operand, and both `if must_pad:` (reformer's 2023, 2028, 2073)
    assert [line for line, code in sorted(found.items()) if code == "FL102"] == [33, 34, 41]
    assert found[21] == "FL101"  # the np.lcm call itself keeps its fix


def test_numpy_branch_finding_is_where_dynamo_breaks():
    assert _dynamo_break_lines("numpy_config.py", "Encoder", 2, 5, 12) <= set(
        _codes_by_line("numpy_config.py")
    )


def test_buffer_branch_and_lstm_call_are_flagged_where_dynamo_breaks():
    found = _codes_by_line("buffer_numbers.py")
    assert found == {27: "FL102", 44: "FL108"}
    assert _dynamo_break_lines("buffer_numbers.py", "Encoder", 2, 4, 10) == {27, 44}


NUMPY_MODULE = """
import math
import numpy as np
import torch
from torch import nn

def chunk(config):
    return {helper}

class M(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, x):
        n = chunk(self.config)
        {line}
        return x
"""


@pytest.mark.parametrize(
    ("helper", "line", "flagged"),
    [
        ("np.lcm(config.a, config.b)", "if x.shape[-1] % n: x = x + 1", True),
        ("np.sqrt(config.d)", "if n > 2: x = x + 1", True),
        ("np.prod([config.a, config.b])", "pad = n > 2 or x.shape[0] > 1", True),
        ("math.lcm(config.a, config.b)", "if x.shape[-1] % n: x = x + 1", False),
        ("np.isscalar(config.d)", "if n: x = x + 1", False),
        ("np.sqrt(config.d)", "x = x / n", False),
        ("np.sqrt(config.d)", "x = x * float(n)", False),
        ("config.a", "if x.shape[-1] % n: x = x + 1", False),
        ("np.lcm(config.a, config.b)", "pad = x.shape[0] > 1 and n > 2", False),  # the last operand: no jump
    ],
)
def test_numpy_numbers_in_branches(helper, line, flagged):
    source = NUMPY_MODULE.format(helper=helper, line=line)
    in_forward = [n for n in lines(source, "FL102") + lines(source, "FL101") if n == 17]
    assert bool(in_forward) is flagged


def test_and_outside_a_test_with_a_tensor_operand_is_one_finding():
    source = """
    import torch
    from torch import nn

    class M(nn.Module):
        def forward(self, x):
            keep = x.sum() > 0 and x.shape[0] > 1
            if keep:
                x = x * 2
            if x.mean() > 0 and x.shape[0] > 1:
                x = x + 1
            skip = not torch.compiler.is_compiling() and x.sum() > 0
            return x
    """
    assert lines(source, "FL102") == [7, 8, 10]


def test_only_rnn_modules_not_cells_are_flagged():
    source = """
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(4, 4)
            self.cell = nn.LSTMCell(4, 4)
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            h, c = self.cell(x[0])
            y, _ = self.gru(self.proj(x))
            return y + h
    """
    assert lines(source, "FL108") == [14]


def test_parameter_and_buffer_attributes_are_tensors():
    source = """
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(()))
            self.limit = nn.Buffer(torch.tensor(3))
            self.width = 4

        def forward(self, x):
            if self.scale > 1:
                x = x * 2
            if max(self.limit, 2) > x.shape[-1]:
                x = x + 1
            if self.width > 2:
                x = x - 1
            return x
    """
    assert lines(source, "FL102") == [13, 15]


def test_a_buffer_whose_data_another_method_swaps_stays_a_tensor():
    # nflows' ActNorm: `if self.training and not self.initialized:` breaks under dynamo in training
    # (gb0170, checked on this snippet); `_initialize` assigns `self.initialized.data`, which swaps a
    # tensor's data: the buffer stays a tensor (it was taken for unknown, and the line was missed)
    source = """
    import torch
    from torch import nn

    class ActNorm(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.register_buffer("initialized", torch.tensor(False, dtype=torch.bool))
            self.log_scale = nn.Parameter(torch.zeros(features))

        def forward(self, inputs):
            if self.training and not self.initialized:
                self._initialize(inputs)
            return inputs * torch.exp(self.log_scale)

        def _initialize(self, inputs):
            with torch.no_grad():
                self.log_scale.data = -torch.log(inputs.std(dim=0))
                self.initialized.data = torch.tensor(True, dtype=torch.bool)
    """
    assert lines(source, "FL102") == [12]


def test_rnn_finding_sits_on_the_first_touch_of_the_module():
    # torch_geometric's JumpingKnowledge: dynamo breaks at the assert that reads `self.lstm`
    source = """
    import torch
    from torch import nn

    class JumpingKnowledge(nn.Module):
        def __init__(self, mode, channels):
            super().__init__()
            self.lstm = nn.LSTM(channels, channels, bidirectional=True) if mode == "lstm" else None
            self.lstm = nn.LSTM(channels, channels)

        def forward(self, xs):
            assert self.lstm is not None
            alpha, _ = self.lstm(torch.stack(xs, dim=1))
            return alpha
    """
    assert lines(source, "FL108") == [12]


MASK_READS = "untuned4_sites.py"


def _marked(word: str) -> set[int]:
    text = (BREAKS / MASK_READS).read_text().splitlines()
    return {n for n, line in enumerate(text, 1) if f"# {word}" in line}


def test_segment_anything_shapes_are_flagged_on_their_break_lines():
    assert _codes_by_line(MASK_READS) == {
        23: "FL106",
        34: "FL101",
        42: "FL106",
        51: "FL107",
        59: "FL106",
        67: "FL102",
    }
    assert set(_codes_by_line(MASK_READS)) == _marked("break")


def test_segment_anything_shapes_break_under_dynamo_where_flagged():
    torch = pytest.importorskip("torch")
    path = BREAKS / MASK_READS
    module = types.ModuleType("fixture")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - our own fixture
    labels = torch.tensor([-1, 0, 1, 0, 1, -1])
    runs = [
        ("AugmentedMask", (torch.rand(6, 4), labels)),
        ("InterpolateSize", (torch.rand(1, 1, 8, 8), torch.tensor([12.0, 10.0]))),
        ("AsTensorMask", (torch.rand(6, 4), torch.rand(6))),
        ("ListByTensor", (torch.rand(6, 4), torch.rand(6))),
        ("MovedMask", (torch.rand(2, 5, 4), torch.tensor([[1, 2, 3, 4, 5], [2, 1, 1, 1, 1]]))),
        ("ChainedCompare", (torch.tensor(1.0), torch.tensor(1.2))),
    ]
    found: set[int] = set()
    for name, args in runs:
        torch._dynamo.reset()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            logging.disable(logging.CRITICAL)
            try:
                explained = torch._dynamo.explain(getattr(module, name)().eval())(*args)
            finally:
                logging.disable(logging.NOTSET)
        found |= {
            frame.lineno
            for reason in explained.break_reasons
            for frame in reason.user_stack[-1:]
            if frame.filename == str(path)
        }
    assert found == _marked("break")


def test_augmented_assignment_without_a_mask_and_loops_over_lists_stay_quiet():
    source = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, x: torch.Tensor, idx: torch.Tensor, size_list):
                x[idx] += 1.0
                x[x > 0] = 0.0
                parts = [p * 2 for p in x.split(2)]
                names = [str(i) for i in range(3)]
                y = self.head(x, size_list[0]) + self.resize(x)
                return torch.nn.functional.interpolate(y, size=x.shape[-2:]), parts, names

            def head(self, x, target_size):
                return torch.nn.functional.interpolate(x, size=target_size)

            def resize(self, pixels: torch.Tensor):
                emb, frames, width = self.patches(pixels)
                height = emb.size(1) // width
                return torch.nn.functional.interpolate(emb, size=(height, width))
    """
    assert findings(source, "FL1") == []


def test_augmented_boolean_mask_on_a_value_of_unknown_kind_is_flagged():
    # segment-anything's prompt encoder: the target comes from a submodule's method.
    source = """
        import torch
        from torch import nn

        class M(nn.Module):
            def forward(self, points: torch.Tensor, labels: torch.Tensor):
                emb = self.pe.forward_with_coords(points)
                emb[labels == -1] = 0.0
                emb[labels == 0] += self.w
                return emb
    """
    assert lines(source, "FL106") == [9]
