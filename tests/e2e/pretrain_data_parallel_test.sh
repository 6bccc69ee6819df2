#!/usr/bin/env bash
# Data-parallel pretrain under mpirun (fp32, ZeRO stage 0; issue 4): with D = 2 and 4 ranks the
# same 10 steps (dropout on) give the single process's losses within 1e-5 relative and its
# weights; overlapping the gradient all-reduce with the backward (overlap_comm) changes no bit;
# a run stopped and resumed at D = 2 continues bit for bit; a failing rank stops the job.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"

write_grid_ds_config "$WORK/ds.json"
flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1
       --clip-grad 1.0 --seed 1234 --split 90,8,2 --eval-interval 5 --eval-iters 2
       --log-interval 5 --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
       --deepspeed --deepspeed_config "$WORK/ds.json")

run() { run_ranks "$@"; }

run d1 1 --train-iters 10 --save "$WORK/ckpt-d1" --save-interval 10
run d2 2 --train-iters 10 --save "$WORK/ckpt-d2" --save-interval 10
run d4 4 --train-iters 10 --save "$WORK/ckpt-d4" --save-interval 10

"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" d1 d2 d4 ||
  fail "data-parallel runs differ from the single process"
pass "D=2 and D=4 losses equal the single process's within 1e-5"

# Without OMP_NUM_THREADS, unbound ranks divide the node's CPUs among them (one OpenMP team per
# CPU each would oversubscribe it); a process bound to part of the node (a cpuset) keeps its mask.
cpus=$(nproc --all) share=$(($(nproc --all) / 4))
visible=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc reads OMP_NUM_THREADS too
[ "$share" -ge 1 ] || share=1
env -u OMP_NUM_THREADS timeout 300 mpirun --bind-to none -np 4 "$MDS_BIN/pretrain" "${flags[@]}" \
  --train-iters 10 --metrics-file "$WORK/d4-threads.jsonl" > "$WORK/d4-threads.log" 2>&1 ||
  { cat "$WORK/d4-threads.log"; fail "d4-threads run"; }
if [ "$visible" = "$cpus" ] && [ "$share" != "$cpus" ]; then
  grep -qF "4 ranks share this node's $cpus CPUs: $share OpenMP thread" "$WORK/d4-threads.log" ||
    { cat "$WORK/d4-threads.log"; fail "no note of the threads per rank"; }
  pass "4 unbound ranks on $cpus CPUs: $share OpenMP thread(s) each, said on one line"
else
  ! grep -q "ranks share this node" "$WORK/d4-threads.log" || fail "threads changed on a bound process"
  pass "a process bound to $visible of $cpus CPUs keeps OpenMP's count"
fi
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" d4 d4-threads ||
  fail "the thread count changed the losses beyond rounding"

"$MDS_PYTHON" - "$WORK" <<'PY' || fail "data-parallel weights differ"
import pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
def weights(name):
    folder = work / name / "global_step10"
    out = {}
    for path in sorted(folder.glob("layer_*-model_00-model_states.pt")):
        for key, value in torch.load(path, map_location="cpu").items():
            out[f"{path.name}:{key}"] = value.double()
    return out
one = weights("ckpt-d1")
# Summation order differs (gradients are summed per rank, then across ranks), and Adam's m/sqrt(v)
# turns the fp32 rounding differences of near-zero gradients into relative update differences of
# up to ~1e-4; with lr 1e-3 over 10 steps that stays below 2e-6 absolute.
for name in ("ckpt-d2", "ckpt-d4"):
    other = weights(name)
    assert other.keys() == one.keys(), name
    worst = max((other[key] - value).abs().max().item() for key, value in one.items())
    print(f"{name}: {len(one)} tensors, worst absolute difference {worst:.2e}")
    assert worst <= 2e-6, (name, worst)
PY
pass "D=2 and D=4 weights after 10 steps equal the single process's"

# zero_optimization.overlap_comm: the last micro-batch's gradients are all-reduced as its backward
# finishes them (D = 2: two micro-batches a step; D = 4: one, so the accumulator starts fresh).
sed 's/"stage": 0}/"stage": 0, "overlap_comm": true}/' "$WORK/ds.json" > "$WORK/ds-overlap.json"
for d in 2 4; do
  run "d${d}o" $d --train-iters 10 --save "$WORK/ckpt-d${d}o" --save-interval 10 \
    --deepspeed_config "$WORK/ds-overlap.json"
  grep -q "gradient all-reduce overlapped with the backward" "$WORK/d${d}o.log" ||
    fail "D=$d with overlap_comm: the run does not say it overlaps: $(head -c 2000 "$WORK/d${d}o.log")"
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 0 losses "$WORK" "d$d" "d${d}o" ||
    fail "D=$d with overlap_comm: losses differ from the run without"
  for file in "$WORK/ckpt-d$d"/global_step10/layer_*; do
    cmp -s "$file" "$WORK/ckpt-d${d}o/global_step10/$(basename "$file")" ||
      fail "D=$d with overlap_comm: weights differ: $(basename "$file")"
  done
done
pass "overlap_comm at D=2 and D=4: losses and weights bit for bit those of the step's own all-reduce"

[ ! -e "$WORK/ckpt-d2/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt" ] ||
  fail "ZeRO stage 0 writes no per-rank optimizer files"
pass "one rank writes the ZeRO-0 checkpoint"

# Resume at D = 2: 5 steps, save, 5 more from the checkpoint = the 10 straight steps, bit for bit.
run half 2 --train-iters 10 --exit-interval 5 --save "$WORK/ckpt-resume" --save-interval 100
run rest 2 --train-iters 10 --save "$WORK/ckpt-resume" --save-interval 100 --load "$WORK/ckpt-resume"
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" resume "$WORK" d2 half rest ||
  fail "resumed D=2 run differs"
for file in "$WORK"/ckpt-d2/global_step10/layer_*; do
  cmp -s "$file" "$WORK/ckpt-resume/global_step10/$(basename "$file")" ||
    fail "resumed weights differ: $(basename "$file")"
done
pass "D=2: 5 + resume + 5 steps equal 10 straight steps, losses and weights bit for bit"

# A rank that fails (here: every rank, on a missing dataset) ends the job with an error, no hang.
rc=0
timeout 120 mpirun -np 2 "$MDS_BIN/pretrain" "${flags[@]/$WORK\/shakespeare_text_document/$WORK/missing}" \
  --train-iters 2 > "$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a failing data-parallel run exits non-zero without hanging (rc $rc)"
grep -q "missing" "$WORK/bad.log" || fail "the error names the missing dataset: $(cat "$WORK/bad.log")"
pass "a failing rank stops the job with its error"
finish
