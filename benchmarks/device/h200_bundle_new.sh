#!/usr/bin/env bash
# One device call for issue 29: `tlxdb bundle new` on a kernel that is not one of the examples
# (benchmarks/device/add_rmsnorm/: a fused residual add + RMSNorm, ref.py its PyTorch reference),
# on the GPU it finds, then `tlxdb optimize` (tune provider, no commit) on the bundle it wrote, then
# `tlxdb report`. Run with `.whl` carried (see fetch_wheels.sh). Writes under $OUT, as the steps end:
#   gpu.txt (env.sh), bundle_new.txt (the PASS/WARN/FAIL table and exit status), bundle/ (the
#   bundle as written), optimize.json (stdout: the result), optimize.log (stderr: the live log and
#   exit status), run.tgz (the run's output folder and its report, without the store).
# Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_bundle_new.sh [OPTIMIZE_SECONDS]
set -uo pipefail
limit=${1:-420}
source benchmarks/device/env.sh
tlxdb() { python3 -c 'import sys; from cli.main import main; sys.exit(main())' "$@"; }
here=benchmarks/device/add_rmsnorm
work=/tmp/add_rmsnorm
rm -rf "$work" && mkdir -p "$work"
cp "$here/kernel.py" "$here/ref.py" "$work/"  # the user's files: optimize reads, never writes them
cd "$work" || exit 1
export TLXDB_STORE=$work/store.duckdb

# LLM-sized rows (hidden 8192 and 4096) in bf16; --backend cuda: an error rather than the CPU
# interpreter if torch sees no GPU
tlxdb bundle new --kernel kernel.py --entry add_rmsnorm --reference ref.py:add_rmsnorm \
  --shape x=16384,8192 --shape residual=16384,8192 --shape weight=8192 \
  --shape x=32768,4096 --shape residual=32768,4096 --shape weight=4096 \
  --scalar eps=1e-6 --dtype bfloat16 --backend cuda --out bundle >"$OUT/bundle_new.txt" 2>&1
echo "exit=$?" >>"$OUT/bundle_new.txt"
cat "$OUT/bundle_new.txt"
cp -r bundle "$OUT/bundle" 2>/dev/null || exit 1

timeout "$limit" tlxdb optimize --kernel kernel.py --bundle bundle --output-dir "$work/run" \
  --no-commit-winner --max-total-seconds $((limit - 60)) >"$OUT/optimize.json" 2>"$OUT/optimize.log"
echo "exit=$?" >>"$OUT/optimize.log"
tail -5 "$OUT/optimize.log"
run_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' "$OUT/optimize.json")
tlxdb report "$run_id" --to "$work/report" >/dev/null 2>>"$OUT/optimize.log"
tar czf "$OUT/run.tgz" -C "$work" run report 2>/dev/null
ls -la "$OUT"
