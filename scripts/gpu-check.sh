#!/usr/bin/env bash
# The GPU checks in one go, for a session that is lent a GPU machine (the `device` tool: a copy of
# the working tree plus carried paths, 64 MiB at most, results back through $OUT).
#
#   scripts/gpu-check.sh pack [BUILD_DIR]   here: packs the CUDA build's pretrain, preprocess,
#                                           evaluate, generate, gpu_tests and gpu_bench with their
#                                           Debian libraries and Open MPI's mpirun and plugins
#                                           (scripts/pack-gpu-build.sh --with-mpi) into
#                                           build/gpu-pack/mds-gpu.tar.xz (~15 MB); with
#                                           MDS_LLMC_SRC (an llm.c checkout) also llm.c's
#                                           train_gpt2cu for the train step's `llmc` run
#                                           (tests/bench/build_llmc.sh; MDS_CUDNN_FRONTEND as there)
#   scripts/gpu-check.sh run [STEPS]        there (carry build/gpu-pack): unpacks it and runs the
#                                           steps, each step's log into $OUT (or ./gpu-check-out)
#
# STEPS (default "info tests pretrain inference grid inference_grid bench train"): info
# (nvidia-smi, versions), tests (gpu_tests: every kernel and op against its CPU twin, the
# training-step and inference tests, the device communicators; one suite per process through
# tests/gpu/run_by_suite.sh, so a faulting kernel costs its own suite only; MDS_GPU_TESTS_FILTER
# picks suites), pretrain
# (tests/gpu/pretrain_device_test.sh: --device cuda against --device cpu), inference
# (tests/gpu/inference_device_test.sh: evaluate and generate likewise), grid
# (tests/gpu/pretrain_device_grid_test.sh: T = 2, D = 2, P = 2 under the packed mpirun on the
# device against one host process), inference_grid (tests/gpu/inference_device_grid_test.sh:
# evaluate and generate at T = 2, P = 2, D = 2 and T2 × P2 likewise), bench (gpu_bench), profile
# (tests/bench/gpu_profile.sh: ncu's kernel times of a 124M bf16 step; not a default step),
# profile_large (the same at MDS_PROFILE_MODEL, default gpt2-1.5b; not a default step),
# attention_ncu (Nsight Compute's sections for the tensor-core attention's forward, dq and dkdv
# kernels, the validation launches then those at GPT-2 124M's shapes; not a default step),
# attention_times (ncu's duration of every tensor-core attention launch of `gpu_bench --only
# attention`, mean ms per kernel instance: the default and trial launch shapes side by side; not a
# default step), generate
# (tests/bench/generate_bench.sh on the device against transformers there, 8 samples ×
# 256 tokens unless MDS_BENCH_SAMPLES/_TOKENS say otherwise; not a default step), train
# (tests/bench/gpu_train_bench.sh, MDS_GPU_BENCH_CONFIGS default gpt2-124m). A failing step
# does not stop the others; the exit status is the number of failed steps. Logs stay under 16 MiB
# each (their tails), as $OUT returns at most 8 files of that size.
#
# The device tool kills a command after at most 600 s and then returns only what is under $OUT, and
# a session has 15 minutes of device time in all: every step runs under `timeout` (a hang costs
# its limit, not the session), and no step starts once MDS_GPU_CHECK_BUDGET seconds (default 540)
# have passed since the run began, so the summary is always printed. Per-step limits in seconds:
# MDS_GPU_CHECK_STEP_LIMIT (default 240; 360 for train), or MDS_GPU_CHECK_LIMIT_<STEP> (e.g.
# MDS_GPU_CHECK_LIMIT_TRAIN). Give the tool's timeout_s some 30 s more than the budget.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-}"
pack_dir="$repo/build/gpu-pack"

