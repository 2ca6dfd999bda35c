"""FL103: prints, logger calls and warnings in traced code; not when dynamo never traces them."""

from __future__ import annotations

from source_rules_helpers import lines

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
