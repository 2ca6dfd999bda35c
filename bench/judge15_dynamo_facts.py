"""Which training-step calls and which numpy forms break the graph (judge15's facts, torch 2.13).

Each case is compiled alone (backend eager, no fullgraph) and prints the first line of every break
reason dynamo counts ("graph_break" and "unimplemented" counters), or "-" for none. The FL108
optimizer rule and the FL102 numpy-on-an-object's-arrays extension rest on this table.

    PYTHONPATH=. python bench/judge15_dynamo_facts.py
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn


def break_reasons(fn, *args) -> list[str]:
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    torch.compile(fn, backend="eager")(*args)
    return [k.splitlines()[0][:70] for k in (*counters["graph_break"], *counters["unimplemented"])]


class Space:
    """A configuration object holding numpy arrays, as a gymnasium Box or MultiDiscrete does."""

    def __init__(self) -> None:
        self.low = np.zeros((3, 4, 4))
        self.high = np.full((3, 4, 4), 255.0)
        self.nvec = np.array([3, 4])
        self.n = np.int64(5)
        self.shape = (3, 4, 4)
        self.values = [0, 0, 1]
        self.count = 3


def training_cases(model: nn.Module, x: torch.Tensor) -> dict:
    cases = {}
    for name, make in [
        ("SGD", lambda p: torch.optim.SGD(p, lr=0.1)),
        ("Adam", lambda p: torch.optim.Adam(p, lr=0.1)),
        ("AdamW", torch.optim.AdamW),
        ("RMSprop", torch.optim.RMSprop),
        ("Adagrad", torch.optim.Adagrad),
    ]:
        opt = make(model.parameters())
        cases[f"{name}.step()"] = opt.step
        cases[f"{name}.zero_grad()"] = opt.zero_grad
    scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.SGD(model.parameters(), lr=0.1), 1)
    cases["StepLR.step()"] = scheduler.step
    cases["clip_grad_norm_"] = lambda: nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    cases["module.zero_grad()"] = model.zero_grad
    cases["loss.backward()"] = lambda: model(x).sum().backward()
    return cases


NUMPY_CASES = {
    "if np.any(space.low != 0)": lambda x, s: x + 1 if np.any(s.low != 0) else x,
    "np.any(...) or np.any(...)": lambda x, s: x + 1 if (np.any(s.low != 0) or np.any(s.high != 255)) else x,
    "if np.any(list)": lambda x, s: x + 1 if np.any(s.values) else x,
    "if np.prod(shape) > 10": lambda x, s: x + 1 if np.prod(s.shape) > 10 else x,
    "if np.sqrt(int) > 1": lambda x, s: x + 1 if np.sqrt(s.count) > 1 else x,
    "if np.float32(int) > 1": lambda x, s: x + 1 if np.float32(s.count) > 1 else x,
    "if np.max(arr) > 1": lambda x, s: x + 1 if np.max(s.high) > 1 else x,
    "if (arr == 0).all()": lambda x, s: x + 1 if (s.low == 0).all() else x,
    "int(arr[0]) as a size": lambda x, s: x.new_zeros(int(s.nvec[0])),
    "int(numpy scalar) as a size": lambda x, s: x.new_zeros(int(s.n)),
    "arr.shape[0] as a size": lambda x, s: x.new_zeros(s.low.shape[0]),
    "x * np.log(2.0)": lambda x, s: x * np.log(2.0),
    "x * np.pi": lambda x, s: x * np.pi,
}


def main() -> None:
    warnings.simplefilter("ignore")
    model, x = nn.Linear(4, 2), torch.randn(3, 4)
    model(x).sum().backward()  # gradients for the steps to read
    for label, fn in training_cases(model, x).items():
        print(f"{label:32s} {break_reasons(fn) or '-'}")
    space = Space()
    for label, fn in NUMPY_CASES.items():
        print(f"{label:32s} {break_reasons(fn, x, space) or '-'}")


if __name__ == "__main__":
    main()