pack() {
  local build="${1:-$repo/build/release}"
  [ -x "$build/bin/gpu_tests" ] || { echo "gpu-check: $build/bin/gpu_tests missing: build with CUDA first" >&2; exit 1; }
  rm -rf "$pack_dir" && mkdir -p "$pack_dir"
  "$repo/scripts/pack-gpu-build.sh" --with-mpi --programs "pretrain preprocess evaluate generate gpu_tests gpu_bench" \
    "$build" "$pack_dir/mds-gpu" || exit 1
  # generate_bench.sh exports its checkpoint to Hugging Face with this probe (same libraries).
  mkdir -p "$pack_dir/mds-gpu/tests/tools"
  cp -p "$build/tests/tools/hf_gpt2_probe" "$pack_dir/mds-gpu/tests/tools/" || exit 1
  if [ -n "${MDS_LLMC_SRC:-}" ]; then
    "$repo/tests/bench/build_llmc.sh" "$MDS_LLMC_SRC" "$pack_dir/mds-gpu/llmc" || exit 1
  fi
  tar -C "$pack_dir" -cJf "$pack_dir/mds-gpu.tar.xz" mds-gpu && rm -rf "$pack_dir/mds-gpu"
  echo "gpu-check: $(du -h "$pack_dir/mds-gpu.tar.xz" | cut -f1) in $pack_dir/mds-gpu.tar.xz;" \
    "on the device: run(command='scripts/gpu-check.sh run', carry=['build/gpu-pack'])"
}

