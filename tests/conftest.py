"""Shared test set-up: Triton's interpreter on machines without CUDA, and the fixtures' path."""

import os
from pathlib import Path

import torch

# Triton decides when it is first imported whether tl.sum/tl.max are interpreted; set the
# interpreter before anything imports triton, and only where no GPU can compile kernels.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# In CI the property tests draw the same examples every run, so a commit is judged on its own
# change and not on which random programs a run happened to draw (session 25: a planner bug older
# than the commit under test turned up by chance). Local runs keep drawing new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def fixtures_dir() -> Path:
    return ROOT / "fixtures"
