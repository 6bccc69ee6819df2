#!/usr/bin/env bash
# End-to-end preprocess throughput (MB of JSON-lines input per second) on the bundled corpora,
# next to baselines measured in the same run:
#   - the I/O limit: cat of the same file from the page cache
#   - tiktoken (Rust BPE) + json.loads in Python, one thread
#   - upstream tools/preprocess_data.py, if MDS_UPSTREAM_DIR names a Megatron-DeepSpeed checkout
# Usage: tests/bench/preprocess_bench.sh [BUILD_DIR]   (default build/release)
# Environment: MDS_BENCH_MB (input size, default 100), MDS_BENCH_REPEATS (default 3),
#              MDS_PYTHON (python with tiktoken; default build/oracle-venv/bin/python).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$repo/build/release}"
python="${MDS_PYTHON:-$repo/build/oracle-venv/bin/python}"
target_mb="${MDS_BENCH_MB:-100}"
repeats="${MDS_BENCH_REPEATS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file "$repo/data/gpt2/vocab.json"
           --merge-file "$repo/data/gpt2/merges.txt")

for corpus in corpora/tinyshakespeare.txt eval/wikitext-2-test.txt eval/wikitext-2-valid.txt; do
  python3 "$repo/scripts/text_to_jsonl.py" "$repo/data/$corpus" >> "$work/one.jsonl"
done
cat "$repo/data/eval/lambada_test.jsonl" >> "$work/one.jsonl"
one_bytes=$(stat -c %s "$work/one.jsonl")
copies=$(( (target_mb * 1048576 + one_bytes - 1) / one_bytes ))
for _ in $(seq "$copies"); do cat "$work/one.jsonl"; done > "$work/input.jsonl"
bytes=$(stat -c %s "$work/input.jsonl")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')

best_seconds() {  # command... ; prints the best wall time of $repeats runs
  local best=""
  for _ in $(seq "$repeats"); do
    local start end
    start=$(date +%s.%N); "$@" > /dev/null 2>&1; end=$(date +%s.%N)
    best=$(awk -v s="$start" -v e="$end" -v b="$best" 'BEGIN { t = e - s; if (b == "" || t < b) b = t; printf "%.3f", b }')
  done
  echo "$best"
}
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f", b / 1048576 / s }'; }
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$(rate "$2")"; }

echo "input: $mb MB of JSON lines ($copies copies of the bundled corpora), best of $repeats runs"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| what | seconds | MB/s |"
echo "| --- | --- | --- |"
row "cat (page cache, the I/O limit)" "$(best_seconds cat "$work/input.jsonl")"
row "mds preprocess --workers 1, pinned to 1 core" \
  "$(best_seconds taskset -c 0 "$build/bin/preprocess" --input "$work/input.jsonl" --output-prefix "$work/ours" "${tokenizer[@]}" --append-eod --workers 1)"
row "mds preprocess --workers 1" \
  "$(best_seconds "$build/bin/preprocess" --input "$work/input.jsonl" --output-prefix "$work/ours" "${tokenizer[@]}" --append-eod --workers 1)"
row "mds preprocess --workers 2" \
  "$(best_seconds "$build/bin/preprocess" --input "$work/input.jsonl" --output-prefix "$work/ours" "${tokenizer[@]}" --append-eod --workers 2)"
zstd -q -1 -o "$work/input.jsonl.zst" "$work/input.jsonl"
row "mds preprocess --workers 2, zstd input" \
  "$(best_seconds "$build/bin/preprocess" --input "$work/input.jsonl.zst" --output-prefix "$work/ours" "${tokenizer[@]}" --append-eod --workers 2)"
if "$python" -c 'import tiktoken' 2> /dev/null; then
  row "tiktoken + json.loads (Python, 1 thread)" \
    "$(best_seconds "$python" "$repo/tests/bench/tiktoken_pipeline.py" "$repo/data/gpt2/vocab.json" "$repo/data/gpt2/merges.txt" "$work/input.jsonl")"
fi
if [ -n "${MDS_UPSTREAM_DIR:-}" ]; then
  # Upstream at ~1 MB/s would take minutes on the full input: one run on 4 copies (~20 MB), so its
  # ~1.5 s of start-up (importing torch) is a small share. Needs python3-torch, python3-nltk,
  # python3-regex, numpy and the `packaging` module in $python.
  for _ in 1 2 3 4; do cat "$work/one.jsonl"; done > "$work/upstream_input.jsonl"
  upstream_bytes=$(stat -c %s "$work/upstream_input.jsonl")
  upstream_run() {
    (cd "$MDS_UPSTREAM_DIR" && PYTHONPATH="$repo/tests/bench/upstream_shims" "$python" tools/preprocess_data.py \
      --input "$work/upstream_input.jsonl" --output-prefix "$work/upstream" "${tokenizer[@]}" --append-eod \
      --workers "$1" --log-interval 1000000)
  }
  for workers in 1 2; do
    seconds=$(repeats=1 best_seconds upstream_run "$workers")
    printf '| upstream preprocess_data.py --workers %s (on %s MB, 1 run) | %s | %s |\n' "$workers" \
      "$(awk -v b="$upstream_bytes" 'BEGIN { printf "%.1f", b / 1048576 }')" "$seconds" \
      "$(awk -v b="$upstream_bytes" -v s="$seconds" 'BEGIN { printf "%.1f", b / 1048576 / s }')"
  done
  "$build/bin/preprocess" --input "$work/upstream_input.jsonl" --output-prefix "$work/check" "${tokenizer[@]}" \
    --append-eod > /dev/null
  cmp "$work/upstream_text_document.bin" "$work/check_text_document.bin"
  cmp "$work/upstream_text_document.idx" "$work/check_text_document.idx"
  echo
  echo "upstream and mds outputs are byte-identical on the baseline input"
fi
