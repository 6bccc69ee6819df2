#!/usr/bin/env bash
# Bad inputs to pretrain fail with one clear line naming what is wrong, and exit non-zero.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
base=("${tiny_model_flags[@]}" "${gpt2_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json")
data=(--data-path "$WORK/shakespeare_text_document")

expect_failure "$WORK/missing_text_document" \
  "$MDS_BIN/pretrain" "${base[@]}" --data-path "$WORK/missing_text_document" --train-iters 4

echo '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": false, "loss_scael": 0}}' > "$WORK/bad.json"
expect_failure "loss_scael" "$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${gpt2_flags[@]}" "${data[@]}" \
  --train-iters 4 --deepspeed --deepspeed_config "$WORK/bad.json"

expect_failure "--no-such-flag" "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --no-such-flag

# Devices: a bad name (from the flag or from $MDS_DEVICE), and a CUDA device this process does not
# see (every single-process run has a CUDA path, bf16 included): one line naming --device wherever
# this runs (no CUDA build, no device, or fewer than 100).
expect_failure "--device must be auto, cpu, cuda or cuda:N, got 'tpu'" \
  "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --device tpu
expect_failure "--device must be auto, cpu, cuda or cuda:N, got 'cuda:x'" \
  env MDS_DEVICE=cuda:x "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4
write_ds_config "$WORK/ds_bf16.json" bf16 0
expect_failure "--device cuda:99: " "$MDS_BIN/pretrain" "${tiny_model_flags[@]}" "${gpt2_flags[@]}" \
  "${data[@]}" --train-iters 4 --bf16 --deepspeed --deepspeed_config "$WORK/ds_bf16.json" \
  --device cuda:99

# A dataset of int32 ids made with a larger vocabulary than the model's tokenizer.
python3 - "$WORK/big_text_document" <<'PY'
import struct, sys
prefix = sys.argv[1]
ids = list(range(60000, 60000 + 64))
with open(prefix + ".bin", "wb") as f:
    f.write(struct.pack("<%di" % len(ids), *ids))
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
    f.write(struct.pack("<Q", 1) + struct.pack("<Q", 2))
    f.write(struct.pack("<i", len(ids)) + struct.pack("<q", 0) + struct.pack("<2q", 0, 1))
PY
expect_failure "vocabulary" "$MDS_BIN/pretrain" "${base[@]}" --data-path "$WORK/big_text_document" --train-iters 4 --split 1,0,0

# --data-impl names the format: mmap refuses a legacy TNTIDX dataset, lazy/cached an MMIDIDX one;
# infer (the default) trains on either (upstream's GPTDataset cannot train on TNTIDX).
"$MDS_BIN/preprocess" --input "$WORK/corpus.jsonl" --output-prefix "$WORK/legacy" "${gpt2_flags[@]}" \
  --append-eod --workers 1 --dataset-impl cached > /dev/null
expect_failure "dataset $WORK/legacy_text_document is in the TNTIDX (lazy/cached) format but --data-impl is mmap; give --data-impl cached or infer" \
  "$MDS_BIN/pretrain" "${base[@]}" --data-path "$WORK/legacy_text_document" --train-iters 4 --data-impl mmap
expect_failure "dataset $WORK/shakespeare_text_document is in the MMIDIDX (mmap) format but --data-impl is lazy; give --data-impl mmap or infer" \
  "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --data-impl lazy
"$MDS_BIN/pretrain" "${base[@]}" --data-path "$WORK/legacy_text_document" --train-iters 4 \
  --metrics-file "$WORK/legacy.jsonl" > /dev/null 2>&1 || fail "training on a TNTIDX dataset"
"$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --data-impl mmap \
  --metrics-file "$WORK/mmap.jsonl" > /dev/null 2>&1 || fail "training with --data-impl mmap"
[ "$(train_losses "$WORK/legacy.jsonl")" = "$(train_losses "$WORK/mmap.jsonl")" ] ||
  fail "the same tokens in the two formats train differently"
pass "--data-impl infer trains on TNTIDX as on MMIDIDX (the same losses)"

# Corrupt and truncated checkpoints.
"$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --save "$WORK/ckpt" --save-interval 2 --exit-interval 2 > /dev/null
layer="$WORK/ckpt/global_step2/layer_03-model_00-model_states.pt"
cp -r "$WORK/ckpt" "$WORK/flipped"
python3 - "$WORK/flipped/global_step2/layer_03-model_00-model_states.pt" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0xFF
open(path, "wb").write(bytes(data))
PY
expect_failure "layer_03-model_00-model_states.pt" \
  "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --load "$WORK/flipped"
cp -r "$WORK/ckpt" "$WORK/truncated"
truncate -s 1000 "$WORK/truncated/global_step2/mp_rank_00_model_states.pt"
expect_failure "mp_rank_00_model_states.pt" \
  "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --load "$WORK/truncated"
cp -r "$WORK/ckpt" "$WORK/missing"
rm "$WORK/missing/global_step2/layer_04-model_00-model_states.pt"
expect_failure "layer_04-model_00-model_states.pt" \
  "$MDS_BIN/pretrain" "${base[@]}" "${data[@]}" --train-iters 4 --load "$WORK/missing"
expect_failure "num_layers" \
  "$MDS_BIN/pretrain" "${base[@]/--num-layers/--num-layers}" "${data[@]}" --num-layers 3 --train-iters 4 --load "$WORK/ckpt"
finish
