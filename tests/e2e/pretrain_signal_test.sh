#!/usr/bin/env bash
# SLURM preemption: SIGUSR1 (and SIGTERM) make pretrain finish the current iteration, save a
# checkpoint and exit 0; a rerun with --load continues from it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
common=("${tiny_model_flags[@]}" --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
        --deepspeed --deepspeed_config "$WORK/ds.json" --save "$WORK/ckpt" --save-interval 100000)

for signal in USR1 TERM; do
  rm -rf "$WORK/ckpt" "$WORK/metrics.jsonl"
  "$MDS_BIN/pretrain" "${common[@]}" --train-iters 100000 --metrics-file "$WORK/metrics.jsonl" \
    > "$WORK/run.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ -s "$WORK/metrics.jsonl" ] && [ "$(wc -l < "$WORK/metrics.jsonl")" -ge 3 ] && break
    sleep 0.1
  done
  kill -"$signal" "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { cat "$WORK/run.log"; fail "SIG$signal: exit status $rc"; }
  pass "SIG$signal: clean exit"
  last=$(train_losses "$WORK/metrics.jsonl" | tail -n 1 | cut -d' ' -f1)
  [ "$(cat "$WORK/ckpt/latest")" = "global_step$last" ] || fail "SIG$signal: latest is $(cat "$WORK/ckpt/latest"), last iteration $last"
  pass "SIG$signal: checkpoint of iteration $last"
  ls "$WORK/ckpt" | grep -q tmp && fail "SIG$signal: temporary folder left behind"
done

"$MDS_BIN/pretrain" "${common[@]}" --train-iters 100000 --exit-interval $((last + 2)) --load "$WORK/ckpt" \
  --metrics-file "$WORK/resumed.jsonl" > "$WORK/resumed.log"
[ "$(train_losses "$WORK/resumed.jsonl" | sed -n 1p | cut -d' ' -f1)" = $((last + 1)) ] ||
  fail "resume did not continue at iteration $((last + 1))"
pass "resume continues after the preemption checkpoint"
finish
