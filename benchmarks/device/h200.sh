#!/usr/bin/env bash
# One device call for the GPU evidence of issues 4 and 7 (run with `.whl` carried; see
# fetch_wheels.sh). Writes everything under $OUT (at most 8 files come back: keep it to logs and
# the summaries). Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200.sh [softmax,rmsnorm,matmul]
set -uo pipefail
examples=${1:-softmax,rmsnorm,matmul}
source benchmarks/device/env.sh
python3 -m pytest -q -m gpu tests/examples tests/profilers 2>&1 | tail -20 | tee "$OUT/gpu_tests.txt"
python3 benchmarks/hopper_tune.py --out /tmp/tune --examples "$examples" 2>&1 | tee "$OUT/tune.txt"
cp /tmp/tune/tune_summary_*.json "$OUT/" 2>/dev/null
tar czf "$OUT/tune_runs.tgz" -C /tmp/tune . 2>/dev/null
ls -la "$OUT"
