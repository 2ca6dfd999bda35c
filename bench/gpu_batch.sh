#!/usr/bin/env bash
# One batched GPU session: environment facts, the GPU tests, Inductor's kernel counts on
# the reference graphs, and the backend benchmark. Writes everything under $OUT.
#   usage (on the GPU machine, repo root): bash bench/gpu_batch.sh [bench-budget-seconds [patterns]]
#   (patterns: a comma list for bench/backend.py --patterns; all by default)
set -uo pipefail
budget="${1:-330}"
patterns="${2:+--patterns $2}"
out="${OUT:-/tmp/fuselint-gpu}"
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then   # libcst is not installed on the GPU image
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
} 2>&1 | tee "$out/env.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/backend -x 2>&1 | tail -25 | tee "$out/gpu_tests.txt"
timeout 150 python3 bench/inductor_kernel_counts.py --verbose 2>&1 | tail -40 | tee "$out/inductor_counts.txt"
# The proof a user asks for: hand-written models against their fixed form, on this GPU.
timeout 240 python3 -m fuselint verify --unsafe-fixes --backend eager,fuselint,inductor \
  --entry fixtures/verify/gpt_block.py:entry --entry fixtures/verify/llama_mlp.py:entry \
  --entry fixtures/verify/mbconv_block.py:entry 2>&1 \
  | grep -v "^\[transformers\]" | tee "$out/verify.txt"
timeout $((budget + 90)) python3 bench/backend.py --budget "$budget" $patterns --json "$out/backend.json" --md "$out/backend.md" \
  > "$out/bench.log" 2>&1
tail -70 "$out/bench.log"
