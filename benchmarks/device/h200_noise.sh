#!/usr/bin/env bash
# One device call for issue 27's GPU evidence (run with `.whl` carried; see fetch_wheels.sh), each
# step under its own `timeout` and packed into one archive under $OUT as soon as it ends, so a
# call cut short still returns the steps it finished (at most 8 files come back; this writes 5):
#   a. style_tune.py on elementwise_noisy: tune the scale_shift example (a two-entry autotune
#      list, BLOCK 16/32, one warp) on its 64M and noisy 4M+3-element cases    -> style.tgz
#   b. aa_check.py on the scale_shift hopper bundle: A/A decisions, the kernel pinned to one
#      config (BLOCK 1024, 4 warps) so that every candidate runs the baseline's kernel
#                                                                             -> aa_elementwise.tgz
#   c. aa_check.py on the fp16 tuple GEMM of the corpus at its tuned configuration (the winner of
#      results/h200_style_tune_2026-12-03c, 128x256x32, 8 warps, 5 stages, GROUP_M 8) on
#      examples/matmul/hopper with one 4096^3 fp16 case                             -> aa_gemm.tgz
# plus gpu.txt (env.sh) and noise_log.txt (each step's exit status, seconds and last lines).
# Each run gets the step's seconds less a margin as tlxdb's time budget (the tune run's
# max_total_seconds less STYLE_MARGIN_S=75 for its revalidation and the alternated timing;
# aa_check's --max-total-seconds less AA_MARGIN_S=45), so it stops proposing in time and ends
# properly; a SIGTERM from `timeout` ends an aa_check run as Ctrl-C does (its summary is written).
#
# Usage on the device machine, from the repository root (a step given 0 seconds is skipped):
#   bash benchmarks/device/h200_noise.sh [STYLE_S [AA_ELEMENTWISE_S [AA_GEMM_S [DECISIONS]]]]
# defaults 240 150 130 20: about 540 s with the wheel install. By estimate (10-16 s an A/A
# decision) the A/A steps then decide about 6-8 candidates each; `... 0 300 240 20` in a second
# call gives each about 20. NOISE_TARGET=host runs the same
# steps on the CPU interpreter with the host bundles (no env.sh; PYTHON names the interpreter):
#   NOISE_TARGET=host OUT=/tmp/out PYTHON=.venv/bin/python bash benchmarks/device/h200_noise.sh 300 400 400 2
set -uo pipefail
style_s=${1:-240}
aa_elementwise_s=${2:-150}
aa_gemm_s=${3:-130}
decisions=${4:-20}
target=${NOISE_TARGET:-hopper}
margin=${AA_MARGIN_S:-45}
style_margin=${STYLE_MARGIN_S:-75}
py=${PYTHON:-python3}
: "${OUT:?OUT must name the folder whose files come back}"
work=/tmp/noise
rm -rf "$work" && mkdir -p "$work"
log="$OUT/noise_log.txt"
t0=$(date +%s)

if [ "$target" = host ]; then
  export TRITON_INTERPRET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  gemm_case='[{"case_id": "64^3", "parameters": {"M": 64, "N": 64, "K": 64, "dtype": "float32"}, "weight": 1.0}]'
  style_args=(--target host --max-rounds 3)
else
  source benchmarks/device/env.sh
  git log -1 --format='%H %s' >>"$OUT/gpu.txt" 2>/dev/null || true
  gemm_case='[{"case_id": "4096^3", "parameters": {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}, "weight": 1.0}]'
  style_args=()
fi
echo "$gemm_case" >"$work/gemm_cases.json"
gemm_knobs='{"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 5}'
elementwise_knobs='{"BLOCK": 1024, "num_warps": 4}'

source benchmarks/device/steps.sh  # step NAME SECONDS COMMAND...

# aa NAME SECONDS aa_check.py options...
aa() {
  local name=$1 limit=$2
  shift 2
  local budget=$((limit - margin))
  [ "$budget" -ge 10 ] || budget=10
  step "$name" "$limit" "$py" benchmarks/aa_check.py --out "$work/$name" --work "$work/${name}_work" \
    --decisions "$decisions" --max-total-seconds "$budget" "$@"
  [ -d "$work/$name" ] && tar czf "$OUT/$name.tgz" -C "$work" "$name" "$name.out" "$name.err"
}

style_budget=$((style_s - style_margin))
[ "$style_budget" -ge 30 ] || style_budget=30
step style "$style_s" "$py" benchmarks/style_tune.py --out "$work/style" --styles elementwise_noisy \
  --max-total-seconds "$style_budget" ${style_args[@]+"${style_args[@]}"}
[ -d "$work/style" ] && cp "$work/style.out" "$work/style.err" "$work/style/" &&
  tar czf "$OUT/style.tgz" -C "$work/style" --exclude "store.duckdb*" --exclude bundles --exclude .lease .

aa aa_elementwise "$aa_elementwise_s" --kernel examples/scale_shift/kernel.py \
  --bundle "examples/scale_shift/$target" --pin-autotune 1 --knobs "$elementwise_knobs" \
  --label "scale_shift, BLOCK 1024, 4 warps, examples/scale_shift/$target"

aa aa_gemm "$aa_gemm_s" --kernel tests/optimizer/providers/tune_corpus/tuple_gemm/kernel.py \
  --bundle "examples/matmul/$target" --cases "$work/gemm_cases.json" --knobs "$gemm_knobs" \
  --label "tuple GEMM fp16 128x256x32, 8 warps, 5 stages, examples/matmul/$target"

echo "== total $(($(date +%s) - t0)) s" | tee -a "$log"
ls -la "$OUT"
