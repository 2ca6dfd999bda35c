"""Which functions are linted: compiled by a call on a method, or named in `traced-functions`."""

from __future__ import annotations

import textwrap

from fuselint.catalog import load_catalog
from fuselint.config import Config, load_config
from fuselint.source.lint import lint_text

SCHEDULER = textwrap.dedent(
    """
    import logging

    import torch

    logger = logging.getLogger(__name__)


    class EulerScheduler:
        def step(self, model_output, timestep, sample):
            if timestep > 500:
                logger.warning("late step")
            return sample - model_output

        def set_timesteps(self, n):
            print("steps", n)
    """
)


def _codes(source: str, config: Config) -> list[tuple[str, int]]:
    return [(f.code, f.span.line) for f in lint_text("sched.py", source, load_catalog(), config)]


def test_a_scheduler_step_is_not_linted_by_default():
    assert _codes(SCHEDULER, Config()) == []


def test_traced_functions_bring_a_method_into_scope_by_pattern():
    found = _codes(SCHEDULER, Config(traced_functions=("*Scheduler.step",)))
    assert ("FL103", 12) in found
    assert not [line for _code, line in found if line == 17], "set_timesteps is not named"


def test_torch_compile_of_a_method_brings_it_into_scope():
    source = SCHEDULER + "\n\nscheduler = EulerScheduler()\nstep = torch.compile(scheduler.step)\n"
    found = _codes(source, Config())
    assert ("FL103", 12) in found
    assert not [line for _code, line in found if line == 17]


def test_torch_compile_of_self_method_is_that_class_method():
    source = textwrap.dedent(
        """
        import torch


        class A:
            def __init__(self):
                self.fast = torch.compile(self.run)

            def run(self, x):
                print(x)
                return x


        class B:
            def run(self, x):
                print(x)
                return x
        """
    )
    assert [line for code, line in _codes(source, Config()) if code == "FL103"] == [10]


def test_traced_functions_is_read_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fuselint]\ntraced-functions = ["*.step", "generate"]\n')
    assert load_config(tmp_path / "pyproject.toml").traced_functions == ("*.step", "generate")


def test_an_attribute_the_class_sets_only_to_tensors_is_a_tensor():
    """DDPM's `self.timesteps = torch.from_numpy(...)`: `(self.timesteps == t).nonzero()` is a
    tensor, so the `if` on it breaks (gb0170 at scheduling_ddpm.py:662); a counter set to ints is
    a host number."""
    source = textwrap.dedent(
        """
        import numpy as np
        import torch


        class Scheduler:
            def __init__(self):
                self.timesteps = torch.from_numpy(np.arange(10))
                self.count = 0
                self.sigmas = None

            def set_sigmas(self, n):
                self.sigmas = torch.linspace(0, 1, n).float()

            def step(self, sample, timestep):
                index = (self.timesteps == timestep).nonzero()[0]
                if index == self.timesteps.shape[0] - 1:
                    return sample
                if self.sigmas.max() > 1:
                    return sample * 2
                if self.count > 3:
                    return sample * 3
                return sample
        """
    )
    found = _codes(source, Config(traced_functions=("*.step",)))
    assert [line for code, line in found if code == "FL102"] == [17, 19]


def test_helpers_called_only_where_dynamo_never_traces_are_not_linted():
    # kornia's canny calls its TorchScript-friendly loop only under `elif torch.jit.is_tracing():`,
    # which dynamo folds to False; a helper called from the live `else` is linted as before
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        def traced_loop(x):
            while bool(x.sum() > 0):
                x = x - 1
            return x


        def eager_loop(x):
            while bool(x.mean() > 0):
                x = x - 1
            return x


        class M(nn.Module):
            def forward(self, x, exporting: bool = False):
                if exporting:
                    y = x * 2
                elif torch.jit.is_tracing():
                    y = traced_loop(x)
                else:
                    y = eager_loop(x)
                if not torch.compiler.is_compiling():
                    y = traced_loop(y)
                return y
        """
    )
    assert [line for code, line in _codes(source, Config()) if code == "FL101"] == [13]


def test_the_compile_call_search_matches_where_the_word_bounded_regex_does():
    import re

    from fuselint.source.scope import _mentions_compile_call

    bounded = re.compile(r"\b(?:compile|script)\s*\(")
    texts = [
        "torch.compile(f)",
        "compile (f)",
        "recompile(f)",
        "is_compiling()",
        "x_script(f)",
        "éscript(f)",
        "a\nscript\n(f)",
        "compile",
        "",
        "recompile(f) + torch.jit.script(g)",
        "1compile(f)",
    ]
    for text in texts:
        assert _mentions_compile_call(text) == bool(bounded.search(text)), text
    assert [t for t in texts if _mentions_compile_call(t)] == [
        "torch.compile(f)",
        "compile (f)",
        "a\nscript\n(f)",
        "recompile(f) + torch.jit.script(g)",
    ]
