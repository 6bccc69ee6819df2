#!/usr/bin/env bash
# evaluate's and generate's --device (as pretrain's): a bad name from the flag or from
# $MDS_DEVICE, and CUDA forced where this process has no such device, each fail with one line
# naming --device (under mpirun too); the flag wins over $MDS_DEVICE, and --device cpu gives what
# the default (MDS_DEVICE=cpu under CTest) gives; --distributed-backend takes nccl or gloo.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${gpt2_flags[@]}" \
  --data-path "$WORK/shakespeare_text_document" --deepspeed --deepspeed_config "$WORK/ds.json" \
  --train-iters 4 --save "$WORK/ckpt" --save-interval 4 > /dev/null 2>&1 || fail "pretrain"
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --max-position-embeddings 32 "${gpt2_flags[@]}" --load "$WORK/ckpt")
head -c 2000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate=("$MDS_BIN/evaluate" "${model[@]}" --task WIKITEXT103 --valid-data "$WORK/wiki.txt")
generate=("$MDS_BIN/generate" "${model[@]}" --num-samples 2 --out-seq-length 8 --seed 3)

# The failure's stderr is exactly one line, which names `text`.
expect_one_line_failure() {  # "expected text" command...
  local text=$1; shift
  expect_failure "$text" "$@"
  local lines
  lines=$("$@" 2>&1 >/dev/null | wc -l) || true
  [ "$lines" = 1 ] || fail "'$*' printed $lines lines on stderr, not one"
  pass "one line on stderr"
}

for program in evaluate generate; do
  declare -n cmd=$program
  expect_one_line_failure "$program: error: --device must be auto, cpu, cuda or cuda:N, got 'tpu'" \
    "${cmd[@]}" --device tpu
  expect_one_line_failure "$program: error: --device must be auto, cpu, cuda or cuda:N, got 'cuda:x'" \
    env MDS_DEVICE=cuda:x "${cmd[@]}"
  # One past the last device this process could see (without a device or without CUDA the line
  # says so; with devices it counts them).
  expect_one_line_failure "$program: error: --device cuda:64: " "${cmd[@]}" --device cuda:64
  expect_one_line_failure "$program: error: --distributed-backend: invalid choice: 'mpi' (choose from nccl, gloo)" \
    "${cmd[@]}" --distributed-backend mpi
  unset -n cmd
done

# Under mpirun every rank chooses its device as pretrain's ranks do (a grid is no reason to stay on
# the host any more): a device that is not there fails the job with the --device line.
use_mpirun
rc=0
timeout 120 mpirun -np 2 "${evaluate[@]}" --tensor-model-parallel-size 2 --device cuda:64 \
  --distributed-backend gloo > "$WORK/ranks.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "two ranks on a missing device exit non-zero (rc $rc)"
grep -q "evaluate: error: --device cuda:64: " "$WORK/ranks.log" ||
  fail "the ranks name the missing device: $(cat "$WORK/ranks.log")"
pass "two ranks on a missing device fail naming --device"

"${evaluate[@]}" --results-file "$WORK/default.json" > /dev/null
MDS_DEVICE=tpu "${evaluate[@]}" --device cpu --results-file "$WORK/cpu.json" > /dev/null ||
  fail "--device cpu with MDS_DEVICE=tpu"
expect_same_files "$WORK/default.json" "$WORK/cpu.json" "evaluate --device cpu as the default run"
"${generate[@]}" > "$WORK/default.jsonl" 2> /dev/null
MDS_DEVICE=tpu "${generate[@]}" --device cpu > "$WORK/cpu.jsonl" 2> /dev/null ||
  fail "--device cpu with MDS_DEVICE=tpu"
[ -s "$WORK/cpu.jsonl" ] || fail "no samples"
expect_same_files "$WORK/default.jsonl" "$WORK/cpu.jsonl" "generate --device cpu as the default run"
finish
