#!/usr/bin/env bash
# pretrain end to end on a small Shakespeare dataset: upstream's log lines, falling loss, evaluation,
# TensorBoard and metrics outputs, checkpoint inventory, batch ramp-up with --train-samples, fp16 loss
# scaling, the kill switch and --log-path.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
data=(--data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}")

write_ds_config "$WORK/fp32.json" fp32 0
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" --train-iters 30 --eval-interval 15 \
  --deepspeed --deepspeed_config "$WORK/fp32.json" --save "$WORK/ckpt" --save-interval 15 \
  --tensorboard-dir "$WORK/tb" --metrics-file "$WORK/metrics.jsonl" --log-path "$WORK" \
  > "$WORK/run.log" 2> "$WORK/run.err" || { cat "$WORK/run.err"; fail "pretrain run"; }
regex='^ iteration +[0-9]+/ +30 \| consumed samples: +[0-9]+ \| consumed tokens: +[0-9]+ \| elapsed time per iteration \(s\): [0-9.]+ \| learning rate: [0-9.]+E[+-][0-9]+ \| global batch size: +4 \| lm loss: [0-9.]+E[+-][0-9]+ \|.* TFLOPs: [0-9.]+ \|$'
[ "$(grep -cE "$regex" "$WORK/run.log")" = 6 ] || { cat "$WORK/run.log"; fail "6 upstream log lines"; }
pass "upstream log lines every --log-interval"
grep -q '^ iteration       30/      30 | consumed samples:          120 | consumed tokens:         3840 |' "$WORK/run.log" ||
  fail "consumed counters of the last line"
pass "consumed samples and tokens"
grep -qE '^valid loss at iteration 15 \| lm loss value: [0-9.]+E\+[0-9]+ \| lm loss PPL: [0-9.]+E\+[0-9]+ \| $' "$WORK/run.log" ||
  fail "validation line at iteration 15"
grep -q '^test loss at the end of training for test data | ' "$WORK/run.log" || fail "test evaluation"
pass "validation and test lines"
python3 - "$WORK/metrics.jsonl" <<'PY' || fail "loss does not fall"
import json, sys
losses = [r["lm_loss"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
assert len(losses) == 30, len(losses)
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
assert last < first - 0.5, (first, last)
PY
pass "training loss falls"
ls "$WORK"/tb/events.out.tfevents.* > /dev/null || fail "no TensorBoard event file"
# write_args_to_tensorboard / log_restart_to_tensorboard: one text summary per argument and the
# world-size blip.
grep -qa 'iteration-time/world_size' "$WORK"/tb/events.out.tfevents.* || fail "no restart blip"
grep -qa 'num_layers' "$WORK"/tb/events.out.tfevents.* || fail "no argument text summaries"
ls "$WORK"/args_*.txt > /dev/null || fail "--log-path wrote no args file"
grep -q '^  num_layers \.* 2$' "$WORK"/args_*.txt || fail "args file lacks num_layers"
pass "TensorBoard events and --log-path"
[ "$(cat "$WORK/ckpt/latest")" = global_step30 ] || fail "latest"
[ "$(ls "$WORK/ckpt/global_step15" | tr '\n' ' ')" = \
  "layer_01-model_00-model_states.pt layer_03-model_00-model_states.pt layer_04-model_00-model_states.pt layer_06-model_00-model_states.pt mp_rank_00_model_states.pt " ] ||
  fail "checkpoint inventory: $(ls "$WORK/ckpt/global_step15")"
pass "checkpoint inventory"

# Ramp-up 2 -> 4 over 40 samples with --train-samples 100: upstream's iteration count and batches.
cat > "$WORK/rampup.json" <<'JSON'
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 4, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0} }
JSON
rampup_flags=()
for flag in "${tiny_model_flags[@]}"; do rampup_flags+=("$flag"); done
"$MDS_BIN/pretrain" "${rampup_flags[@]}" "${data[@]}" --train-samples 100 --rampup-batch-size 2 2 40 \
  --eval-interval 10 --save "$WORK/ckpt-rampup" --save-interval 100 --lr-warmup-samples 8 --lr-warmup-iters 0 --deepspeed --deepspeed_config "$WORK/rampup.json" \
  --metrics-file "$WORK/rampup.jsonl" > "$WORK/rampup.log" 2> "$WORK/rampup.err" ||
  { cat "$WORK/rampup.err"; fail "ramp-up run"; }
