#!/usr/bin/env bash
# Download, on a CPU machine with pip, the wheels tlxdb needs on the H200 machine (Python 3.12,
# x86-64, no network there; it already has torch, triton, numpy, pyarrow, click). They go to .whl/
# (git-ignored), which the device call carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for pkg in duckdb==1.5.5 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
           typing-inspection==0.4.5 typing-extensions==4.16.0 jinja2==3.1.6 markupsafe==3.0.4 \
           matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 \
           pillow==13.0.0 pyparsing==3.3.3 python-dateutil==2.9.0.post0 six==1.17.0 packaging==26.4 \
           nvidia-ml-py==13.615.71; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "$pkg"
done
ls .whl
