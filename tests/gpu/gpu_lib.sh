# Shared by the GPU scripts, sourced after e2e/lib.sh: skip (exit 77, which CTest reports as
# skipped, never as passed) when what a script needs is missing.

# gpu_tests with an empty filter is the device probe: it exits 77 without a CUDA device.
require_cuda_device() {
  local probe=0
  "$MDS_BIN/gpu_tests" --gtest_filter=-* > /dev/null 2>&1 || probe=$?
  if [ "$probe" = 77 ]; then
    echo "SKIPPED: no CUDA device"
    exit 77
  fi
  [ "$probe" = 0 ] || fail "gpu_tests as a device probe exited $probe"
}

# Several ranks: mpirun, with e2e/lib.sh's settings for it.
require_mpirun() {
  if ! command -v mpirun > /dev/null; then
    echo "SKIPPED: no mpirun (scripts/gpu-check.sh packs Open MPI's)"
    exit 77
  fi
  use_mpirun
}
