"""Tensors a compiled entry's code makes or is handed where nothing in the file says "tensor":
a scheduler's `step` compiled in a sampling loop (issue 11, diffusers' DDPM and Euler), and an
index that is a 0-d tensor computed in the graph (DDPM's `self.timesteps[index + 1]`).

The fixture's findings sit on the lines where dynamo (torch 2.13) breaks; the snippets check
what must stay quiet.
"""

from __future__ import annotations

import logging
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest
from source_rules_helpers import CATALOG

from fuselint.config import Config
from fuselint.source.lint import lint_text

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "schedule_step.py"
STEPS = Config(select=("FL1",), traced_functions=("*Scheduler.step",))


def _found(text: str, config: Config = STEPS) -> dict[int, str]:
    return {f.span.line: f.code for f in lint_text("snippet.py", textwrap.dedent(text), CATALOG, config)}


def test_scheduler_step_breaks_are_flagged():
    found = _found(FIXTURE.read_text())
    assert found == {43: "FL102", 45: "FL102", 47: "FL102"}


def test_scheduler_step_findings_are_where_dynamo_breaks():
    torch = pytest.importorskip("torch")
    module = types.ModuleType("fixture")
    exec(compile(FIXTURE.read_text(), str(FIXTURE), "exec"), module.__dict__)  # noqa: S102 - our own fixture
    scheduler = module.ToyScheduler()
    scheduler.set_timesteps(10)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            explained = torch._dynamo.explain(scheduler.step)(
                torch.randn(2, 3), scheduler.timesteps[3], torch.randn(2, 3)
            )
        finally:
            logging.disable(logging.NOTSET)
    broke = {
        frame.lineno
        for reason in explained.break_reasons
        for frame in reason.user_stack[-1:]
        if frame.filename == str(FIXTURE)
    }
    assert broke == set(_found(FIXTURE.read_text()))


def test_without_the_entry_configured_the_step_is_not_linted():
    assert _found(FIXTURE.read_text(), Config(select=("FL1",))) == {}


STEP = """
import torch

class ToyScheduler:
    def __init__(self):
        self.alphas = torch.linspace(0.9, 0.1, 10)
        self.names = ["a", "b"]

    def step(self, out, timestep: int, sample, churn: float = 0.0):
{body}
"""


def _step(body: str) -> dict[int, str]:
    return _found(STEP.format(body=textwrap.indent(textwrap.dedent(body), " " * 8)))


def test_a_number_parameter_that_keys_tensor_state_is_a_tensor():
    assert _step("a = self.alphas[timestep]\nif timestep > 0:\n    sample = sample * a\nreturn sample") == {
        11: "FL102"
    }
    # through an alias, and searched for in the state
    assert _step(
        "t = timestep\nhit = self.alphas == t\nif t > 0:\n    sample = sample * 2\nreturn sample"
    ) == {12: "FL102"}


def test_a_number_parameter_that_keys_nothing_stays_a_number():
    assert _step("if timestep > 0:\n    sample = sample * 2\nreturn sample") == {}
    # keying a list, not tensor state
    assert _step("n = self.names[timestep]\nif timestep > 0:\n    sample = sample * 2\nreturn sample") == {}


def test_a_parameter_with_a_default_stays_a_host_option():
    assert _step("a = self.alphas[churn]\nif churn > 0:\n    sample = sample * a\nreturn sample") == {}


def test_forward_keeps_its_annotations():
    text = """
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.zeros(10)

        def forward(self, x, t: int):
            y = self.table[t]
            if t > 0:
                x = x + y
            return x
    """
    assert _found(text) == {}


def test_isinstance_tensor_test_narrows_the_other_branch_to_a_host_value():
    body = """
    a = self.alphas[timestep]
    if isinstance(timestep, torch.Tensor):
        i = int(timestep.item())
    else:
        i = int(timestep)
    return sample * a * i
    """
    assert _step(body) == {13: "FL101"}  # `.item()` on the tensor branch only


def test_helper_returns_a_tensor_it_builds_to_its_caller():
    text = """
    import torch
    from torch import nn

    class M(nn.Module):
        def span(self, n: int):
            return torch.tensor(min(n, 8))

        def limit(self, x):
            return x.shape[0]

        def forward(self, x):
            s = self.span(x.shape[0])
            if s > 4:
                x = x * 2
            k = self.limit(x)
            if k > 4:
                x = x * 3
            return x
    """
    assert _found(text) == {14: "FL102"}


def test_attribute_cast_from_a_non_tensor_is_not_a_tensor():
    text = """
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale
            self.scale = self.scale.to("cpu")
            self.table = torch.zeros(4)
            self.table = self.table.to("cpu")

        def forward(self, x):
            if self.scale > 0:
                x = x * 2
            if self.table[0] > 0:
                x = x * 3
            return x
    """
    assert _found(text) == {16: "FL102"}


