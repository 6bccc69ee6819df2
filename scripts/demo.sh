#!/usr/bin/env bash
# The main job on the bundled data, end to end on this machine (CPU only, no GPU needed):
#   Shakespeare text -> JSON lines -> two shards (one gzip-compressed) -> preprocess each
#   -> merge-datasets -> a dataset byte-identical to preprocessing the whole corpus at once
#   -> pretrain a small GPT-2 on it for a few minutes (falling loss, validation perplexity).
# generate and evaluate join this chain as they are built (see docs/).
# Outputs go to out/demo/. Environment: MDS_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${MDS_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$jobs" --target preprocess merge-datasets pretrain
bin=build/release/bin
out=out/demo
rm -rf "$out" && mkdir -p "$out"
tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/vocab.json
           --merge-file data/gpt2/merges.txt)

echo "== JSON lines from data/corpora/tinyshakespeare.txt (one document per paragraph)"
python3 scripts/text_to_jsonl.py data/corpora/tinyshakespeare.txt "$out/shakespeare.jsonl"
lines=$(wc -l < "$out/shakespeare.jsonl")
head -n $((lines / 2)) "$out/shakespeare.jsonl" > "$out/shard0.jsonl"
tail -n +$((lines / 2 + 1)) "$out/shakespeare.jsonl" | gzip > "$out/shard1.jsonl.gz"

echo "== preprocess, one shard at a time"
for shard in shard0.jsonl shard1.jsonl.gz; do
  "$bin/preprocess" --input "$out/$shard" --output-prefix "$out/${shard%%.*}" "${tokenizer[@]}" \
    --append-eod --workers "$jobs"
done

echo "== merge-datasets"
"$bin/merge-datasets" --datasets "$out/shard0_text_document" "$out/shard1_text_document" \
  --output-prefix "$out/shakespeare_text_document"

echo "== check: the merged shards equal the whole corpus preprocessed at once"
"$bin/preprocess" --input "$out/shakespeare.jsonl" --output-prefix "$out/whole" "${tokenizer[@]}" \
  --append-eod --workers "$jobs" > /dev/null
cmp "$out/whole_text_document.bin" "$out/shakespeare_text_document.bin"
cmp "$out/whole_text_document.idx" "$out/shakespeare_text_document.idx"
echo "identical: $out/shakespeare_text_document.{bin,idx}"
ls -l "$out"/shakespeare_text_document.*

echo "== pretrain a small GPT-2 (4 layers, hidden 128) on it, on the CPU"
cat > "$out/ds_config.json" <<JSON
{ "train_micro_batch_size_per_gpu": 8, "train_batch_size": 16, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0}, "steps_per_print": 2000 }
JSON
"$bin/pretrain" --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 \
  --max-position-embeddings 128 --micro-batch-size 8 --global-batch-size 16 \
  --train-iters "${MDS_DEMO_ITERS:-100}" --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine \
  --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
  --data-path "$out/shakespeare_text_document" "${tokenizer[@]}" --split 949,50,1 \
  --eval-interval 50 --eval-iters 5 --log-interval 10 \
  --save "$out/checkpoints" --save-interval 1000 --metrics-file "$out/metrics.jsonl" \
  --deepspeed --deepspeed_config "$out/ds_config.json"
echo "checkpoint: $out/checkpoints/$(cat "$out/checkpoints/latest"); metrics: $out/metrics.jsonl"
