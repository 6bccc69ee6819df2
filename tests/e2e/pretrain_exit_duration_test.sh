#!/usr/bin/env bash
# --exit-duration-in-mins (training.md §5.7 step 9): with a limit, on one process and on two
# data-parallel ranks (whose start times are reduced to the earliest), the run goes on while the
# minutes since the earliest start stay under it. 0 turns the limit off, as it does
# --save-interval and --exit-interval (upstream tests them for truth; a modulo by 0 crashed here).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"
write_grid_ds_config "$WORK/ds.json"
flags=("${tiny_model_flags[@]}" --global-batch-size 8 --data-path "$WORK/shakespeare_text_document"
       "${gpt2_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json" --log-interval 1
       --train-iters 3 --lr-warmup-iters 1 --save-interval 100)

for ranks in 1 2; do
  run_ranks "ranks$ranks" "$ranks" --save "$WORK/ckpt$ranks" --exit-duration-in-mins 60
  [ "$(train_losses "$WORK/ranks$ranks.jsonl" | wc -l)" = 3 ] ||
    fail "$ranks rank(s): stopped early under a 60-minute limit"
  [ "$(cat "$WORK/ckpt$ranks/latest")" = global_step3 ] || fail "$ranks rank(s): no final checkpoint"
  grep -q 'exiting program after' "$WORK/ranks$ranks.log" && fail "$ranks rank(s): exited on the limit"
  pass "$ranks rank(s): trained to the end under the limit"
done
run_ranks zeros 1 --save "$WORK/ckpt0" --save-interval 0 --exit-interval 0 --exit-duration-in-mins 0
[ "$(train_losses "$WORK/zeros.jsonl" | wc -l)" = 3 ] || fail "0 intervals: did not train 3 iterations"
[ "$(cat "$WORK/ckpt0/latest")" = global_step3 ] || fail "0 intervals: no final checkpoint"
pass "--save-interval, --exit-interval, --exit-duration-in-mins 0 are off"
finish
