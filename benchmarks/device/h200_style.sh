#!/usr/bin/env bash
# One device call: style_tune.py on the given corpus styles at their own candidate budgets (run
# with `.whl` carried; see fetch_wheels.sh). Each style's files are packed into one archive under
# $OUT as soon as it ends, so a call cut short still returns the styles it finished.
# Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_style.sh gemm_fp16 [SECONDS_PER_STYLE]
set -uo pipefail
styles=${1:?styles, comma-separated}
limit=${2:-500}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
  >>"$OUT/gpu.txt"
for style in ${styles//,/ }; do
  start=$(date +%s)
  timeout "$limit" python3 benchmarks/style_tune.py --out /tmp/$style --styles $style \
    >/tmp/$style.out 2>/tmp/$style.err
  echo "exit=$? seconds=$(($(date +%s) - start))" >>/tmp/$style.err
  tail -3 /tmp/$style.err
  cp /tmp/$style.out /tmp/$style.err /tmp/$style/ 2>/dev/null
  tar czf "$OUT/$style.tgz" -C /tmp/$style --exclude store.duckdb --exclude bundles .
done
ls -la "$OUT"
