#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The slurm/ scripts on a private one-node SLURM cluster (tests/e2e/slurm_lib.sh): the preprocess
# job array over 3 shards plus the dependent merge (byte-equal to preprocessing the whole corpus;
# a bad shard leaves the merge never runnable), a tiny 2-task pretrain preempted with SIGUSR1 that
# saves, requeues itself and resumes to the end, an 8-task TP x PP x DP ZeRO-1 job whose losses equal a
# 1-task job's, and evaluate on WikiText and LAMBADA slices of its
# checkpoint. Every job is judged by its outputs, never by sbatch's status alone (a misconfigured
# node can "complete" jobs that never ran: environment.md §1).
# Needs root and the Debian slurmctld/slurmd/slurm-client packages; otherwise exits 77 (SKIPPED).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
source "$(dirname "$0")/slurm_lib.sh"
if ! why="$(slurm_can_start)"; then
  echo "SKIPPED: $why"
  exit 77
fi
trap 'slurm_stop; rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 MDS_DIST_TIMEOUT_S=120
export MDS_BIN MDS_DATA
slurm_start "$WORK/slurm" || fail "could not start slurmctld/slurmd"
pass "private SLURM cluster up ($(sinfo -h -o '%c CPUs, node %T'))"
cd "$WORK" || exit 1

job_state_is() {  # job-id expected-state seconds log-file
  local state
  state="$(slurm_wait_job "$1" "$3")" || true
  [ "$state" = "$2" ] || {
    cat "$4" 2> /dev/null || true
    slurm_logs
    fail "job $1 ended $state, expected $2"
  }
}

# --- preprocess array + merge ---------------------------------------------------------------------
head -c 200000 "$MDS_DATA/corpora/tinyshakespeare.txt" > corpus.txt
python3 "$REPO/scripts/text_to_jsonl.py" corpus.txt corpus.jsonl
split -n l/3 -d --additional-suffix=.jsonl corpus.jsonl shard-
shards=(shard-*.jsonl)
[ "${#shards[@]}" = 3 ] || fail "expected 3 shards, got ${shards[*]}"
"$MDS_BIN/preprocess" --input corpus.jsonl --output-prefix whole "${gpt2_flags[@]}" --append-eod \
  --workers 1 > /dev/null

OUTPUT_DIR="$WORK/pre" OUTPUT_NAME=shakespeare "$REPO/slurm/submit_preprocess.sh" "${shards[@]}" \
  > submit.log || fail "submit_preprocess.sh: $(cat submit.log)"
array_id="$(sed -n 's/^ARRAY_JOB_ID=//p' submit.log)"
merge_id="$(sed -n 's/^MERGE_JOB_ID=//p' submit.log)"
[ -n "$array_id" ] || fail "no job ids in: $(cat submit.log)"
[ -n "$merge_id" ] || fail "no job ids in: $(cat submit.log)"
job_state_is "$merge_id" COMPLETED 60 "pre/logs/merge-$merge_id.out"
job_state_is "$array_id" COMPLETED 10 /dev/null
for index in 0 1 2; do
  log="pre/logs/preprocess-${array_id}_$index.out"
  grep -q "task $index of job $array_id: $WORK/shard-0$index.jsonl" "$log" ||
    fail "array task $index did not preprocess its shard: $(cat "$log")"
done
pass "the array ran one task per shard"
for ext in bin idx; do
  expect_same_files whole_text_document.$ext pre/shakespeare_text_document.$ext \
    "merged .$ext equals preprocessing the whole corpus"
done

printf '{"text": "fine"}\nnot json\n' > shard-bad.jsonl
OUTPUT_DIR="$WORK/bad" "$REPO/slurm/submit_preprocess.sh" shard-00.jsonl shard-bad.jsonl \
  > submit-bad.log || fail "submit_preprocess.sh: $(cat submit-bad.log)"
bad_merge="$(sed -n 's/^MERGE_JOB_ID=//p' submit-bad.log)"
state="$(slurm_wait_job "$bad_merge" 60)" || true
[ "$state" = DependencyNeverSatisfied ] || fail "merge after a failed shard: $state"
scancel "$bad_merge"
[ ! -e bad/corpus_text_document.bin ] || fail "a merged dataset despite a failed shard"
pass "a failed shard keeps the merge from running"

