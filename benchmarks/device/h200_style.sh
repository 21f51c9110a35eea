#!/usr/bin/env bash
# One device call: style_tune.py on the given corpus styles at their own candidate budgets (run
# with `.whl` carried; see fetch_wheels.sh). Each style's files are packed into one archive under
# $OUT as soon as it ends, so a call cut short still returns the styles it finished.
# Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_style.sh gemm_fp16 [SECONDS_PER_STYLE [style_tune.py options]]
set -uo pipefail
styles=${1:?styles, comma-separated}
limit=${2:-500}
shift $(($# < 2 ? $# : 2))  # what is left goes to style_tune.py
source benchmarks/device/env.sh
for style in ${styles//,/ }; do
  start=$(date +%s)
  timeout "$limit" python3 benchmarks/style_tune.py --out /tmp/$style --styles $style "$@" \
    >/tmp/$style.out 2>/tmp/$style.err
  echo "exit=$? seconds=$(($(date +%s) - start))" >>/tmp/$style.err
  tail -3 /tmp/$style.err
  cp /tmp/$style.out /tmp/$style.err /tmp/$style/ 2>/dev/null
  tar czf "$OUT/$style.tgz" -C /tmp/$style --exclude store.duckdb --exclude bundles .
done
ls -la "$OUT"
