#!/usr/bin/env bash
# The project's test command: installs dependencies, builds twice and runs every test.
#   1. build/release  (gcc, warnings as errors, CUDA kernels compiled when nvcc exists): all tests
#   2. build/sanitize (clang, ASan + UBSan, libFuzzer): unit tests and bounded fuzzing (only their
#      programs are built there)
# Test oracles (numpy, regex, tiktoken, transformers) live in build/oracle-venv; they are never
# run-time deps.
# Environment: MDS_JOBS (default: nproc), MDS_FUZZ_SECONDS (default 20), MDS_SKIP_SANITIZE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${MDS_JOBS:-$(nproc)}"

scripts/install-deps.sh
mkdir -p build
configure() { local log=$1; shift; "$@" > "$log" 2>&1 || { cat "$log"; exit 1; }; }

venv=build/oracle-venv
if [ ! -x "$venv/bin/python" ] ||
   ! "$venv/bin/python" -c 'import tiktoken, numpy, regex, transformers, safetensors' 2>/dev/null; then
  echo "test: creating $venv (Debian torch/numpy/regex + tiktoken and transformers from PyPI)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps tiktoken==0.14.0
  # transformers 4.40 is a release that runs on Debian's torch 1.13 (the HF export oracle).
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check transformers==4.40.2 \
    tokenizers==0.19.1 huggingface-hub==0.36.2 safetensors==0.8.0
fi

configure build/release-configure.log cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMDS_WERROR=ON \
  -DMDS_ORACLE_PYTHON="$PWD/$venv/bin/python"
cmake --build build/release -j "$jobs"
(cd build/release && ctest --output-on-failure -j "$jobs")

if [ "${MDS_SKIP_SANITIZE:-0}" != 1 ]; then
  CC=clang CXX=clang++ configure build/sanitize-configure.log cmake -S . -B build/sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DMDS_SANITIZE=ON -DMDS_FUZZ=ON -DBUILD_CUDA=OFF -DMDS_WERROR=ON \
    -DMDS_FUZZ_SECONDS="${MDS_FUZZ_SECONDS:-20}" \
    -DMDS_ORACLE_PYTHON="$PWD/$venv/bin/python"
  cmake --build build/sanitize -j "$jobs" --target unit_and_fuzz_programs
  (cd build/sanitize && ctest --output-on-failure -j "$jobs" -L 'unit|fuzz')
fi
