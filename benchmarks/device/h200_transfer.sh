#!/usr/bin/env bash
# One device call for issue 30's transfer evidence (run with `.whl` carried; see fetch_wheels.sh):
# one phase of benchmarks/transfer_tune.py under `timeout`, its files packed into $OUT as soon as
# it ends, then each of its runs exported (`tlxdb export RUN --to DIR`: Parquet plus a manifest)
# and packed too, so a call cut short still returns what it finished. Files back (at most 8 come
# back; this writes 4): gpu.txt (env.sh), transfer_log.txt (the step's exit status, seconds and
# last lines), PHASE.tgz (the phase's folder: summaries, logs, result JSON, run folders, bundles;
# not the stores) and PHASE_exports.tgz.
#   first: run 1 (set A, 36 candidates), then the warm run (set B, 12, run 1's store); the files
#          the cold phase needs are first/transfer_first.json and first/warm_best.py in first.tgz
#   cold:  the cold run (set B, 36, a fresh store), then the alternated timing of torch.matmul,
#          start, cold and warm winners; WARM_BEST is the first phase's warm_best.py, put in the
#          repository tree (transfer_first.json beside it)
#   again: the warm run and the cold phase in one call, run 1 imported from its export (the
#          third argument: the export's folder in the repository tree, transfer_first.json beside
#          it): for a first phase whose warm run has to be measured again
# The phase gets SECONDS less a margin as its tlxdb time budget (--max-total-seconds, less
# TRANSFER_MARGIN_S=60 for the winners' revalidation, the alternated timing and the exports).
#
# Usage on the device machine, from the repository root (SECONDS is the step's own limit: env.sh's
# wheel install comes before it, so give it about 60 s less than the call's limit):
#   bash benchmarks/device/h200_transfer.sh first 440
#   bash benchmarks/device/h200_transfer.sh cold 440 benchmarks/results/transfer/warm_best.py
# TRANSFER_TARGET=host runs the same on the CPU interpreter with the host bundle (no env.sh;
# PYTHON names the interpreter; TRANSFER_ARGS adds transfer_tune.py options), e.g.
#   TRANSFER_TARGET=host OUT=/tmp/out PYTHON=.venv/bin/python \
#     TRANSFER_ARGS="--first-rounds 3 --warm-rounds 2" bash benchmarks/device/h200_transfer.sh first 600
set -uo pipefail
phase=${1:?PHASE: first, cold or again}
limit=${2:-500}
warm_best=${3:-}
target=${TRANSFER_TARGET:-hopper}
margin=${TRANSFER_MARGIN_S:-60}
py=${PYTHON:-python3}
: "${OUT:?OUT must name the folder whose files come back}"
work=/tmp/transfer
rm -rf "$work" && mkdir -p "$work"
log="$OUT/transfer_log.txt"
t0=$(date +%s)

if [ "$target" = host ]; then
  export TRITON_INTERPRET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
else
  source benchmarks/device/env.sh
  git log -1 --format='%H %s' >>"$OUT/gpu.txt" 2>/dev/null || true
fi
source benchmarks/device/steps.sh  # step NAME SECONDS COMMAND...

args=(--phase "$phase" --target "$target" --out "$work/$phase")
case "$phase" in
  first) ;;
  cold)
    [ -f "$warm_best" ] || { echo "h200_transfer: cold needs WARM_BEST, the first phase's warm_best.py" >&2; exit 1; }
    args+=(--warm-best "$warm_best")
    ;;
  again)  # WARM_BEST names run 1's export folder here; its transfer_first.json sits beside it
    [ -f "$warm_best/manifest.json" ] || { echo "h200_transfer: again needs run 1's export folder" >&2; exit 1; }
    args+=(--first-export "$warm_best" --first-summary "$(dirname "$warm_best")/transfer_first.json")
    ;;
  *) echo "h200_transfer: PHASE is first, cold or again, not $phase" >&2; exit 1 ;;
esac
budget=$((limit - margin))
[ "$budget" -ge 30 ] || budget=30
# shellcheck disable=SC2206  # TRANSFER_ARGS is split on purpose
extra=(${TRANSFER_ARGS:-})

step "$phase" "$limit" "$py" benchmarks/transfer_tune.py "${args[@]}" --max-total-seconds "$budget" \
  ${extra[@]+"${extra[@]}"}
[ -d "$work/$phase" ] && cp "$work/$phase.out" "$work/$phase.err" "$work/$phase/" &&
  tar czf "$OUT/$phase.tgz" -C "$work" --exclude "*.duckdb*" --exclude .lease "$phase"

# each run's export, from its store (run 1 and the warm run share history.duckdb)
tlxdb=("$py" -c 'import sys; from cli.main import main; sys.exit(main())')
case "$phase" in
  first) runs="first:history warm:history" ;;
  again) runs="warm:history cold:cold" ;;
  *) runs="cold:cold" ;;
esac
mkdir -p "$work/exports"
for pair in $runs; do
  label=${pair%%:*} store="$work/$phase/${pair##*:}.duckdb"
  [ -d "$work/$phase/$label" ] && [ -f "$store" ] || continue
  timeout 60 "${tlxdb[@]}" export "$work/$phase/$label" --store "$store" --to "$work/exports/$label" \
    >>"$log" 2>&1
  echo "== export $label: exit=$? (call at $(($(date +%s) - t0)) s)" | tee -a "$log"
done
tar czf "$OUT/${phase}_exports.tgz" -C "$work" exports

echo "== total $(($(date +%s) - t0)) s" | tee -a "$log"
ls -la "$OUT"
