#!/usr/bin/env bash
# --skip-train-iteration-range (training.md §5.7 step 1): the data of the ranges is passed over
# without training while the iteration count goes on, and a resumed run skips as the straight one
# did, including a range that ends exactly at the iteration it resumes from (upstream keeps such a
# range at the head of its queue, where it never matches again and hides every later range).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
common=("${tiny_model_flags[@]}" --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
        --deepspeed --deepspeed_config "$WORK/ds.json" --log-interval 1)

run() {  # name flags...
  local name=$1; shift
  "$MDS_BIN/pretrain" "${common[@]}" --metrics-file "$WORK/$name.jsonl" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: pretrain failed"; }
}
losses_at() {  # name iterations... → their losses, one line
  local name=$1; shift
  local all; all=$(train_losses "$WORK/$name.jsonl")
  for it in "$@"; do awk -v it="$it" '$1 == it { printf "%s ", $2 }' <<< "$all"; done
}

# Which data each iteration trains on: with a zero learning rate and no dropout the weights never
# change, so a loss names its global batch. Skipping 2-2 and 4-4 over five iterations trains on
# the batches of iterations 1, 3, 4, 6 and 7 of a run without skips.
frozen=(--lr 0 --min-lr 0 --hidden-dropout 0 --attention-dropout 0)
run plain "${frozen[@]}" --train-iters 7
run skipping "${frozen[@]}" --train-iters 5 --skip-train-iteration-range 4-4 2-2
[ "$(losses_at skipping 1 2 3 4 5)" = "$(losses_at plain 1 3 4 6 7)" ] ||
  fail "skipped run trained on other batches: $(losses_at skipping 1 2 3 4 5) vs $(losses_at plain 1 3 4 6 7)"
[ "$(grep -c 'due to --skip-train-iteration-range flag' "$WORK/skipping.log")" = 2 ] ||
  fail "expected two 'Skipped iterations … due to --skip-train-iteration-range flag.' lines"
grep -q '^Skipped iterations 2 to 2 due to --skip-train-iteration-range flag.$' "$WORK/skipping.log" ||
  fail "upstream's skip line missing"
[ "$(train_losses "$WORK/skipping.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "1 2 3 4 5 " ] ||
  fail "the iteration count does not go on through the skips"
pass "skipped ranges pass over their global batches; iterations 1-5 all train"

# Resumed at iteration 2, which the range 2-2 ends at: the same losses as straight through.
ranges=(--skip-train-iteration-range 2-2 4-4)
run straight --train-iters 5 "${ranges[@]}"
run first --train-iters 5 "${ranges[@]}" --save "$WORK/ckpt" --save-interval 100 --exit-interval 2
run rest --train-iters 5 "${ranges[@]}" --load "$WORK/ckpt"
[ "$(cat "$WORK/ckpt/latest")" = global_step2 ] || fail "first part saved $(cat "$WORK/ckpt/latest")"
[ "$(losses_at rest 3 4 5)" = "$(losses_at straight 3 4 5)" ] ||
  fail "resumed run differs: $(losses_at rest 3 4 5) vs $(losses_at straight 3 4 5)"
pass "a resumed run skips as the straight run did (bit for bit)"

for bad in 5-2 2-3-4 x-4; do
  rc=0; "$MDS_BIN/pretrain" "${common[@]}" --train-iters 5 --skip-train-iteration-range "$bad" \
    > "$WORK/bad.log" 2>&1 || rc=$?
  [ "$rc" != 0 ] && [ "$(wc -l < "$WORK/bad.log")" -ge 1 ] &&
    grep -q "^pretrain: error: --skip-train-iteration-range: '$bad'" "$WORK/bad.log" ||
    { cat "$WORK/bad.log"; fail "bad range $bad: rc $rc"; }
done
pass "bad ranges fail with one line naming the range"
finish
