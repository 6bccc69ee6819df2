#!/usr/bin/env bash
# PipelineExecutor under mpirun (as root, oversubscribed on 2 cores): each rank runs its stage of a
# tiny GPT through one 1F1B training step (blocking send/recv over the pp group, ReduceTiedGrads
# over the embedding group, the loss broadcast from the last stage) and checks the loss and every
# gradient against the whole model run on the same rank; then one InferenceSchedule (eval) step.
source "$(dirname "$0")/lib.sh"
: "${MDS_TEST_TOOLS:?set by CTest: folder of the test probes}"
check="$MDS_TEST_TOOLS/pipeline_executor_check"
command -v mpirun > /dev/null || fail "mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
export MDS_DIST_TIMEOUT_S=120

run_case() {  # ranks tp method micro-batches checkpoint-layers
  local log="$WORK/case-$1-$2-${3//[^a-z]/_}-$4-$5.log"
  timeout 300 mpirun -np "$1" "$check" "$2" "$3" "$4" "$5" > "$log" 2>&1 ||
    { cat "$log"; fail "$1 ranks, T=$2, $3, M=$4, checkpoint $5"; }
  [ "$(grep -cE '^pipeline_executor_check: rank .* [0-9]+ checks, 0 failed$' "$log")" = "$1" ] ||
    { cat "$log"; fail "$1 ranks, T=$2, $3, M=$4: not one passing line per rank"; }
  pass "P=$(($1 / $2)) T=$2 $3 M=$4 checkpoint=$5: losses and gradients equal the whole model, bytes the formula"
}

run_case 2 1 type:transformer 4 0
run_case 3 1 uniform 5 0          # stage 0 holds the embedding and no layer
run_case 3 1 parameters 3 2       # recomputed chunks counted from each stage's first spec
run_case 4 2 type:transformer 3 1 # T=2: each TP rank sends its full copy
finish
