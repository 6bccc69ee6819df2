#!/usr/bin/env bash
# Builds llm.c's GPT-2 CUDA trainer (train_gpt2cu, bf16) from a checkout of
# https://github.com/karpathy/llm.c, as the third baseline of tests/bench/gpu_train_bench.sh (run
# `llmc`). Nothing of llm.c is kept in this repository: the build reads the checkout given and
# writes the program and a note of what was built into OUT_DIR.
#
# Usage: tests/bench/build_llmc.sh LLMC_CHECKOUT OUT_DIR
# Environment: MDS_CUDNN_FRONTEND  the include folder of cuDNN's frontend headers (cudnn_frontend.h):
#                                 llm.c then runs its attention through cuDNN's fused flash
#                                 attention, as its published H100 numbers do; without it, through
#                                 its own kernels (slower). The headers come with the PyPI wheel
#                                 nvidia-cudnn-frontend (`pip download nvidia-cudnn-frontend
#                                 --no-deps`, then unzip its include/ folder).
#              MDS_LLMC_ARCH      the compute capability to build for (default 90: H100/H200).
#              CUDA_HOME          the CUDA toolkit (default /usr/local/cuda).
#
# CUDA 13 dropped the integer-device form of cudaMemAdvise's location, which llm.c's fallback to
# managed memory still uses; with CUDA 13 or newer that one call is rewritten, in the build's own
# copy of the sources, to the cudaMemLocation form (same meaning: prefer host memory).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 LLMC_CHECKOUT OUT_DIR" >&2
  exit 2
fi
src=$1
out=$2
cuda="${CUDA_HOME:-/usr/local/cuda}"
nvcc="$cuda/bin/nvcc"
arch="${MDS_LLMC_ARCH:-90}"
[[ -f $src/train_gpt2.cu && -d $src/llmc ]] ||
  { echo "build_llmc: $src: not an llm.c checkout (no train_gpt2.cu and llmc/)" >&2; exit 1; }
[[ -x $nvcc ]] || { echo "build_llmc: $nvcc: not found (set CUDA_HOME)" >&2; exit 1; }
if [[ -n ${MDS_CUDNN_FRONTEND:-} && ! -f $MDS_CUDNN_FRONTEND/cudnn_frontend.h ]]; then
  echo "build_llmc: MDS_CUDNN_FRONTEND=$MDS_CUDNN_FRONTEND has no cudnn_frontend.h" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$src/train_gpt2.cu" "$src/llmc" "$work/"
cuda_major=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if ((cuda_major >= 13)); then
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
    "$work/llmc/cuda_utils.cuh"
fi

# llm.c's Makefile flags for train_gpt2cu, without NVML (not needed for timing), NCCL and MPI
# (one GPU).
flags=(--threads=0 -t=0 --use_fast_math -std=c++17 -O3
       "--generate-code=arch=compute_$arch,code=[compute_$arch,sm_$arch]" -DENABLE_BF16)
objects=()
libs=(-lcublas -lcublasLt)
attention="llm.c's own kernels"
if [[ -n ${MDS_CUDNN_FRONTEND:-} ]]; then
  flags+=(-DENABLE_CUDNN "-I$MDS_CUDNN_FRONTEND")
  "$nvcc" "${flags[@]}" -c "$work/llmc/cudnn_att.cpp" -o "$work/cudnn_att.o" 2> "$work/cudnn.log" ||
    { cat "$work/cudnn.log" >&2; exit 1; }
  objects+=("$work/cudnn_att.o")
  # Recent frontends compile some engines at run time (NVRTC).
  libs+=(-lcudnn -lnvrtc)
  attention="cuDNN's fused attention (frontend $(sed -n 's/^#define CUDNN_FRONTEND_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\)/\2/p' \
    "$MDS_CUDNN_FRONTEND/cudnn_frontend_version.h" 2> /dev/null | paste -sd.))"
fi
(cd "$work" && "$nvcc" "${flags[@]}" train_gpt2.cu "${objects[@]}" "${libs[@]}" -o train_gpt2cu)

mkdir -p "$out"
cp "$work/train_gpt2cu" "$out/train_gpt2cu.tmp" && mv "$out/train_gpt2cu.tmp" "$out/train_gpt2cu"
commit=$(git -C "$src" rev-parse HEAD 2> /dev/null || echo "unknown (not a git checkout)")
cat > "$out/BUILD_INFO" <<INFO
llm.c commit: $commit
built: $(date -u +%Y-%m-%dT%H:%M:%SZ) with $("$nvcc" --version | tail -n 1), sm_$arch, bf16
attention: $attention
INFO
echo "build_llmc: $out/train_gpt2cu ($(head -c 200 "$out/BUILD_INFO" | tr '\n' ';'))"
