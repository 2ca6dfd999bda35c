"""Generated kernels compile for a real GPU (sm_90 PTX), not only run in the interpreter.

The interpreter forgives what the compiler does not (types of loop-carried values, scalar
versus block operands); compiling each kernel shape at benchmark sizes with Triton's NVIDIA
backend, which needs no GPU, catches that on the CPU machines. Triton decides at import
whether its own library functions (tl.sum, tl.max) are interpreted, so the compiling runs
in a fresh process without TRITON_INTERPRET.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend_helpers import aten_graph  # noqa: E402

from fuselint.backend.codegen import generate  # noqa: E402
from fuselint.backend.compiler import prepare_group  # noqa: E402
from fuselint.backend.heuristics import choose_config  # noqa: E402
from fuselint.backend.lowering import lower_group  # noqa: E402
from fuselint.backend.runtime import load_kernel  # noqa: E402

_SIG = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.bool: "*i1"}
_SIG.update({torch.int64: "*i64", torch.int32: "*i32", torch.int8: "*i8", torch.uint8: "*u8"})


def _target():
    try:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)
    except Exception as exc:  # pragma: no cover - depends on the triton build
        pytest.skip(f"no NVIDIA backend in this triton: {exc}")


def compile_for_gpu(fn, shapes, dtype, max_persistent=None):
    args = [torch.empty(s, dtype=dtype, device="meta") for s in shapes]
    gm = aten_graph(fn, *args)
    names = tuple(n.name for n in gm.graph.nodes if n.op == "call_function")
    group = prepare_group(gm, names)
    ir = lower_group(group.nodes, group.inputs, group.outputs)
    cfg = choose_config(ir, interpret=False, max_persistent=max_persistent)
    source, name = generate(ir, cfg)
    launches = [(name, cfg)]
    if cfg.combine is not None:  # a split reduction: its combine kernel compiles too
        launches.append((name + "_combine", cfg.combine))
        if ir.late_stores:
            launches.append((name + "_store", cfg))
    return cfg, "\n".join(
        _ptx(load_kernel(source, fn, interpret=False), ir, c, cfg.combine) for fn, c in launches
    )


def _ptx(kernel, ir, cfg, split) -> str:
    import triton
    from triton.compiler import ASTSource

    signature = {f"in{i}": _SIG[m.dtype] for i, m in enumerate(ir.input_meta)}
    signature.update({f"out{i}": _SIG[m.dtype] for i, m in enumerate(ir.output_meta)})
    if split is not None:
        signature["ws"] = "*fp32"
    constexprs = {"XBLOCK": cfg.xblock}
    signature["XBLOCK"] = "constexpr"
    if ir.rdims:
        constexprs["RBLOCK"] = cfg.rblock
        signature["RBLOCK"] = "constexpr"
    try:
        # As a launch with torch's 16-byte-aligned allocations specializes the pointers.
        pointers = len(ir.input_meta) + len(ir.output_meta) + (split is not None)
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(pointers)}
        src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
        compiled = triton.compile(src, target=_target(), options={"num_warps": cfg.num_warps})
    except (ImportError, FileNotFoundError, RuntimeError) as exc:
        if "ptxas" in str(exc) or "cuda" in str(exc).lower() and "not found" in str(exc).lower():
            pytest.skip(f"cannot compile for CUDA here: {exc}")
        raise
    return compiled.asm["ptx"]


CASES = {
    "pointwise_bf16": (
        lambda x, b: F.gelu(x + b) * torch.sigmoid(x),
        [(8192, 8192), (8192,)],
        torch.bfloat16,
    ),
    "softmax_bf16": (lambda x: torch.softmax(x, -1), [(8192, 8192)], torch.bfloat16),
    "layer_norm_fp32": (
        lambda x, w, b: F.layer_norm(x, (8192,), w, b),
        [(8192, 8192), (8192,), (8192,)],
        torch.float32,
    ),
    "sum_dim0": (lambda x: (x * x).sum(0), [(4096, 1024)], torch.float32),
    "short_rows": (lambda x: x / x.sum(-1, keepdim=True), [(4096, 100)], torch.float16),
    "bool_where": (lambda x: torch.where(x > 0, x, 0.0) + (x < 1).to(x.dtype), [(1000, 37)], torch.float32),
    "full_reduction": (lambda x: torch.amax(x), [(300, 7)], torch.float32),
}


CASES["cat_bf16"] = (lambda a, b: torch.cat([a, b], 1) * 2, [(1024, 1024), (1024, 512)], torch.bfloat16)
CASES["softmax_looped"] = (lambda x: torch.softmax(x, -1), [(64, 50_000)], torch.float32)
# Split reductions: channels_last BatchNorm statistics (one program unsplit) and long rows.
CASES["var_mean_split"] = (
    lambda x: torch.var_mean(x.permute(0, 3, 1, 2), [0, 2, 3], correction=0),
    [(32, 112, 112, 64)],
    torch.bfloat16,
)
CASES["sum_rows_split"] = (lambda x: x.sum(-1), [(64, 200_000)], torch.float32)
CASES["normalise_split"] = (lambda x: (x - x.mean(0)) / x.std(0), [(8192, 1024)], torch.bfloat16)
# max and min keep NaN through tl.reduce with a combine function, in both kernels of a split
CASES["amax_amin_split"] = (lambda x: (x.amax(0), x.amin(0)), [(8192, 64)], torch.bfloat16)


def compile_cases(names: list[str]) -> dict:
    """Compile the named cases in this process; {name: facts or error}."""
    out = {}
    for name in names:
        fn, shapes, dtype = CASES[name]
        try:
            cfg, ptx = compile_for_gpu(fn, shapes, dtype)
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            continue
        out[name] = {
            "entry": ".entry fuselint_" in ptx,
            "persistent": cfg.persistent,
            "split": cfg.split,
            "entries": ptx.count(".entry fuselint_"),
            "blocks": [cfg.xblock, cfg.rblock, cfg.num_warps],
            "v4_loads": "ld.global.v4.b32" in ptx or "ld.global.v4.u32" in ptx,
        }
    return out


@pytest.fixture(scope="module")
def compiled_cases():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, __file__, *sorted(CASES)], capture_output=True, text=True, env=env, timeout=600
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        pytest.fail(f"compiler process failed: {proc.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if any("no NVIDIA backend" in r.get("error", "") for r in result.values()):
        pytest.skip("this triton has no NVIDIA backend")
    return result


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_compiles_to_ptx(name, compiled_cases):
    facts = compiled_cases[name]
    assert "error" not in facts, facts.get("error")
    assert facts["entry"]


def test_looped_reduction_is_looped(compiled_cases):
    assert compiled_cases["softmax_looped"]["persistent"] is False


@pytest.mark.parametrize("name", ["sum_dim0", "var_mean_split", "sum_rows_split", "amax_amin_split"])
def test_reductions_with_few_programs_split_into_two_kernels(name, compiled_cases):
    facts = compiled_cases[name]
    assert facts["split"] > 1 and facts["entries"] == 2


def test_split_normalisation_stores_in_a_third_kernel(compiled_cases):
    facts = compiled_cases["normalise_split"]
    assert facts["split"] > 1 and facts["entries"] == 3


def test_half_loads_vectorize_in_a_row_kernel(compiled_cases):
    facts = compiled_cases["softmax_bf16"]
    assert facts["blocks"] == [1, 8192, 8]
    assert facts["v4_loads"]  # 16-byte loads


if __name__ == "__main__":
    print(json.dumps(compile_cases(sys.argv[1:])))
