"""The TF32 flag the generated call function hands ``aten.cudnn_convolution`` (fuselint.backend.callgen).

It must be what ``aten.convolution`` would pass: the convolution's own float32 precision, falling
back to CUDA's and then the generic one. These settings are host state, so they are checked here
on CPU; tests/backend/test_backend_runtime_gpu.py checks the results against ATen's on a GPU.
"""

from __future__ import annotations

import pytest
import torch

from fuselint.backend import callgen

_GET = getattr(torch._C, "_get_fp32_precision_getter", None)
_SET = getattr(torch._C, "_set_fp32_precision_setter", None)
_KEYS = (("generic", "all"), ("cuda", "all"), ("cuda", "conv"), ("cuda", "rnn"))

pytestmark = pytest.mark.skipif(_GET is None, reason="this torch has no per-op float32 precision settings")


@pytest.fixture
def precision():
    """Set (backend, op) precisions; restores the legacy flag and every key afterwards, parents first."""
    legacy = torch._C._get_cudnn_allow_tf32()
    saved = {key: _GET(*key) for key in _KEYS}

    def set_(**values: str) -> None:
        for key in _KEYS:
            name = "_".join(key)
            if name in values:
                _SET(*key, values[name])

    yield set_
    torch._C._set_cudnn_allow_tf32(legacy)
    for key in _KEYS:
        _SET(*key, saved[key])
    assert torch._C._get_cudnn_allow_tf32() == legacy


def test_the_convolutions_own_setting_decides_even_where_the_legacy_flag_raises(precision):
    precision(cuda_conv="ieee", cuda_rnn="tf32")
    with pytest.raises(RuntimeError, match="different TF32 flags"):
        torch._C._get_cudnn_allow_tf32()
    assert callgen.conv_allow_tf32() is False
    assert callgen._cudnn_flags()[2] is False
    precision(cuda_conv="tf32", cuda_rnn="ieee")
    assert callgen.conv_allow_tf32() is True


def test_an_unset_convolution_falls_back_to_cuda_then_generic(precision):
    precision(generic_all="none", cuda_all="ieee")
    precision(cuda_conv="none")
    assert callgen.conv_allow_tf32() is False  # from cuda/all
    precision(cuda_all="tf32")
    precision(cuda_conv="none")
    assert callgen.conv_allow_tf32() is True
    precision(cuda_all="none", generic_all="tf32")
    precision(cuda_conv="none")
    assert callgen.conv_allow_tf32() is True  # from generic/all
    precision(generic_all="ieee")
    precision(cuda_all="none", cuda_conv="none")
    assert callgen.conv_allow_tf32() is False


def test_the_legacy_switch_still_turns_tf32_off_and_on(precision):
    torch.backends.cudnn.allow_tf32 = False
    assert callgen.conv_allow_tf32() is False
    torch.backends.cudnn.allow_tf32 = True
    assert callgen.conv_allow_tf32() is True
