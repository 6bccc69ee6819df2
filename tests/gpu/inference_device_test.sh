#!/usr/bin/env bash
# evaluate and generate with --device cuda against --device cpu on a tiny checkpoint (pretrain's
# e2e model trained 6 steps on the CPU): WikiText loss within 1e-5 relative of the CPU's, the same
# LAMBADA count, greedy continuations byte-identical, KV-cache and --recompute decoding on the
# device the same text, and `auto` picking the device. Exits 77 (skipped) without a CUDA device.
source "$MDS_TESTS/e2e/lib.sh"
source "$MDS_TESTS/e2e/pretrain_lib.sh"
source "$MDS_TESTS/gpu/gpu_lib.sh"
require_cuda_device

make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
"$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${gpt2_flags[@]}" --device cpu \
  --data-path "$WORK/shakespeare_text_document" --deepspeed --deepspeed_config "$WORK/ds.json" \
  --train-iters 6 --save "$WORK/ckpt" --save-interval 6 > /dev/null 2>&1 || fail "pretrain"
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
       --max-position-embeddings 32 "${gpt2_flags[@]}" --load "$WORK/ckpt")
make_inference_eval_files 16
printf 'The king said\nTo be, or not to be\nA horse, a horse\nWhat light through yonder\n' \
  > "$WORK/prompts.txt"

run() {  # name program device flags...
  local name=$1 program=$2 device=$3; shift 3
  "$MDS_BIN/$program" "${model[@]}" --device "$device" "$@" > "$WORK/$name.out" \
    2> "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name"; }
}
for device in cpu cuda; do
  run "wiki-$device" evaluate "$device" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
    --micro-batch-size 2 --overlapping-eval 8 --results-file "$WORK/wiki-$device.json"
  run "lambada-$device" evaluate "$device" --task LAMBADA --valid-data "$WORK/lambada.jsonl" \
    --results-file "$WORK/lambada-$device.json"
  run "greedy-$device" generate "$device" --sample-input-file "$WORK/prompts.txt" --greedy \
    --micro-batch-size 2 --out-seq-length 16
done
grep -q "> running on cuda:0 (" "$WORK/wiki-cuda.out" || fail "evaluate does not say it runs on cuda:0"
grep -q "> running on cuda:0 (" "$WORK/greedy-cuda.err" || fail "generate does not say it runs on cuda:0"
pass "evaluate and generate --device cuda run on cuda:0"

python3 - "$WORK" <<'PY' || fail "WikiText and LAMBADA on the device"
import json, sys
work = sys.argv[1]
load = lambda name: json.load(open(f"{work}/{name}.json"))
cpu, gpu = load("wiki-cpu"), load("wiki-cuda")
worst = max(abs(gpu[k] - cpu[k]) / abs(cpu[k]) for k in ("avg_loss", "ppl", "adjusted_ppl", "total_loss"))
print("WikiText: worst relative difference %.3g" % worst)
assert worst <= 1e-5, worst
assert gpu["windows"] == cpu["windows"]
cpu, gpu = load("lambada-cpu"), load("lambada-cuda")
print("LAMBADA: %d (cpu) and %d (cuda) of %d" % (cpu["correct"], gpu["correct"], cpu["total"]))
assert gpu["correct"] == cpu["correct"] and gpu["total"] == cpu["total"]
assert cpu["correct"] > 0, "no example right: the count says nothing"
PY
pass "WikiText within 1e-5 of the CPU's, the same LAMBADA count"
expect_same_files "$WORK/greedy-cpu.out" "$WORK/greedy-cuda.out" \
  "greedy continuations on the device are the CPU's"
run recompute-cuda generate cuda --sample-input-file "$WORK/prompts.txt" --greedy \
  --micro-batch-size 2 --out-seq-length 16 --recompute
expect_same_files "$WORK/greedy-cuda.out" "$WORK/recompute-cuda.out" \
  "KV-cache and --recompute decoding on the device give the same text"
"$MDS_BIN/generate" "${model[@]}" --device auto --num-samples 3 --micro-batch-size 3 \
  --out-seq-length 12 --top_k 5 --seed 5 > "$WORK/auto.out" 2> "$WORK/auto.err" ||
  { cat "$WORK/auto.err"; fail "generate --device auto"; }
grep -q "> running on cuda:0 (" "$WORK/auto.err" || fail "--device auto stays off the device"
[ "$(wc -l < "$WORK/auto.out")" = 3 ] || fail "generate --device auto wrote no 3 samples"
pass "--device auto takes the device and samples"
finish