def test_an_optional_buffer_registered_as_none_elsewhere_stays_a_tensor():
    text = """
    import torch
    from torch import nn

    class Norm(nn.Module):
        def __init__(self, track: bool):
            super().__init__()
            if track:
                self.register_buffer("count", torch.tensor(0))
            else:
                self.register_buffer("count", None)

        def forward(self, x):
            return x / float(self.count)
    """
    assert _found(text) == {14: "FL101"}


SCALAR_INDEX = FIXTURE.parent / "scalar_index.py"


def test_index_with_a_computed_scalar_tensor_is_flagged_where_dynamo_breaks():
    torch = pytest.importorskip("torch")
    found = {f.span.line: f.code for f in lint_text("s.py", SCALAR_INDEX.read_text(), CATALOG, STEPS)}
    assert found == {18: "FL101"}
    module = types.ModuleType("fixture")
    exec(compile(SCALAR_INDEX.read_text(), str(SCALAR_INDEX), "exec"), module.__dict__)  # noqa: S102 - our own fixture
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = torch._dynamo.explain(module.Picker())(torch.randn(2, 5))
    assert {
        frame.lineno
        for reason in explained.break_reasons
        for frame in reason.user_stack[-1:]
        if frame.filename == str(SCALAR_INDEX)
    } == {18}


def test_index_with_a_received_scalar_or_a_one_dim_tensor_is_quiet():
    text = """
    import torch
    from torch import nn

    class M(nn.Module):
        def forward(self, x, t):
            table = torch.arange(10.0)
            i = x.argmax(dim=-1)
            rows = torch.arange(2)
            return table[t] + table[i] + table[rows + 1] + table[0]
    """
    assert _found(text) == {}


def test_helper_returning_what_torch_nn_parallel_builds_returns_no_tensor():
    # torch's own DataParallel.forward: `inputs, kw = self.scatter(...)` is a pair of tuples
    text = """
    import torch
    from torch import nn
    from torch.nn.parallel.scatter_gather import scatter_kwargs

    class M(nn.Module):
        def scatter(self, inputs, kwargs):
            return scatter_kwargs(inputs, kwargs, [0])

        def forward(self, *inputs, **kwargs):
            inputs, kw = self.scatter(inputs, kwargs)
            if not inputs:
                inputs = ((),)
            return inputs
    """
    assert _found(text) == {}


def test_a_decorated_compiled_function_keeps_its_number_annotations():
    # its callers may be in the tree and pass ints (a decode loop's step index): dynamo specializes
    text = """
    import torch

    class Decoder:
        def __init__(self):
            self.table = torch.zeros(10)

        @torch.compile
        def step(self, x, i: int):
            y = self.table[i]
            if i > 0:
                x = x + y
            return x
    """
    assert _found(text) == {}
    configured = Config(select=("FL1",), traced_functions=("Decoder.step",))
    assert _found(text.replace("        @torch.compile\n", ""), configured) == {10: "FL102"}


def test_a_local_built_with_torch_on_both_branches_makes_a_tensor_attribute():
    text = """
    import numpy as np
    import torch

    class ToyScheduler:
        def set_timesteps(self, n: int, karras: bool = False):
            if karras:
                sigmas = torch.linspace(1.0, 0.0, n)
            else:
                sigmas = torch.from_numpy(np.linspace(1.0, 0.0, n))
            self.sigmas = sigmas.to("cpu")

        def step(self, out, timestep: int, sample):
            sigma = self.sigmas[0]
            if sigma > 0:
                sample = sample * 2
            return sample
    """
    assert _found(text) == {15: "FL102"}
    # a branch that leaves a numpy array: unknown, not a tensor
    assert (
        _found(text.replace("torch.from_numpy(np.linspace(1.0, 0.0, n))", "np.linspace(1.0, 0.0, n)")) == {}
    )


BUILT_BY_A_HELPER = """
import math

import torch


def schedule(n):
    def alpha_bar(t):
        return math.cos(t)

    betas = []
    for i in range(n):
        betas.append(min(1 - alpha_bar(i + 1) / alpha_bar(i), 0.999))
    return torch.tensor(betas, dtype=torch.float32)


class ToyScheduler:
    def __init__(self, n: int = 10):
        self.betas = schedule(n)
        self.alphas = 1.0 - self.betas
        self.steps = 0
        self.rate = 1.0 - self.steps

    def step(self, out, timestep: int, sample):
        if self.alphas[timestep] > 0.5:
            sample = sample * 2
        if self.rate > 0.5:
            sample = sample * 3
        return sample
"""


def test_an_attribute_set_from_a_same_file_function_that_builds_a_tensor_is_one():
    # `schedule` returns `torch.tensor(...)` on its only return (the nested def's return is its own),
    # and `1.0 - self.betas` is arithmetic of that tensor and a number; `1.0 - self.steps` is not.
    assert _found(BUILT_BY_A_HELPER) == {25: "FL102"}
    # A helper that returns the list it built makes no tensor.
    assert _found(BUILT_BY_A_HELPER.replace("torch.tensor(betas, dtype=torch.float32)", "betas")) == {}
    # Nor one that returns a tensor on one path and a number on another.
    other = BUILT_BY_A_HELPER.replace(
        "    betas = []\n", "    if n == 0:\n        return 0.0\n    betas = []\n"
    )
    assert _found(other) == {}


