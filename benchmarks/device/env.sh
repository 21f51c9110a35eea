# Sourced by the device scripts, on the device machine, from the repository root, once per call:
# installs the carried wheels (`.whl`, see fetch_wheels.sh) into /tmp/site, puts them and the
# repository on PYTHONPATH, and writes the machine (GPU, driver, clocks, torch, Triton) to
# $OUT/gpu.txt, each under a timeout (120 s, 30 s, 30 s). A script run from one that sourced it
# already skips it.
if [ -z "${TLXDB_DEVICE_ENV:-}" ]; then
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TLXDB_DEVICE_ENV=1
  {
    timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
    timeout 30 python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  } 2>&1 | tee "$OUT/gpu.txt"
fi
