#!/usr/bin/env bash
# preprocess --tokenizer-type PretrainedFromHF (MB of JSON-lines input per second, one thread)
# next to the upstream path measured in the same run: transformers' tokenizer.encode per document
# (what Megatron's preprocess_data.py calls) and the `tokenizers` library's batch encode (Rust),
# both in one thread, for GPT-2's tokenizer.json, a BLOOM-pipeline one and a GPT-NeoX-pipeline one
# (NFC normalizer; both trained on the bundled text by tests/e2e/hf_tokenizer_oracle_test.py's
# recipes).
# Usage: tests/bench/hf_tokenizer_bench.sh [BUILD_DIR]   (default build/release)
# Environment: MDS_BENCH_MB (input size, default 20), MDS_PYTHON (default build/oracle-venv/bin/python).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$repo/build/release}"
python="${MDS_PYTHON:-$repo/build/oracle-venv/bin/python}"
target_mb="${MDS_BENCH_MB:-20}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for corpus in corpora/tinyshakespeare.txt eval/wikitext-2-test.txt eval/wikitext-2-valid.txt; do
  python3 "$repo/scripts/text_to_jsonl.py" "$repo/data/$corpus" >> "$work/one.jsonl"
done
one_bytes=$(stat -c %s "$work/one.jsonl")
copies=$(( (target_mb * 1048576 + one_bytes - 1) / one_bytes ))
for _ in $(seq "$copies"); do cat "$work/one.jsonl"; done > "$work/input.jsonl"
bytes=$(stat -c %s "$work/input.jsonl")
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f", b / 1048576 / s }'; }
best_seconds() {  # command... ; the best wall time of 3 runs
  local best=""
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N); "$@" > /dev/null 2>&1; end=$(date +%s.%N)
    best=$(awk -v s="$start" -v e="$end" -v b="$best" 'BEGIN { t = e - s; if (b == "" || t < b) b = t; printf "%.3f", b }')
  done
  echo "$best"
}

echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MB of JSON lines, one thread each (taskset -c 0)"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
head -n 1 "$work/input.jsonl" > "$work/first.jsonl"
echo "| tokenizer.json | mds preprocess MB/s | of which start-up, s | mds MB/s after start-up | transformers encode per document MB/s | tokenizers encode_batch MB/s |"
echo "| --- | --- | --- | --- | --- | --- |"
for kind in gpt2 bloom neox; do
  "$python" "$repo/tests/bench/hf_tokenizer_baseline.py" build "$work/$kind" "$kind" > /dev/null 2>&1
  hf=(--tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/$kind" --append-eod --workers 1)
  ours=$(best_seconds taskset -c 0 "$build/bin/preprocess" --input "$work/input.jsonl" --output-prefix "$work/out" "${hf[@]}")
  startup=$(best_seconds taskset -c 0 "$build/bin/preprocess" --input "$work/first.jsonl" --output-prefix "$work/first" "${hf[@]}")
  theirs=$(taskset -c 0 "$python" "$repo/tests/bench/hf_tokenizer_baseline.py" time "$work/$kind" "$work/input.jsonl" 2> /dev/null)
  encode=$(awk '$1 == "encode" { print $2 }' <<< "$theirs")
  batch=$(awk '$1 == "batch" { print $2 }' <<< "$theirs")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$kind" "$(rate "$ours")" "$startup" \
    "$(rate "$(awk -v a="$ours" -v b="$startup" 'BEGIN { print a - b }')")" "$(rate "$encode")" "$(rate "$batch")"
done