HANDED_ON = """
import torch


class ToyScheduler:
    def __init__(self):
        self.alphas_cumprod = torch.linspace(1.0, 0.1, 10)
        self.final = torch.tensor(1.0)

    def step(self, out, timestep: int, sample):
        return self.step_plms(out=out, timestep=timestep, sample=sample)

    def step_plms(self, out, timestep: int, sample):
        prev_timestep = timestep - 1
        return self._prev(sample, timestep, prev_timestep)

    def _prev(self, sample, timestep: int, prev_timestep: int):
        alpha = self.alphas_cumprod[timestep]
        alpha_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final
        return sample * alpha / alpha_prev
"""


def test_a_step_that_hands_its_timestep_on_by_keyword_to_a_method_that_indexes_with_it():
    # `step` only hands `timestep` on (by keyword, then by position); `_prev` keys the schedule
    # with it, so `step`'s timestep is a schedule element, and `prev_timestep >= 0` a tensor test.
    assert _found(HANDED_ON) == {19: "FL102"}
    # Handed to a method that only does host arithmetic with it: still an int.
    host = HANDED_ON.replace("self.alphas_cumprod[timestep]", "timestep * 2.0")
    assert _found(host.replace("self.alphas_cumprod[prev_timestep] if", "1.0 if")) == {}


PRK_STEP = """
import numpy as np
import torch


class ToyScheduler:
    def __init__(self):
        self.alphas_cumprod = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 100), 0)
        self.prk_timesteps = np.array([91, 86, 81])
        self.counter = 0

    def step(self, model_output: torch.Tensor, timestep: int, sample: torch.Tensor):
        prev_timestep = timestep - 5
        timestep = self.prk_timesteps[self.counter]
        return self._prev(sample, timestep, model_output), prev_timestep

    def _prev(self, sample, timestep: int, model_output):
        alpha_prod_t = self.alphas_cumprod[timestep]
        return sample * alpha_prod_t + model_output
"""


def test_a_method_handed_an_element_of_a_numpy_schedule_reads_it_at_a_computed_index(monkeypatch):
    # PNDM's `step_prk`: `timestep = self.prk_timesteps[k]` (numpy: a 0-d tensor to dynamo) is
    # handed to `_get_prev_sample`, whose `self.alphas_cumprod[timestep]` breaks (gb0033)
    assert _found(PRK_STEP) == {18: "FL101"}
    # the same method handed the step's own timestep (before `step` rebinds it): a received value
    assert 18 not in _found(PRK_STEP.replace("timestep = self.prk_timesteps[self.counter]\n", ""))
    torch = pytest.importorskip("torch")
    from fuselint.source.fixer import fix_text

    fixed = fix_text(
        textwrap.dedent(PRK_STEP),
        lambda t: lint_text("snippet.py", t, CATALOG, STEPS),
        unsafe=True,
    ).text
    want = "self.alphas_cumprod[torch.as_tensor(timestep,device=self.alphas_cumprod.device).unsqueeze(0)][0]"
    assert want in "".join(fixed.split())
    graphs = []
    args = (torch.randn(2, 3), torch.tensor(96), torch.randn(2, 3))
    for text in (PRK_STEP, fixed):
        module = types.ModuleType("prk")
        monkeypatch.setitem(sys.modules, "prk", module)
        exec(compile(textwrap.dedent(text), "<prk>", "exec"), module.__dict__)  # noqa: S102 - our own snippet
        scheduler = module.ToyScheduler()
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            explained = torch._dynamo.explain(scheduler.step)(*args)
            graphs.append(
                (explained.graph_count, scheduler.step(*args)[0], scheduler._prev(args[2], 7, args[0]))
            )
    assert graphs[0][0] == 2 and graphs[1][0] == 1
    assert torch.equal(graphs[0][1], graphs[1][1])
    assert torch.equal(graphs[0][2], graphs[1][2])  # a Python int from another caller reads the same


def test_arithmetic_on_a_local_tensor_makes_a_tensor_attribute():
    # flow-match Heun's `__init__`: `sigmas = timesteps / n`, `sigmas = shift * sigmas / (...)`,
    # then `self.sigmas = sigmas.to("cpu")`: `s_tmin <= sigma <= s_tmax` reads a tensor
    text = """
    import torch

    class ToyScheduler:
        def __init__(self, n: int = 100, shift: float = 1.0):
            timesteps = torch.linspace(1, n, n)
            sigmas = timesteps / n
            sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
            self.sigmas = sigmas.to("cpu")
            self.index = 0

        def step(self, model_output: torch.Tensor, timestep: int, sample: torch.Tensor):
            sigma = self.sigmas[self.index]
            gamma = 0.5 if 0.1 <= sigma <= 0.9 else 0.0
            return sample * gamma
    """
    assert _found(text) == {14: "FL102"}
    # a local that is not a tensor: `n / 2` stays a number
    assert _found(text.replace("sigmas = timesteps / n\n", "sigmas = n / 2\n")) == {}
