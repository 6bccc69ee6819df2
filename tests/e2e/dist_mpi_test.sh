#!/usr/bin/env bash
# mds::dist under mpirun (as root, oversubscribed: 8 ranks may share 2 cores): every collective
# against a serial computation on the world and on the TP/DP/PP/MP/embedding groups of every grid
# the world size allows, async forms, bit-identical repeats, byte counters (ZeRO-1 volume included);
# then a rank withholding its part must stop the job within the (2 s) communication timeout with one
# line naming group, operation and peer.
source "$(dirname "$0")/lib.sh"
: "${MDS_TEST_TOOLS:?set by CTest: folder of the test probes}"
probe="$MDS_TEST_TOOLS/dist_probe"
command -v mpirun > /dev/null || fail "mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1

for n in 1 2 3 4 8; do
  log="$WORK/collectives-$n.log"
  # `timeout` turns a hang into a failure; MDS_DIST_TIMEOUT_S should fire long before it.
  MDS_DIST_TIMEOUT_S=60 timeout 300 mpirun -np "$n" "$probe" collectives > "$log" 2>&1 ||
    { cat "$log"; fail "collectives on $n ranks"; }
  grep -qE "^dist_probe: world $n, [0-9]+ grids, [0-9]+ checks, 0 failed$" "$log" ||
    { cat "$log"; fail "summary line of $n ranks"; }
  pass "collectives, groups, async, determinism and byte counts on $n ranks"
done

expect_timeout() {  # op "expected line after 'mds dist: timeout: '"
  local log="$WORK/timeout-$1.log" rc=0
  MDS_DIST_TIMEOUT_S=2 timeout 60 mpirun -np 4 "$probe" timeout "$1" > "$log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { cat "$log"; fail "withheld $1: the job exited 0"; }
  [ "$rc" -ne 124 ] || { cat "$log"; fail "withheld $1: the job hung until killed"; }
  [ "$(grep -c '^mds dist: timeout: ' "$log")" = 1 ] || { cat "$log"; fail "withheld $1: not one timeout line"; }
  grep -qF "mds dist: timeout: $2; stopping the job" "$log" || { cat "$log"; fail "withheld $1: line"; }
  ! grep -q 'was not stopped' "$log" || { cat "$log"; fail "withheld $1: a rank outlived the abort"; }
  pass "withheld $1 stops the job (exit $rc) naming group, operation and peer"
}
expect_timeout all_reduce \
  "all_reduce on group 'tp' (rank 1 of 2, world rank 1) waited 2 s for a message from rank 0 (world rank 0)"
expect_timeout recv \
  "recv on group 'world' (rank 1 of 4, world rank 1) waited 2 s for a message from rank 0 (world rank 0)"
finish
