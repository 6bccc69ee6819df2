#!/usr/bin/env bash
# pretrain resumes bit for bit: 10 steps + save + resume + 10 steps gives the same losses, weights
# and optimizer state as 20 straight steps, with dropout on, in every precision/ZeRO layout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
data=(--data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}")

for layout in fp32:0 bf16:0 fp16:0 fp16:1; do
  precision=${layout%:*} stage=${layout#*:}
  dir="$WORK/$precision-$stage"
  mkdir -p "$dir"
  write_ds_config "$dir/ds.json" "$precision" "$stage"
  common=("${tiny_model_flags[@]}" "${data[@]}" --train-iters 20 $(precision_flag "$precision")
          --deepspeed --deepspeed_config "$dir/ds.json")
  "$MDS_BIN/pretrain" "${common[@]}" --save "$dir/straight" --save-interval 20 \
    --metrics-file "$dir/straight.jsonl" > "$dir/straight.log"
  "$MDS_BIN/pretrain" "${common[@]}" --save "$dir/resumed" --save-interval 10 --exit-interval 10 \
    --metrics-file "$dir/first.jsonl" > "$dir/first.log"
  [ "$(cat "$dir/resumed/latest")" = global_step10 ] || fail "$layout: latest after the first half"
  "$MDS_BIN/pretrain" "${common[@]}" --save "$dir/resumed" --save-interval 20 --load "$dir/resumed" \
    --metrics-file "$dir/second.jsonl" > "$dir/second.log"
  train_losses "$dir/straight.jsonl" > "$dir/straight.losses"
  cat <(train_losses "$dir/first.jsonl") <(train_losses "$dir/second.jsonl") > "$dir/resumed.losses"
  [ "$(wc -l < "$dir/straight.losses")" = 20 ] || fail "$layout: expected 20 logged iterations"
  expect_same_files "$dir/straight.losses" "$dir/resumed.losses" "$layout: losses of 20 straight = 10 + resume + 10"
  for file in "$dir/straight/global_step20"/*.pt; do
    name=$(basename "$file")
    case "$name" in mp_rank_*) continue ;; esac  # holds the differing command line (args)
    expect_same_files "$file" "$dir/resumed/global_step20/$name" "$layout: $name"
  done
  # mp_rank_00 differs in `args` (other --save/--load/--exit-interval); everything else must match.
  "$MDS_PYTHON" - "$dir/straight/global_step20/mp_rank_00_model_states.pt" \
    "$dir/resumed/global_step20/mp_rank_00_model_states.pt" "$REPO/tests/e2e" <<'PY' || fail "$layout: mp_rank_00 differs"
import sys
sys.path.insert(0, sys.argv[3])
from checkpoint_objects import load, same
a, b = (load(path) for path in sys.argv[1:3])
for key in a:
    if key != "args":
        same(a[key], b[key], key)
for key in ("iteration", "consumed_train_samples", "consumed_valid_samples", "consumed_train_tokens"):
    same(getattr(a["args"], key), getattr(b["args"], key), "args." + key)
PY
  pass "$layout: mp_rank_00 optimizer, scheduler and counters"
done

# A checkpoint from before the consumed-sample counters (their attributes deleted from `args`):
# as upstream, the data position is iteration × global batch, so the resumed run still continues
# as the straight one; with --train-samples upstream asserts, mds says why in one line.
dir="$WORK/fp32-0" old="$WORK/old-ckpt"
mkdir -p "$old" && cp -r "$dir/resumed/global_step10" "$old/" && echo global_step10 > "$old/latest"
"$MDS_PYTHON" - "$old/global_step10/mp_rank_00_model_states.pt" "$REPO/tests/e2e" <<'PY' || fail "editing the old checkpoint"
import sys, torch
sys.path.insert(0, sys.argv[2])
from checkpoint_objects import load
state = load(sys.argv[1])
del state["args"].consumed_train_samples, state["args"].consumed_valid_samples
torch.save(state, sys.argv[1])
PY
common=("${tiny_model_flags[@]}" "${data[@]}" --deepspeed --deepspeed_config "$dir/ds.json")
"$MDS_BIN/pretrain" "${common[@]}" --train-iters 20 --load "$old" --metrics-file "$WORK/old.jsonl" \
  > "$WORK/old.log" 2>&1 || { cat "$WORK/old.log"; fail "resuming the old checkpoint"; }
[ "$(train_losses "$WORK/old.jsonl")" = "$(tail -n 10 "$dir/straight.losses")" ] ||
  fail "the old checkpoint resumed elsewhere: $(train_losses "$WORK/old.jsonl" | head -n 2)"
pass "a checkpoint without consumed-sample counters resumes at iteration × global batch"
expect_failure "checkpoint $old/global_step10: consumed_train_samples is 0 at iteration 10, which upstream takes for a checkpoint saved before the counter existed and recomputes; that needs iteration-based training (--train-iters), not --train-samples" \
  "$MDS_BIN/pretrain" "${common[@]}" --train-samples 80 --lr-warmup-iters 0 --lr-warmup-samples 12 --load "$old"

# --finetune into another precision converts the weights as torch's load_state_dict does: bf16
# widened into an fp32 run, fp32 rounded to nearest even into a bf16 run. With a zero learning
# rate the step leaves them as loaded, so the saved weights show what was loaded.
frozen=(--lr 0 --min-lr 0 --lr-warmup-iters 0 --train-iters 1 --finetune --save-interval 1)
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" "${frozen[@]}" --deepspeed \
  --deepspeed_config "$WORK/fp32-0/ds.json" --load "$WORK/bf16-0/straight" --save "$WORK/to-fp32" \
  > "$WORK/to-fp32.log" 2>&1 || { cat "$WORK/to-fp32.log"; fail "fp32 finetuning from bf16"; }
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" "${frozen[@]}" --bf16 --deepspeed \
  --deepspeed_config "$WORK/bf16-0/ds.json" --load "$WORK/fp32-0/straight" --save "$WORK/to-bf16" \
  > "$WORK/to-bf16.log" 2>&1 || { cat "$WORK/to-bf16.log"; fail "bf16 finetuning from fp32"; }
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "weights converted between precisions"
import pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
for source, target, dtype in (("bf16-0/straight/global_step20", "to-fp32/global_step1", torch.float32),
                              ("fp32-0/straight/global_step20", "to-bf16/global_step1", torch.bfloat16)):
    for path in sorted((work / source).glob("layer_*.pt")):
        saved, loaded = torch.load(path), torch.load(work / target / path.name)
        for key, value in saved.items():
            assert loaded[key].dtype == dtype and torch.equal(loaded[key], value.to(dtype)), (target, key)
PY
pass "--finetune into another precision loads the weights converted (bf16 → fp32, fp32 → bf16)"
finish
