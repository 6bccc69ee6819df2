#!/usr/bin/env bash
# The main job on the bundled data, end to end on this machine (CPU only, no GPU needed):
#   Shakespeare text -> JSON lines -> two shards (one gzip-compressed) -> preprocess each
#   -> merge-datasets -> a dataset byte-identical to preprocessing the whole corpus at once
#   -> pretrain a small GPT-2 on it for a few minutes (falling loss, validation perplexity)
#   -> generate text from the checkpoint (greedy and sampled)
#   -> evaluate it zero-shot: WikiText-2 perplexity and LAMBADA accuracy (a subset).
# Outputs go to out/demo/. Environment: MDS_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${MDS_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$jobs" --target preprocess merge-datasets pretrain generate evaluate
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
{ "train_micro_batch_size_per_gpu": 4, "train_batch_size": 8, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0}, "steps_per_print": 2000 }
JSON
# Sequence length 256: every LAMBADA passage fits (the longest is 224 GPT-2 tokens).
model=(--num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 256
       --max-position-embeddings 256)
"$bin/pretrain" "${model[@]}" --micro-batch-size 4 --global-batch-size 8 \
  --train-iters "${MDS_DEMO_ITERS:-300}" --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine \
  --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
  --data-path "$out/shakespeare_text_document" "${tokenizer[@]}" --split 949,50,1 \
  --eval-interval 100 --eval-iters 5 --log-interval 20 \
  --save "$out/checkpoints" --save-interval 1000 --metrics-file "$out/metrics.jsonl" \
  --deepspeed --deepspeed_config "$out/ds_config.json"
echo "checkpoint: $out/checkpoints/$(cat "$out/checkpoints/latest"); metrics: $out/metrics.jsonl"

echo "== generate: continuations of two prompts, then two unconditional samples (top-k 40)"
# (Greedy decoding of a model this small mostly ends a line with <|endoftext|>, as every training
# paragraph does; sampling shows more of what it learned.)
printf 'ROMEO:\nFIRST CITIZEN:\n' > "$out/prompts.txt"
"$bin/generate" "${model[@]}" "${tokenizer[@]}" --load "$out/checkpoints" \
  --sample-input-file "$out/prompts.txt" --top_k 40 --seed 7 --out-seq-length 48 \
  2> "$out/generate.log"
"$bin/generate" "${model[@]}" "${tokenizer[@]}" --load "$out/checkpoints" \
  --num-samples 2 --top_k 40 --out-seq-length 48 --seed 7 2>> "$out/generate.log"

echo "== evaluate: WikiText-2 test perplexity (whole file), LAMBADA accuracy (first 500 passages)"
"$bin/evaluate" "${model[@]}" "${tokenizer[@]}" --load "$out/checkpoints" --task WIKITEXT103 \
  --valid-data data/eval/wikitext-2-test.txt --overlapping-eval 256 --micro-batch-size 8 \
  --log-interval 100000 --results-file "$out/wikitext.json"
head -n 500 data/eval/lambada_test.jsonl > "$out/lambada_500.jsonl"
"$bin/evaluate" "${model[@]}" "${tokenizer[@]}" --load "$out/checkpoints" --task LAMBADA \
  --valid-data "$out/lambada_500.jsonl" --micro-batch-size 8 --log-interval 100000 \
  --results-file "$out/lambada.json"
echo "results: $out/wikitext.json $out/lambada.json"
