"""The plan launches as many kernels as Inductor does on the reference graphs.

The kept counts (fusion_references.REFERENCES) are Inductor's on a GPU (measured on an H100, and
for the transformer block under torch 2.13's scheduler, see BEFORE_2_12); CPU_COUNTS records where
Inductor's C++ backend differs. bench/inductor_kernel_counts.py prints Inductor's count next to
the planner's on the current device, for a one-run confirmation on a GPU machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fusion_capture import traced_reference
from fusion_references import CPU_COUNTS, REFERENCES, inductor_gpu_count

from fuselint.fusion.plan import plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from inductor_kernel_counts import count_launches, inductor_launches


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_planned_launches_match_inductor_on_gpu(name):
    assert plan(traced_reference(name)).launches == REFERENCES[name][1]


def test_torch_2_11_launches_more_only_where_it_did_not_fuse_split_slices():
    assert inductor_gpu_count("transformer_block", "2.11.0+cu130") == 15
    assert inductor_gpu_count("transformer_block", "2.13.0") == REFERENCES["transformer_block"][1]
    assert inductor_gpu_count("conv_relu_maxpool", "2.11.0") == REFERENCES["conv_relu_maxpool"][1]


def test_softmax_is_one_inductor_kernel_on_cpu_too():
    fn, args = REFERENCES["softmax"][0]()
    count, calls = inductor_launches(fn, args, "cpu")
    assert count == 1, calls


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_inductor_cpu_counts_are_as_recorded(name):
    build, inductor_gpu = REFERENCES[name]
    fn, args = build()
    count, calls = inductor_launches(fn, args, "cpu")
    assert count == CPU_COUNTS.get(name, inductor_gpu), calls


TRITON_WRAPPER = """
def call(args):
    arg0_1, arg1_1, arg2_1 = args
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((16, 64), (64, 1), torch.float32)
        extern_kernels.addmm(arg1_1, arg2_1, reinterpret_tensor(arg0_1, (32, 64), (1, 32), 0), alpha=1, beta=1, out=buf0)
        buf1 = empty_strided_cuda((16, 64), (64, 1), torch.float32)
        stream0 = get_raw_stream(0)
        triton_poi_fused_gelu_0.run(buf0, buf1, 1024, stream=stream0)
        buf2 = torch.ops.aten._scaled_dot_product_flash_attention.default(buf1, buf1, buf1)
        del buf0
    return (buf1, )
"""


def test_launch_counter_reads_triton_wrappers():
    count, calls = count_launches(TRITON_WRAPPER)
    assert calls == [
        "triton_poi_fused_gelu_0",
        "extern_kernels.addmm",
        "torch.ops.aten._scaled_dot_product_flash_attention.default",
    ]
    assert count == 3
