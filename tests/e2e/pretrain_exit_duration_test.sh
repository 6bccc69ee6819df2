#!/usr/bin/env bash
# --exit-duration-in-mins (training.md §5.7 step 9): once the minutes since the earliest rank's
# start pass the limit, every rank saves after the same iteration and exits 0. A limit of 0 stops
# after the first iteration, on one process and on two data-parallel ranks (whose start times are
# reduced to the earliest).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"
write_grid_ds_config "$WORK/ds.json"
flags=("${tiny_model_flags[@]}" --global-batch-size 8 --data-path "$WORK/shakespeare_text_document"
       "${gpt2_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json" --log-interval 1
       --train-iters 20 --save-interval 100 --exit-duration-in-mins 0)

for ranks in 1 2; do
  run_ranks "ranks$ranks" "$ranks" --save "$WORK/ckpt$ranks"
  [ "$(train_losses "$WORK/ranks$ranks.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "1 " ] ||
    fail "$ranks rank(s): trained past the limit: $(train_losses "$WORK/ranks$ranks.jsonl" | wc -l) iterations"
  [ "$(cat "$WORK/ckpt$ranks/latest")" = global_step1 ] || fail "$ranks rank(s): no checkpoint at iteration 1"
  grep -qE '^exiting program after [0-9.]+ minutes$' "$WORK/ranks$ranks.log" ||
    { cat "$WORK/ranks$ranks.log"; fail "$ranks rank(s): no 'exiting program after … minutes' line"; }
  pass "$ranks rank(s): saved and stopped after iteration 1"
done
finish
