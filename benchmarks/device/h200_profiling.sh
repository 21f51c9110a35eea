#!/usr/bin/env bash
# Device calls for issue 14 (run with `.whl` carried; see fetch_wheels.sh), each step packed into
# an archive under $OUT as soon as it ends, so a call cut short still returns what it finished.
# Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_profiling.sh overhead softmax,rmsnorm   # GPU tests + overhead
#   bash benchmarks/device/h200_profiling.sh runs matmul                 # overhead + tune runs
set -uo pipefail
what=${1:-overhead}
examples=${2:-softmax,rmsnorm}
source benchmarks/device/env.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  git log -1 --format='%H %s' 2>/dev/null
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  command -v ncu && ncu --version | tail -1
  nproc; date -u
} >"$OUT/env_$what.txt" 2>&1
if [ "$what" = overhead ]; then
  timeout 120 python3 -m pytest -q -m gpu tests/optimizer/evaluation tests/profilers 2>&1 \
    | tail -15 >"$OUT/gpu_tests.txt"
  tail -3 "$OUT/gpu_tests.txt"
  timeout 470 python3 benchmarks/h200_profiling.py --out /tmp/prof --examples "$examples" \
    --stages overhead --repeats 3 --candidates 2 >/tmp/prof.out 2>/tmp/prof.err
  echo "exit=$?" >>/tmp/prof.err
else
  timeout 200 python3 benchmarks/h200_profiling.py --out /tmp/prof --examples "$examples" \
    --stages overhead --repeats 3 --candidates 2 >/tmp/prof.out 2>/tmp/prof.err
  echo "overhead exit=$?" >>/tmp/prof.err
  cp /tmp/prof/profiling.json /tmp/prof/overhead_"$examples".json 2>/dev/null
  timeout 330 python3 benchmarks/h200_profiling.py --out /tmp/prof --examples softmax,rmsnorm,matmul \
    --stages runs --rounds 2 --run-seconds 90 >>/tmp/prof.out 2>>/tmp/prof.err
  echo "runs exit=$?" >>/tmp/prof.err
fi
tail -8 /tmp/prof.out /tmp/prof.err
cp /tmp/prof.out /tmp/prof.err /tmp/prof/ 2>/dev/null
tar czf "$OUT/prof_$what.tgz" -C /tmp/prof --exclude store.duckdb --exclude '*.wal' .
ls -la "$OUT"