python3 - "$WORK/rampup.jsonl" <<'PY' || fail "ramp-up batches"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
batches = [r["global_batch_size"] for r in train]
# G = 2 + floor(c / 40) * 2: 2 until 40 samples are consumed, then 4. update_train_iters: 21
# iterations pass the ramp-up (c = 44), then (100 - 44) // 4 = 14 more.
assert batches == [2] * 20 + [4] * 15, batches
assert train[-1]["consumed_samples"] == 100, train[-1]
PY
# DeepSpeed's steps_per_print (10 by default): its engine's progress line, then PipelineEngine's.
python3 - "$WORK/rampup.jsonl" "$WORK/rampup.log" <<'PY' || fail "DeepSpeed's progress lines"
import json, re, sys
lr = {r["iteration"]: r["lr"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"}
log = open(sys.argv[2]).read()
found = re.findall(r"^\[Rank 0\] step=(\d+), skipped=0, lr=\[(\S+), (\S+), (\S+)\], "
                   r"mom=\[\(0\.9, 0\.999\), \(0\.9, 0\.999\), \(0\.9, 0\.999\)\]\n"
                   r"steps: \1 loss: ", log, re.M)
assert [int(f[0]) for f in found] == [10, 20, 30], found
for step, *lrs in found:
    assert lrs == [repr(lr[int(step)])] * 3, (step, lrs, lr[int(step)])
PY
# The validation target follows those 35 iterations: (35 // 10 + 1) × 2 × 4 = 32 samples, not the
# (100 // 4 // 10 + 1) × 2 × 4 = 24 of a count without the ramp-up.
grep -qx '    validation: 32' "$WORK/rampup.log" || { cat "$WORK/rampup.log"; fail "ramp-up validation target"; }
# Each evaluation uses the global batch of the iteration just trained (upstream sets the
# micro-batch count at the start of an iteration): at iteration 20 that is 2, although 40 samples
# are consumed after it. So 2 eval iterations read 4 + 4 samples (iterations 10, 20), then 8 + 8
# (iteration 30, the end): 24 (reading at the next iteration's batch would give 28).
"$MDS_PYTHON" - "$WORK/ckpt-rampup/global_step35/mp_rank_00_model_states.pt" "$REPO/tests/e2e" <<'PY' ||
import sys
sys.path.insert(0, sys.argv[2])
from checkpoint_objects import load
consumed = load(sys.argv[1])["args"].consumed_valid_samples
assert consumed == 24, consumed
PY
  fail "validation during the ramp-up used another batch size"
pass "--rampup-batch-size with --train-samples"

# --log-params-norm: upstream's calc_params_l2_norm, the 2-norm of every weight after the step,
# equals torch's over the tensors of the checkpoint saved at that iteration.
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" --train-iters 4 --log-interval 4 \
  --log-params-norm --deepspeed --deepspeed_config "$WORK/fp32.json" --save "$WORK/ckpt-norm" \
  --save-interval 4 > "$WORK/norm.log" 2>/dev/null || fail "--log-params-norm run"
"$MDS_PYTHON" - "$WORK/norm.log" "$WORK/ckpt-norm/global_step4" <<'PY' || fail "params norm"
import math, pathlib, re, sys, torch
logged = re.findall(r"\| params norm: ([0-9.]+) \|", open(sys.argv[1]).read())
assert len(logged) == 1, logged
squares = sum(t.double().pow(2).sum().item() for path in sorted(pathlib.Path(sys.argv[2]).glob("layer_*.pt"))
              for t in torch.load(path).values())
assert logged[0] == "{:.3f}".format(math.sqrt(squares)), (logged, math.sqrt(squares))
PY
pass "--log-params-norm logs the 2-norm of the weights after the step"

# fp16: the loss scale is logged and starts at 2^12 (initial_scale_power 12).
write_ds_config "$WORK/fp16.json" fp16 1
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" --fp16 --train-iters 5 \
  --deepspeed --deepspeed_config "$WORK/fp16.json" > "$WORK/fp16.log" 2>/dev/null || fail "fp16 run"
grep -qE '\| loss scale: 4096\.0 \| grad norm: [0-9.]+ \|' "$WORK/fp16.log" || { cat "$WORK/fp16.log"; fail "fp16 loss scale"; }
pass "fp16 loss scale and grad norm in the log line"

# Skipped fp16 steps (a loss scale of 2^24 overflows for several steps): upstream's DeepSpeed path
# counts every iteration as not skipped, so the logged average takes every iteration's loss.
sed -e 's/"initial_scale_power": 12/"initial_scale_power": 24/' -e 's/"hysteresis": 2/"hysteresis": 1/' \
  "$WORK/fp16.json" > "$WORK/fp16_overflow.json"
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" --fp16 --train-iters 8 --log-interval 4 \
  --deepspeed --deepspeed_config "$WORK/fp16_overflow.json" --metrics-file "$WORK/overflow.jsonl" \
  > "$WORK/overflow.log" 2>/dev/null || fail "fp16 overflow run"
python3 - "$WORK/overflow.jsonl" "$WORK/overflow.log" <<'PY' || fail "the loss average over skipped steps"
import json, re, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
logged = re.findall(r"^ iteration +(\d+)/.*\| lm loss: (\S+) \|", open(sys.argv[2]).read(), re.M)
assert [int(i) for i, _ in logged] == [4, 8], logged
for (_, loss), part in zip(logged, (train[:4], train[4:])):
    assert any(r["skipped"] for r in part), part  # the check means something only with skips
    mean = sum(r["lm_loss"] for r in part) / 4
    assert loss == "{:.6E}".format(mean), (loss, mean, part)
PY
pass "skipped fp16 steps count in the logged loss average, as upstream's DeepSpeed path"

# Kill switch: saves and exits at the next iteration boundary.
touch "$WORK/stop"
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${data[@]}" --train-iters 30 --load "$WORK/ckpt" \
  --deepspeed --deepspeed_config "$WORK/fp32.json" --kill-switch-path "$WORK/stop" > "$WORK/kill.log" 2>&1 ||
  fail "kill switch run"
grep -q "Detected kill switch at $WORK/stop. Exiting" "$WORK/kill.log" || fail "kill switch message"
pass "kill switch"
finish
