"""FL103: prints, logger calls and warnings in traced code; not when dynamo never traces them."""

from __future__ import annotations

import json

from click.testing import CliRunner
from source_rules_helpers import findings, lines

from fuselint.cli import main
from fuselint.source.paths import normal_path_only

SRC = """
import logging
import warnings
import torch
from torch import nn
from warnings import warn

logger = logging.getLogger(__name__)

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.logger = logging.getLogger("m")
        print("init is not traced")

    def forward(self, x):
        print(x)
        logger.warning_once("once")
        self.logger.info("step")
        logging.getLogger(__name__).debug("inline")
        warnings.warn("deprecated")
        warn("short form")
        if not torch.compiler.is_compiling():
            logger.info("eager only")
        if torch.jit.is_scripting():
            print("scripting only")
        if x.dim() > 3:
            raise ValueError(print("error path") or "bad")
        self.log("metric", x)
        return self.helper(x)

    def helper(self, x):
        logger.debug("called from forward")
        return x
"""


def test_prints_loggers_and_warnings_in_traced_code_are_flagged():
    assert lines(SRC, "FL103") == [17, 18, 19, 20, 21, 22, 33]


def test_calls_in_untraced_branches_init_and_error_paths_are_not_flagged():
    flagged = set(lines(SRC, "FL103"))
    assert not flagged & {14, 24, 26, 28, 29}


EARLY_EXIT = """
import logging
import torch
from torch import nn
from transformers.utils import is_tracing

logger = logging.getLogger(__name__)

class M(nn.Module):
    def forward(self, ids, mask=None):
        self.warn_padding(ids, mask)
        self.note(ids)
        return ids * 2

    def warn_padding(self, ids, mask):
        if is_tracing(ids):
            return
        if mask is None and (ids == 0).any():
            logger.warning("padding without a mask")

    def note(self, ids):
        if not torch.compiler.is_compiling():
            return
        logger.info("compiling")
"""


def test_code_after_a_return_taken_while_tracing_is_not_flagged_and_after_one_not_taken_is():
    # dynamo folds `is_tracing(t)` (transformers) and `is_compiling()` to True: `warn_padding`
    # returns at once (torch 2.13: 1 graph, no break), `note` goes on to its logger call
    assert lines(EARLY_EXIT, "FL103") == [24]
    assert lines(EARLY_EXIT, "FL102") == []


OFF_PATH = """
import logging
import warnings
import torch
from torch import nn

logger = logging.getLogger(__name__)

class M(nn.Module):
    def forward(self, x, cross_attention_kwargs=None, use_cache=False, **kwargs):
        if cross_attention_kwargs is not None:
            if cross_attention_kwargs.get("scale", None) is not None:
                logger.warning("Passing `scale` to `cross_attention_kwargs` is deprecated.")
        unused = [k for k in kwargs if k != "mask"]
        if len(unused) > 0:
            logger.warning(f"attention_kwargs {unused} are not expected and will be ignored.")
        if x.dim() != 3:
            print(x.shape)
            raise ValueError("x must be 3-d")
        if use_cache:
            warnings.warn("use_cache is incompatible with gradient checkpointing")
        if x.shape[0] > 8:
            logger.info("a large batch")
        return x
"""


def test_findings_off_the_normal_path_say_so_and_carry_their_path():
    found = {f.span.line: f for f in findings(OFF_PATH, "FL103")}
    assert sorted(found) == [13, 16, 18, 21, 23]
    paths = {line: dict(f.details).get("path") for line, f in found.items()}
    assert paths == {13: "deprecation", 16: "misuse", 18: "error", 21: "misuse", 23: None}
    assert found[13].message.endswith("(only on a deprecated-argument path)")
    assert "only on" not in found[23].message


ROUNDED_ARGUMENTS = """
import logging
from torch import nn

logger = logging.getLogger(__name__)

class M(nn.Module):
    def forward(self, x, height=64, width=64, frames=9):
        if height % 16 != 0 or width % 16 != 0:
            logger.warning(f"`height` and `width` have to be divisible by 16 but are {height} and {width}.")
        if frames % 4 != 1:
            logger.warning("`frames - 1` has to be divisible by 4. Rounding to the nearest number.")
        if x.shape[-1] % 16 != 0:
            logger.warning("the sequence length is not divisible by 16: it is padded")
        return x
"""


def test_a_warning_that_an_argument_has_to_be_divisible_is_a_misuse_path():
    # diffusers' check_inputs warns so and rounds the caller's height/width; a warning about the
    # data's length (the last one) stays on the normal path
    found = {f.span.line: dict(f.details).get("path") for f in findings(ROUNDED_ARGUMENTS, "FL103")}
    assert found == {10: "misuse", 12: "misuse", 14: None}


def test_normal_path_only_keeps_the_findings_on_the_normal_path():
    kept = normal_path_only(findings(OFF_PATH, "FL103"))
    assert [f.span.line for f in kept] == [23]


def test_check_paths_normal_leaves_side_roads_out(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(OFF_PATH)
    runner = CliRunner()
    every = runner.invoke(main, ["check", "--no-cache", "--select", "FL103", "--format", "json", str(model)])
    normal = runner.invoke(
        main,
        ["check", "--no-cache", "--select", "FL103", "--format", "json", "--paths", "normal", str(model)],
    )
    assert every.exit_code == 1 and normal.exit_code == 1
    assert len(json.loads(every.output)) == 5
    assert [f["location"]["row"] for f in json.loads(normal.output)] == [23]