# --- pretrain: 2 tasks, preempted by SIGUSR1, requeued, resumed -----------------------------------
export DATA_PATH="$WORK/pre/shakespeare_text_document" CHECKPOINT_DIR="$WORK/ckpt"
# 128 positions so that evaluate can score whole LAMBADA examples with --seq-length 128.
export NUM_LAYERS=2 HIDDEN_SIZE=32 NUM_HEADS=2 SEQ_LENGTH=32 MAX_POSITION_EMBEDDINGS=128
export MICRO_BATCH_SIZE=2 OVERLAP_COMM=true
export GLOBAL_BATCH_SIZE=8 TRAIN_ITERS=60 LR=1e-3 MIN_LR=1e-4 LR_WARMUP_ITERS=3 SPLIT=90,8,2
export SAVE_INTERVAL=1000 EVAL_INTERVAL=1000 EVAL_ITERS=2 LOG_INTERVAL=5
# pretrain prints from rank 0 only: a wrapper records what srun gave each task.
mkdir wrap
cat > wrap/pretrain << EOF
#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
echo "rank \$SLURM_PROCID of \$SLURM_STEP_NUM_TASKS pmix \${PMIX_RANK:-none}" >> "$WORK/ranks.txt"
exec "$MDS_BIN/pretrain" "\$@"
EOF
chmod +x wrap/pretrain
pretrain_id="$(MDS_BIN="$WORK/wrap" sbatch --parsable --ntasks-per-node=2 \
  --output="$WORK/pretrain-%j.out" "$REPO/slurm/pretrain.sbatch")" || fail "sbatch pretrain.sbatch"
pretrain_out="$WORK/pretrain-$pretrain_id.out"
metrics="$CHECKPOINT_DIR/logs/metrics.jsonl"
# The warning SLURM sends before the time limit (--signal=B:USR1@120), sent now, once a few
# iterations have run.
for _ in $(seq 600); do
  [ -s "$metrics" ] && [ "$(wc -l < "$metrics")" -ge 3 ] && break
  sleep 0.1
done
[ -s "$metrics" ] || {
  cat "$pretrain_out" 2> /dev/null || true
  scontrol show job "$pretrain_id" || true
  fail "pretrain wrote no metrics"
}
scancel --batch --signal=USR1 "$pretrain_id"
job_state_is "$pretrain_id" COMPLETED 120 "$pretrain_out"
out="$(cat "$pretrain_out")"
grep -q "SIGUSR1 received" <<< "$out" || fail "the batch shell did not get SIGUSR1: $out"
grep -q "requeueing job $pretrain_id" <<< "$out" || fail "the job did not requeue itself: $out"
grep -q "job $pretrain_id restart 1: 2 task(s)" <<< "$out" || fail "no second run: $out"
[ "$(sort ranks.txt | uniq -c | awk '{$1 = $1; print}' | paste -sd,)" = \
  "2 rank 0 of 2 pmix 0,2 rank 1 of 2 pmix 1" ] || fail "srun did not start 2 PMIx ranks twice: $(cat ranks.txt)"
saves="$(sed -n 's/.*successfully saved checkpoint at iteration *\([0-9]*\) .*/\1/p' <<< "$out" | paste -sd' ')"
first_save="${saves%% *}"
if [ -z "$first_save" ] || [ "$saves" != "$first_save 60" ] || [ "$first_save" -ge 60 ]; then
  fail "expected a preemption checkpoint before 60 then one at 60, saved: '$saves': $out"
fi
pass "SIGUSR1 saved iteration $first_save, the job requeued itself and finished at 60"
grep -q '"overlap_comm": true' "$CHECKPOINT_DIR"/logs/ds_config_*.json &&
  grep -q "gradient all-reduce overlapped with the backward" <<< "$out" ||
  fail "OVERLAP_COMM=true: not in the generated config, or pretrain does not overlap: $out"
pass "OVERLAP_COMM=true reaches the generated config and pretrain overlaps"
[ "$(cat "$CHECKPOINT_DIR/latest")" = global_step60 ] || fail "latest is $(cat "$CHECKPOINT_DIR/latest")"
iterations="$(train_losses "$metrics" | cut -d' ' -f1 | paste -sd' ')"
[ "$iterations" = "$(seq -s' ' 1 60)" ] ||
  fail "the resumed run did not continue at $((first_save + 1)): iterations $iterations"
pass "the requeued run loaded the checkpoint and continued at iteration $((first_save + 1))"

