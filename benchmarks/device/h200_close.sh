#!/usr/bin/env bash
# One device call for what issues 18 and 15 still lacked on the H200 (run with `.whl` carried; see
# fetch_wheels.sh), most needed first, each step packed into one archive under $OUT as soon as it
# ends (at most 8 files come back), so a call cut short still returns the steps it finished:
#   1. `tlxdb optimize --devices all` on the softmax hopper bundle, finished through revalidation;
#   2. style_tune.py on the tuple-assigned bf16 GEMM, then 3. on the fp16 GEMM.
# Usage on the device machine, from the repository root: bash benchmarks/device/h200_close.sh ROUNDS
set -uo pipefail
rounds=${1:-12}
source benchmarks/device/env.sh
git log -1 --format='%H %s' >>"$OUT/gpu.txt" 2>/dev/null || true

E=examples/softmax/hopper
mkdir -p /tmp/devices
start=$(date +%s)
timeout 150 python3 -c "import sys; from cli.main import main; sys.exit(main())" optimize \
  --kernel examples/softmax/kernel.py --harness $E/harness.py --cases $E/cases.json \
  --target $E/target.json --devices all --max-rounds 1 --candidates-per-round 2 \
  --max-candidate-seconds 60 --max-total-seconds 120 --store /tmp/devices/store.duckdb \
  --output-dir /tmp/devices/run --no-commit-winner --result-format summary \
  >/tmp/devices/result.json 2>/tmp/devices/optimize_stderr.txt
echo "exit=$? seconds=$(($(date +%s) - start))" >>/tmp/devices/optimize_stderr.txt
tail -3 /tmp/devices/optimize_stderr.txt
tar czf "$OUT/devices.tgz" -C /tmp/devices --exclude store.duckdb .

bash benchmarks/device/h200_style.sh gemm_bf16,gemm_fp16 220 --max-rounds "$rounds"
ls -la "$OUT"
