"""Shared test set-up: Triton's interpreter on machines without CUDA, and the fixtures' path."""

import os
from pathlib import Path

import torch

# Triton decides when it is first imported whether tl.sum/tl.max are interpreted; set the
# interpreter before anything imports triton, and only where no GPU can compile kernels.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fixtures_dir() -> Path:
    return ROOT / "fixtures"
