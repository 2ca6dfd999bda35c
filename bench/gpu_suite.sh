#!/usr/bin/env bash
# Issue 12's whole suite on one commit, in the parts one device call can hold (10 minutes each):
#   bash bench/gpu_suite.sh hf       # GPT-2, LLaMA, BERT, T5, ViT: bf16, the five backends
#   bash bench/gpu_suite.sh timm     # ResNet-50, ConvNeXt, EfficientNet, MobileNetV3: the same; then
#                                    # the training steps (GPT-2, ResNet-50): eager, fuselint, Inductor
#   bash bench/gpu_suite.sh rest     # the memory-bound patterns
#   bash bench/gpu_suite.sh fixgain  # issue 10's gain of removed breaks (fuselint and Inductor; Inductor's
#                                    # cold compile of big_bird's 13 graphs alone takes 66-76 s)
#   bash bench/gpu_suite.sh fp32     # float32 inference of the nine: eager, fuselint, Inductor
#   bash bench/gpu_suite.sh verify ["llama gpt2"]  # `fuselint verify` on suite models from their packages
#                                    # (LLaMA, GPT-2, T5, ResNet-50 by default): original and fixed source, as a
#                                    # user runs it (unpinned)
#   bash bench/gpu_suite.sh diag     # ResNet-50 under verify's timing and the suite's, shared model or not
#                                    # (bench/verify_vs_suite.py; session 26's open question)
#   bash bench/gpu_suite.sh host     # host µs per call inside the graph callable and around it, per kernel, and
#                                    # per launch of each kind on two synthetic graphs (bench/runtime_host.py;
#                                    # issue 12 part 2's per-kernel host cost)
#   python bench/models.py --merge $OUT/hf.json,$OUT/timm.json --md models-bf16.md   # the table, no GPU
# Writes under $OUT. Each stage has its own time limit, so that one hung compile costs one stage.
# On the device image: libcst from the carried wheels (.whl/), the checkout on PYTHONPATH.
set -uo pipefail
part="${1:?hf, timm, rest, fixgain, fp32, verify, diag or host}"
case "$part" in hf|timm|rest|fixgain|fp32|verify|diag|host) ;; *) echo "unknown part: $part (hf, timm, rest, fixgain, fp32, verify, diag or host)" >&2; exit 2 ;; esac
out="${OUT:-/tmp/fuselint-gpu}"
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then   # libcst (and diffusers, fair-esm for fix_gain) are not on the image
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
five=eager,fuselint,inductor,fuselint-cudagraphs,inductor-reduce-overhead
# The timing rounds run pinned to one CPU (the compiles keep every CPU): unpinned, a host-bound model's rounds
# split into two modes 1.7x apart on the H200 host (session 25: MobileNetV3 bf16, fuselint 2.7-3.1 or 5.0-5.6 ms).
# Pinned, a run of slow rounds still fell on some models (session 27: ResNet-50's last three of 8 rounds slow for every
# backend, 1.05 by the ratio of medians and 0.88 in 16 rounds; T5 1.12 and 0.93), so inference takes 16 rounds
# (8 more cost about 10 s a part; the compiles dominate).
pin="--pin $(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')"
# The code's fingerprint (the device's copy of .git may be older than the working tree it copies):
# the same command on a checkout names the commit that ran.
{ echo "code $(find fuselint bench -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"
  nvidia-smi --query-gpu=name --format=csv,noheader; uptime; } > "$out/env-$part.txt"
case "$part" in
  hf)
    timeout 560 python3 bench/models.py --models gpt2,llama,bert,t5enc,vit --backends "$five" \
      $pin --rounds 16 --rep 10 --budget 390 --err-batches 5 --json "$out/hf.json" --md "$out/hf.md" > "$out/hf.log" 2>&1 ;;
  timm)
    timeout 330 python3 bench/models.py --models resnet50,convnext,efficientnet,mobilenetv3 --backends "$five" \
      $pin --rounds 16 --rep 10 --budget 300 --err-batches 5 --json "$out/timm.json" --md "$out/timm.md" > "$out/timm.log" 2>&1
    # The training steps are host-bound: on an H100 one process's per-round ratio of GPT-2's walls ran from
    # 0.59 to 1.01 (bench/results/h100-s14/train_prof.txt), so they take three times the rounds of inference (16 rounds gave 1.05, then 0.94 in 32, on one commit;
    # session 27: 1.01 in 32, 0.94 in 48).
    timeout 260 python3 bench/models.py --dtypes "" --train gpt2,resnet50 --backends eager,fuselint,inductor \
      $pin --rounds 48 --rep 20 --budget 210 --json "$out/train.json" --md "$out/train.md" > "$out/train.log" 2>&1 ;;
  fp32)
    timeout 560 python3 bench/models.py --dtypes float32 --backends eager,fuselint,inductor \
      $pin --rounds 12 --rep 10 --budget 480 --err-batches 5 --json "$out/fp32.json" --md "$out/fp32.md" > "$out/fp32.log" 2>&1 ;;
  rest)
    timeout 200 python3 bench/backend.py --budget 150 --no-cold --json "$out/backend.json" --md "$out/backend.md" \
      > "$out/backend.log" 2>&1 ;;
  verify)
    # Each entry: its proof (a child process per trial, each compiling with fuselint and Inductor), then
    # the timings; about two minutes for an HF model on the H200. A list of models may follow the part.
    for m in ${2:-llama gpt2 t5enc resnet50}; do
      timeout 280 python3 -m fuselint verify --entry "bench/suite_entries/suite.py:$m" --unsafe-fixes \
        > "$out/verify-$m.txt" 2>&1
      echo "(exit $?)" >> "$out/verify-$m.txt"
    done
    tail -n 40 "$out"/verify-*.txt
    exit 0 ;;
  diag)
    timeout 560 python3 bench/verify_vs_suite.py bench/suite_entries/suite.py:resnet50 > "$out/verify_vs_suite.txt" 2>&1
    tail -n 20 "$out/verify_vs_suite.txt"
    exit 0 ;;
  host)
    timeout 290 python3 bench/runtime_host.py --models pointwise,mms,convs,gpt2,llama,bert,t5enc,vit > "$out/host-hf.md" 2>&1
    timeout 280 python3 bench/runtime_host.py --models resnet50,convnext,efficientnet,mobilenetv3 > "$out/host-timm.md" 2>&1
    cat "$out"/host-*.md
    exit 0 ;;
  fixgain)
    timeout 570 python3 bench/fix_gain.py --device cuda --budget 530 --backends fuselint,inductor \
      --md "$out/fix_gain.md" --json "$out/fix_gain.json" > "$out/fix_gain.log" 2>&1 ;;
esac
tail -n 12 "$out"/*.md
