#!/usr/bin/env bash
# One device call for issue 33's GPU evidence, the machine as evidence (run with `.whl` carried;
# see fetch_wheels.sh, which brings nvidia-ml-py). Each step of benchmarks/h200_machine.py runs
# under its own `timeout` and what it leaves is archived as soon as it ends, so a call cut short
# still returns the steps it finished (at most 8 files come back; this writes 7):
#   a. record: an NVML trace of this GPU idle, under a matmul loop of the script's own and beside
#      a competing process the script starts                    -> nvml_trace.json (in machine.tgz)
#   b. quiet: `tlxdb optimize` of the softmax example (a host-bound 1x1024 case and an 8192^2
#      one), tune provider, one round of two candidates, three replicates
#   c. shared: the same candidates again (--provider remeasure), a competing GPU process started by
#      the script as c001 is proposed and stopped a second after c001's window began
#   d. summary: both runs exported (tlxdb export), summary.md/json, machine_states.jsonl
# plus gpu.txt (env.sh) and machine_log.txt (each step's exit status, seconds and last lines).
# Every run gets its step's seconds less MARGIN_S=60 as tlxdb's time budget (it stops proposing
# then; the margin is for the revalidation's replicates, which still follow), so it ends properly.
# MACHINE_ARGS: more arguments of h200_machine.py for every step (e.g. "--repetitions 6").
#
# Usage on the device machine, from the repository root (a step given 0 seconds is skipped):
#   bash benchmarks/device/h200_machine.sh [RECORD_S [QUIET_S [SHARED_S [SUMMARY_S]]]]
# defaults 40 200 200 50: at most 490 s of steps, about 520 s with the wheel install.
# MACHINE_TARGET=host runs the same steps on the CPU interpreter (the softmax host bundle, no
# recording, a competitor that only sleeps; no env.sh; PYTHON names the interpreter), its machine
# states read from the recorded trace tests/fixtures/machine/nvml_trace.json (TLXDB_NVML_TRACE),
# MACHINE_ARGS by default one candidate, two replicates and --max-cv 5 (the interpreter on a
# busy host is too noisy for the GPU's thresholds to decide in the time):
#   MACHINE_TARGET=host OUT=/tmp/out PYTHON=.venv/bin/python bash benchmarks/device/h200_machine.sh
set -uo pipefail
record_s=${1:-40}
quiet_s=${2:-200}
shared_s=${3:-200}
summary_s=${4:-50}
target=${MACHINE_TARGET:-hopper}
margin=${MARGIN_S:-60}
py=${PYTHON:-python3}
: "${OUT:?OUT must name the folder whose files come back}"
work=/tmp/machine
rm -rf "$work" && mkdir -p "$work"
log="$OUT/machine_log.txt"
t0=$(date +%s)

if [ "$target" = host ]; then
  export TRITON_INTERPRET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  export TLXDB_NVML_TRACE=${TLXDB_NVML_TRACE:-$PWD/tests/fixtures/machine/nvml_trace.json}
  extra=${MACHINE_ARGS---candidates 1 --replicates 2 --max-cv 5}
else
  source benchmarks/device/env.sh
  git log -1 --format='%H %s' >>"$OUT/gpu.txt" 2>/dev/null || true
  extra=${MACHINE_ARGS:-}
fi
read -r -a extra_args <<<"$extra"

source benchmarks/device/steps.sh  # step NAME SECONDS COMMAND...

# machine_step NAME SECONDS: h200_machine.py's step NAME as a step (its run's tlxdb budget the
# seconds less the margin), then $work's text results archived as they stand
machine_step() {
  local name=$1 limit=$2
  local budget=$((limit - margin))
  [ "$budget" -ge 20 ] || budget=20
  step "$name" "$limit" "$py" benchmarks/h200_machine.py --out "$work" --target "$target" \
    --step "$name" --max-total-seconds "$budget" --run-timeout "$((limit - 10))" \
    ${extra_args[@]+"${extra_args[@]}"}
  [ "$limit" -le 0 ] || tar czf "$OUT/machine.tgz" -C "$work" --exclude "store.duckdb*" \
    --exclude bundle --exclude src --exclude .lease --exclude "*.wal" . 2>/dev/null
}

machine_step record "$record_s"
machine_step quiet "$quiet_s"
machine_step shared "$shared_s"
machine_step summary "$summary_s"
for f in summary.md summary.json nvml_trace.json machine_states.jsonl; do
  [ -f "$work/$f" ] && cp "$work/$f" "$OUT/"
done
echo "== total $(($(date +%s) - t0)) s" | tee -a "$log"
ls -la "$OUT"
