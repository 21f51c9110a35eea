#!/usr/bin/env bash
# One device call for the evidence of issue 33, the machine as evidence (run with `.whl` carried;
# see fetch_wheels.sh, which brings nvidia-ml-py): benchmarks/h200_machine.py records an NVML trace,
# runs a quiet tune run and the same candidates again with a competing process busy on the GPU
# during c001's window, exports both runs and summarizes them. Everything lands under $OUT (at
# most 8 files come back): summary.md, summary.json, the export as a tarball, the recorded
# fixtures (nvml_trace.json, machine_states.jsonl), the runs' live logs and gpu.txt.
# Usage on the device machine, from the repository root:
#   bash benchmarks/device/h200_machine.sh [extra arguments of h200_machine.py]
set -uo pipefail
source benchmarks/device/env.sh
rm -rf /tmp/machine
timeout 560 python3 benchmarks/h200_machine.py --out /tmp/machine "$@" 2>&1 | tee /tmp/machine_log.txt
echo "exit=${PIPESTATUS[0]}" >>/tmp/machine_log.txt
cp /tmp/machine/summary.md /tmp/machine/summary.json /tmp/machine/nvml_trace.json \
   /tmp/machine/machine_states.jsonl "$OUT/" 2>/dev/null
tar czf "$OUT/machine_export.tgz" -C /tmp/machine export 2>/dev/null
tar czf "$OUT/machine_logs.tgz" -C /tmp machine_log.txt -C /tmp/machine \
  $(cd /tmp/machine && ls *.stderr.txt 2>/dev/null) 2>/dev/null
ls -la "$OUT"