# Runs one step under its time limit, its output into $out/<name>.log (the last 15 MiB when
# longer); skipped when the run's budget is spent.
step() {  # name command...
  local name=$1; shift
  local start rc=0 limit_var="MDS_GPU_CHECK_LIMIT_${name^^}"
  local default_limit=${MDS_GPU_CHECK_STEP_LIMIT:-240}
  [ "$name" != train ] || default_limit=${MDS_GPU_CHECK_STEP_LIMIT:-360}
  local limit="${!limit_var:-$default_limit}"
  start=$(date +%s)
  local left=$(( run_started + ${MDS_GPU_CHECK_BUDGET:-540} - start ))
  if [ "$left" -le 10 ]; then
    echo "== $name: not run, the budget of ${MDS_GPU_CHECK_BUDGET:-540} s is spent"
    skipped+=("$name")
    return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== $name (at most $limit s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.full" 2>&1 || rc=$?
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || echo "(killed after its limit of $limit s)" >> "$out/$name.full"
  tail -c 15000000 "$out/$name.full" > "$out/$name.log" && rm -f "$out/$name.full"
  echo "== $name: exit $rc after $(( $(date +%s) - start )) s"
  tail -n 15 "$out/$name.log"
  [ "$rc" = 0 ] || failed+=("$name")
}

run() {
  local steps="${1:-info tests pretrain inference grid inference_grid bench train}"
  out="${OUT:-$repo/gpu-check-out}"
  mkdir -p "$out"
  [ -f "$pack_dir/mds-gpu.tar.xz" ] || { echo "gpu-check: no $pack_dir/mds-gpu.tar.xz (carry build/gpu-pack)" >&2; exit 1; }
  local root=/tmp/mds-gpu-check
  rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf "$pack_dir/mds-gpu.tar.xz"
  local pack="$root/mds-gpu" cuda="${CUDA_HOME:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="$pack/lib:$cuda/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export MDS_BIN="$pack/bin" MDS_DATA="$repo/data" MDS_TESTS="$repo/tests"
  [ ! -x "$pack/llmc/train_gpt2cu" ] || export MDS_LLMC_BIN="$pack/llmc/train_gpt2cu"
  # The packed Open MPI (mpirun first on PATH, its plugins), for the multi-rank steps.
  [ ! -f "$pack/mpi/env.sh" ] || source "$pack/mpi/env.sh"
  failed=()
  skipped=()
  run_started=$(date +%s)
  # A fresh machine's first CUDA process waited ~45 s for the driver (an H100, 2026-11-26: the
  # tests step lost that time when no info step ran first); pay it here, outside every step.
  nvidia-smi -L > /dev/null 2>&1 || true
  "$pack/bin/gpu_tests" --gtest_list_tests > /dev/null 2>&1 || true
  echo "gpu-check: driver warm-up took $(( $(date +%s) - run_started )) s"
  for name in $steps; do
    case $name in
      info) step info bash -c 'nvidia-smi; nvcc --version 2>/dev/null; python3 -c "import torch; print(\"torch\", torch.__version__, torch.cuda.get_device_name(0))"; uname -a' ;;
      tests) step tests bash "$repo/tests/gpu/run_by_suite.sh" "$pack/bin/gpu_tests" "${MDS_GPU_TESTS_FILTER:-*}" ;;
      pretrain) step pretrain bash "$repo/tests/gpu/pretrain_device_test.sh" ;;
      inference) step inference bash "$repo/tests/gpu/inference_device_test.sh" ;;
      grid) step grid bash "$repo/tests/gpu/pretrain_device_grid_test.sh" ;;
      inference_grid) step inference_grid bash "$repo/tests/gpu/inference_device_grid_test.sh" ;;
      bench) step bench "$pack/bin/gpu_bench" ;;
      profile) step profile env MDS_PROFILE_CSV_OUT="$out/ncu.csv.xz" \
                 bash "$repo/tests/bench/gpu_profile.sh" "$pack" ;;
      profile_large) step profile_large env MDS_PROFILE_CSV_OUT="$out/ncu-large.csv.xz" \
                 MDS_PROFILE_MODEL="${MDS_PROFILE_MODEL:-gpt2-1.5b}" \
                 bash "$repo/tests/bench/gpu_profile.sh" "$pack" ;;
      attention_ncu) step attention_ncu bash -c 'ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu | tail -1)
                 "$ncu" --kernel-name-base demangled -k regex:attention_tc_detail --launch-count 14 \
                   --section SpeedOfLight --section Occupancy --section LaunchStats \
                   --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
                   --section WarpStateStats "$0/bin/gpu_bench" --only attention --iters 1' "$pack" ;;
      attention_times) step attention_times bash -c 'ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu | tail -1)
                 csv=$(mktemp) && "$ncu" --kernel-name-base demangled -k regex:attention_tc_detail \
                   --metrics gpu__time_duration.sum --csv --page raw --log-file "$csv" \
                   "$0/bin/gpu_bench" --only attention --iters 3 > /dev/null &&
                 python3 "$1/tests/bench/kernel_profile_summary.py" --by-instance "$csv"' \
                 "$pack" "$repo" ;;
      generate) step generate env MDS_BENCH_DEVICE=cuda MDS_BENCH_PYTHON=python3 \
                  MDS_BENCH_SAMPLES="${MDS_BENCH_SAMPLES:-8}" MDS_BENCH_TOKENS="${MDS_BENCH_TOKENS:-256}" \
                  bash "$repo/tests/bench/generate_bench.sh" "$pack" ;;
      train) step train env MDS_GPU_BENCH_CONFIGS="${MDS_GPU_BENCH_CONFIGS:-gpt2-124m}" \
               bash "$repo/tests/bench/gpu_train_bench.sh" "$pack" ;;
      *) echo "gpu-check: unknown step $name" >&2; failed+=("$name") ;;
    esac
  done
  echo "gpu-check: ${#failed[@]} failed step(s)${failed[*]:+: ${failed[*]}};" \
    "${#skipped[@]} not run (budget)${skipped[*]:+: ${skipped[*]}}; logs in $out"
  exit $(( ${#failed[@]} + ${#skipped[@]} ))
}

case $mode in
  pack) pack "${2:-}" ;;
  run) run "${2:-}" ;;
  *) echo "usage: $0 pack [BUILD_DIR] | run [STEPS]" >&2; exit 2 ;;
esac
