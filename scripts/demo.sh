#!/usr/bin/env bash
# The main job on the bundled data, end to end on this machine (CPU only, no GPU needed):
#   Shakespeare text -> JSON lines -> two shards (one gzip-compressed) -> preprocess each
#   -> merge-datasets -> a dataset byte-identical to preprocessing the whole corpus at once.
# pretrain, generate and evaluate join this chain as they are built (see docs/).
# Outputs go to out/demo/. Environment: MDS_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${MDS_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$jobs" --target preprocess merge-datasets
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
