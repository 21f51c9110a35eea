#!/usr/bin/env bash
# One device call for issue 29: `tlxdb bundle new` on a kernel that is not one of the examples
# (benchmarks/device/add_rmsnorm/: a fused residual add + RMSNorm, ref.py its PyTorch reference),
# on the GPU it finds, then `tlxdb optimize` (tune provider, no commit) on the bundle it wrote, then
# `tlxdb export`, `show` and `report`. Each step runs under its own `timeout`, and the steps together
# end within 540 s (TOTAL_S): optimize gets what the steps before it left, less 60 s for those after.
# Writes under $OUT, as the steps end:
#   gpu.txt (the machine), bundle_new.txt (the PASS/WARN/FAIL table and exit status), bundle/ (the
#   bundle as written), optimize.json (stdout: the result), optimize.log (stderr: the live log and
#   exit status), show.txt (`tlxdb show RUN`), run/ (the run as a tlxdb export: manifest.json and
#   events.parquet, the form benchmarks/results/ keeps runs in), report.tgz (`tlxdb report`'s
#   Markdown, HTML and figures, to look at), steps.txt (each step's exit status and seconds).
# Usage on the device machine, from the repository root, with `.whl` carried (fetch_wheels.sh):
#   bash benchmarks/device/h200_bundle_new.sh
# A dry run here, on the CPU through the Triton interpreter (the venv's python, no wheels; small
# shapes, one candidate; $OUT a new temporary folder unless set):
#   bash benchmarks/device/h200_bundle_new.sh --dry-run
set -uo pipefail
total_s=${TOTAL_S:-540}
repo=$PWD
here=$repo/benchmarks/device/add_rmsnorm

if [ "${1:-}" = --dry-run ]; then
  export OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bundle_new_dry.XXXXXX")}
  python=${PYTHON:-$repo/.venv/bin/python}
  export PYTHONPATH=$repo TRITON_INTERPRET=1 PYTHONUNBUFFERED=1
  "$python" -c 'import torch, triton; print("dry run: CPU, Triton interpreter; torch", torch.__version__, "triton", triton.__version__)' \
    | tee "$OUT/gpu.txt"
  backend=cpu
  # the rows of the interpreter test (tests/cli/test_bundle_new.py), two cases; one candidate
  shapes=(--shape x=4,300 --shape residual=4,300 --shape weight=300
          --shape x=2,512 --shape residual=2,512 --shape weight=512)
  search=(--max-rounds 1 --candidates-per-round 1)
else
  : "${OUT:?OUT: the folder whose files come back}"
  python=python3
  source benchmarks/device/env.sh  # wheels, PYTHONPATH, gpu.txt; each under its own timeout
  # --backend cuda: an error rather than the CPU interpreter if torch sees no GPU
  backend=cuda
  # LLM-sized rows (hidden 8192 and 4096) in bf16
  shapes=(--shape x=16384,8192 --shape residual=16384,8192 --shape weight=8192
          --shape x=32768,4096 --shape residual=32768,4096 --shape weight=4096)
  search=(--max-candidate-seconds 60)
fi
tlxdb=("$python" -c 'import sys; from cli.main import main; sys.exit(main())')
left() { echo $((total_s - SECONDS)); }  # SECONDS: since the script started
step() {  # step NAME SECONDS COMMAND...: COMMAND under `timeout SECONDS`, its status in steps.txt
  local name=$1 limit=$2 started=$SECONDS status
  shift 2
  timeout "$limit" "$@"
  status=$?
  echo "$name exit=$status seconds=$((SECONDS - started)) limit=$limit" >>"$OUT/steps.txt"
  return $status
}

work=$(mktemp -d "${TMPDIR:-/tmp}/add_rmsnorm.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here/kernel.py" "$here/ref.py" "$work/"  # the user's files: optimize reads, never writes them
cd "$work" || exit 1
export TLXDB_STORE=$work/store.duckdb

step bundle_new 150 "${tlxdb[@]}" bundle new --kernel kernel.py --entry add_rmsnorm \
  --reference ref.py:add_rmsnorm "${shapes[@]}" --scalar eps=1e-6 --dtype bfloat16 \
  --backend "$backend" --out bundle >"$OUT/bundle_new.txt" 2>&1
echo "exit=$?" >>"$OUT/bundle_new.txt"
cat "$OUT/bundle_new.txt"
cp -r bundle "$OUT/bundle" 2>/dev/null || { echo "no bundle was written"; exit 1; }

# optimize: what is left less 60 s for export, show, report and archive; its own budget ends 90 s
# before its timeout, room for the candidate in flight and the final revalidation
optimize_s=$(($(left) - 60))
if [ "$optimize_s" -lt 150 ]; then
  echo "only ${optimize_s}s left for optimize; not started" | tee -a "$OUT/steps.txt"
  exit 1
fi
step optimize "$optimize_s" "${tlxdb[@]}" optimize --kernel kernel.py --bundle bundle \
  --output-dir "$work/run" --no-commit-winner --max-total-seconds $((optimize_s - 90)) \
  "${search[@]}" >"$OUT/optimize.json" 2>"$OUT/optimize.log"
echo "exit=$?" >>"$OUT/optimize.log"
tail -5 "$OUT/optimize.log"
# the run's id from its result, else (cut off by its timeout: no result) the store's one run
run_id=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' \
  "$OUT/optimize.json" 2>/dev/null ||
  timeout 15 "${tlxdb[@]}" query --format csv "SELECT run_id FROM runs" 2>/dev/null | tail -n +2)
if [ -n "$run_id" ]; then
  step export 15 "${tlxdb[@]}" export "$run_id" --to "$OUT/run" >/dev/null 2>>"$OUT/optimize.log"
  step show 10 "${tlxdb[@]}" show "$run_id" >"$OUT/show.txt" 2>&1
  step report 30 "${tlxdb[@]}" report "$run_id" --to "$work/report" >/dev/null 2>>"$OUT/optimize.log"
  step archive 5 tar czf "$OUT/report.tgz" -C "$work" report
else
  echo "optimize left no run in the store (optimize.log says why)" | tee -a "$OUT/steps.txt"
fi
echo "total seconds=$SECONDS of $total_s" >>"$OUT/steps.txt"
cat "$OUT/steps.txt"
ls -la "$OUT"