# --- pretrain: 8 tasks as TP = 2 × PP = 2 × DP = 2 with ZeRO 1, against the same job on 1 task ------
# fp32 ZeRO communicates in fp16 by default (DeepSpeed 0.8.3); fp32 reduction keeps the runs equal.
cat > ds-zero1.json << 'EOF'
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 1}, "communication_data_type": "fp32", "steps_per_print": 2000 }
EOF
# 8 tasks on a 2-CPU node: environment.md §1's recipe (--overcommit --exclusive, srun --overcommit).
grid_job() {  # name tasks tp pp
  CHECKPOINT_DIR="$WORK/ckpt-$1" TP_SIZE=$3 PP_SIZE=$4 DS_CONFIG="$WORK/ds-zero1.json" TRAIN_ITERS=10 \
    SAVE_INTERVAL=10 EXTRA_ARGS="--make-vocab-size-divisible-by 64" SRUN_ARGS="--overcommit" \
    sbatch --parsable --ntasks="$2" --overcommit --exclusive \
    --output="$WORK/$1-%j.out" "$REPO/slurm/pretrain.sbatch"
}
grid_id="$(grid_job grid8 8 2 2)" || fail "sbatch pretrain.sbatch with 8 tasks"
single_id="$(grid_job grid1 1 1 1)" || fail "sbatch pretrain.sbatch with 1 task"
job_state_is "$grid_id" COMPLETED 300 "$WORK/grid8-$grid_id.out"
job_state_is "$single_id" COMPLETED 300 "$WORK/grid1-$single_id.out"
grep -q "job $grid_id restart 0: 8 task(s)" "$WORK/grid8-$grid_id.out" ||
  fail "the grid job did not start 8 tasks: $(cat "$WORK/grid8-$grid_id.out")"
# Judged by its outputs: the metrics, and every rank's file of the last checkpoint.
[ "$(cat "$WORK/ckpt-grid8/latest" 2> /dev/null)" = global_step10 ] || fail "no grid checkpoint"
for dp in 0 1; do
  for mp in 00 01 02 03; do  # mp = pp·T + tp
    [ -s "$WORK/ckpt-grid8/global_step10/zero_pp_rank_${dp}_mp_rank_${mp}_optim_states.pt" ] ||
      fail "missing ZeRO file of dp $dp mp $mp"
  done
done
cp "$WORK/ckpt-grid8/logs/metrics.jsonl" "$WORK/grid8.jsonl"
cp "$WORK/ckpt-grid1/logs/metrics.jsonl" "$WORK/grid1.jsonl"
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" grid1 grid8 ||
  fail "the 8-task TP=2 x PP=2 x DP=2 ZeRO-1 job's losses differ from the 1-task job's"
pass "8 tasks (TP=2 x PP=2 x DP=2, ZeRO 1) via srun: the 1-task job's losses within 1e-5, 8 ZeRO files"

# --- evaluate the checkpoint ------------------------------------------------------------------------
head -c 20000 "$MDS_DATA/eval/wikitext-2-test.txt" > wikitext-slice.txt
# 20 short examples (under 300 characters: fewer than 129 tokens).
grep -m 20 -E '^\{"text": ".{1,280}"\}$' "$MDS_DATA/eval/lambada_test.jsonl" > lambada-slice.jsonl
[ "$(wc -l < lambada-slice.jsonl)" = 20 ] || fail "20 short LAMBADA lines"
eval_id="$(WIKITEXT_FILE="$WORK/wikitext-slice.txt" LAMBADA_FILE="$WORK/lambada-slice.jsonl" \
  SEQ_LENGTH=128 OVERLAPPING_EVAL=64 sbatch --parsable --output="$WORK/evaluate-%j.out" "$REPO/slurm/evaluate.sbatch")" ||
  fail "sbatch evaluate.sbatch"
job_state_is "$eval_id" COMPLETED 120 "$WORK/evaluate-$eval_id.out"
out="$(cat "$WORK/evaluate-$eval_id.out")"
grep -qE "validation results on WIKITEXT103 \| avg loss: [0-9.E+-]+ \| ppl: " <<< "$out" ||
  fail "no WikiText result line: $out"
grep -qE "validation results on LAMBADA \| number correct: [0-9.E+-]+ \| total examples: 2.0000E\+01 " <<< "$out" ||
  fail "no LAMBADA result line: $out"
"$MDS_PYTHON" - "$CHECKPOINT_DIR/eval" << 'PY' || fail "results files"
import json, math, pathlib, sys
folder = pathlib.Path(sys.argv[1])
wiki = json.loads((folder / "WIKITEXT103-global_step60.json").read_text())
lambada = json.loads((folder / "LAMBADA-global_step60.json").read_text())
assert math.isfinite(wiki["ppl"]) and wiki["ppl"] > 1, wiki
assert lambada["total"] == 20 and 0 <= lambada["correct"] <= 20, lambada
print(f"WikiText slice ppl {wiki['ppl']:.1f}, LAMBADA slice {lambada['correct']}/20")
PY
pass "evaluate.sbatch scored the checkpoint on WikiText and LAMBADA"
finish
