#!/usr/bin/env bash
# One device call for issue 27's GEMM role bias (run with `.whl` carried; see fetch_wheels.sh): in
# A/A decisions on the fp16 tuple GEMM the candidate's instance ran ~1.5% slower than the
# reference's in every window. Each step under its own `timeout`, its files packed under $OUT:
#   a. instance_order.py: copies of the tuned GEMM built one after another in one process (the
#      first verified, as tlxdb's candidate is), timed in alternation outside tlxdb -> order.json
#   b. two copies, unverified, in the turn order tlxdb's first window uses (1 2, 2 1, ...: the
#      calls run 1 2 2 1 1 2 2 1 ...): a swing of the clock in step with that order makes copy 1
#      read slow with no role to blame (results/h200_noise_2026-12-04/README.md) -> order_two.json
#   c. aa_check.py --second-window always: every A/A candidate measured beside the baseline in a
#      second window of three instances each (A, R1, A.2, R1.2, A.3, R1.3)   -> probe_gemm.tgz
# plus gpu.txt and noise_log.txt. Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_instances.sh [ORDER_S [PROBE_S [PROBE_DECISIONS]]]
# defaults 150 200 6.
set -uo pipefail
order_s=${1:-150}
probe_s=${2:-200}
probe_decisions=${3:-6}
: "${OUT:?OUT must name the folder whose files come back}"
work=/tmp/instances
rm -rf "$work" && mkdir -p "$work"
log="$OUT/noise_log.txt"
t0=$(date +%s)
source benchmarks/device/env.sh
git log -1 --format='%H %s' >>"$OUT/gpu.txt" 2>/dev/null || true
source benchmarks/device/steps.sh
echo '[{"case_id": "4096^3", "parameters": {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}, "weight": 1.0}]' >"$work/gemm_cases.json"
knobs='{"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 5}'
kernel=tests/optimizer/providers/tune_corpus/tuple_gemm/kernel.py
half=$((order_s / 2))
step order "$half" python3 benchmarks/instance_order.py --kernel $kernel --bundle examples/matmul/hopper \
  --cases "$work/gemm_cases.json" --knobs "$knobs" --instances 4 --rounds 12 --processes 3 \
  --verify-first --out "$OUT/order.json"
step order_two "$half" python3 benchmarks/instance_order.py --kernel $kernel \
  --bundle examples/matmul/hopper --cases "$work/gemm_cases.json" --knobs "$knobs" --instances 2 \
  --rounds 12 --processes 4 --out "$OUT/order_two.json"
step probe_gemm "$probe_s" python3 benchmarks/aa_check.py --out "$work/probe_gemm" \
  --work "$work/probe_gemm_work" --decisions "$probe_decisions" --second-window always \
  --max-total-seconds $((probe_s - 45)) --kernel $kernel --bundle examples/matmul/hopper \
  --cases "$work/gemm_cases.json" --knobs "$knobs" \
  --label "probe: tuple GEMM fp16 128x256x32, every candidate a second window"
[ -d "$work/probe_gemm" ] && tar czf "$OUT/probe_gemm.tgz" -C "$work" probe_gemm probe_gemm.out probe_gemm.err
echo "== total $(($(date +%s) - t0)) s" | tee -a "$log"
ls -la "$OUT"
