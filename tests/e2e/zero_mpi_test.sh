#!/usr/bin/env bash
# The optimizer's data-parallel reductions and ZeRO partitions under mpirun (as root,
# oversubscribed on 2 cores): fp32 at stages 0/1/2, fp16 at 0/1/2, bf16 (BF16_Optimizer) on 1, 2,
# 3, 4 and 8 ranks against one process fed every rank's micro-batches, bit-identical weights on
# every rank, bytes per group equal to the theoretical volume, and 12·Ψ/D bytes of fp32 state per
# rank (tests/tools/zero_step_probe.cpp says what each check compares).
source "$(dirname "$0")/lib.sh"
: "${MDS_TEST_TOOLS:?set by CTest: folder of the test probes}"
probe="$MDS_TEST_TOOLS/zero_step_probe"
command -v mpirun > /dev/null || fail "mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1

for n in 1 2 3 4 8; do
  log="$WORK/zero-$n.log"
  MDS_DIST_TIMEOUT_S=60 timeout 300 mpirun -np "$n" "$probe" > "$log" 2>&1 ||
    { cat "$log"; fail "ZeRO steps on $n ranks"; }
  grep -qE "^zero_step_probe: $n ranks, [0-9]+ checks, 0 failed$" "$log" ||
    { cat "$log"; fail "summary line of $n ranks"; }
  pass "ZeRO 0/1/2 steps on $n ranks equal one process; byte volumes and state size match"
done
finish
