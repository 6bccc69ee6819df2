#!/usr/bin/env bash
# Installs what mds needs to build and test on Debian 12, from Debian's packages only.
# Idempotent: packages already present are not touched. Run as root (or with sudo).
# The CUDA toolkit is not a Debian package: it is used when found in /usr/local/cuda.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config git     # toolchain
  clang libclang-rt-14-dev libomp-dev clang-format      # fuzzers (libFuzzer), sanitizers, OpenMP, formatting
  libgtest-dev libgmock-dev                             # unit tests
  libcli11-dev                                          # command-line flags
  libzstd-dev liblzma-dev zlib1g-dev zstd xz-utils gzip # compressed inputs (+ CLIs for tests)
  libsentencepiece-dev sentencepiece                    # SentencePiece tokenizer
  libopenmpi-dev openmpi-bin libopenblas-dev            # distributed training, CPU GEMM
  slurmctld slurmd slurm-client                         # local SLURM cluster for tests/e2e/slurm_test.sh
  python3 python3-venv python3-numpy python3-regex      # test oracles only (never at run time):
  python3-torch                                         #   torch.load/torch.save of our .pt files
  perl perl-modules-5.36                                # Unicode::UCD for scripts/gen_unicode_nfc_tables.py
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
  "${missing[@]}"
