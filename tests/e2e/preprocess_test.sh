#!/usr/bin/env bash
# preprocess: spec vectors (data.md §1.6, §8.2), input forms (stdin, compressed, several files),
# worker-count invariance, shards merged == whole, and every bad input failing cleanly.
source "$(dirname "$0")/lib.sh"
pp() { "$MDS_BIN/preprocess" "${gpt2_flags[@]}" "$@"; }

# §1.6 worked example.
printf '{"text": "Hello world"}\n{"text": "It\\u0027s", "id": 7}\n' > "$WORK/tiny.jsonl"
pp --input "$WORK/tiny.jsonl" --output-prefix "$WORK/tiny" --append-eod > /dev/null
[ "$(xxd -p "$WORK/tiny_text_document.bin")" = 883ce30350c40204520150c4 ] || fail "tiny .bin"
[ "$(xxd -p "$WORK/tiny_text_document.idx" | tr -d '\n')" = \
  4d4d4944494458000001000000000000000802000000000000000300000000000000030000000300000000000000000000000600000000000000000000000000000001000000000000000200000000000000 ] ||
  fail "tiny .idx"
pass "data.md §1.6 worked example"

# §8.2 300-line vector, whatever the worker count, from a file, stdin and compressed copies.
"$MDS_PYTHON" - > "$WORK/doc300.jsonl" <<'PY'
for i in range(300):
    print('{"text": "Document number %d says hello %s.", "meta": %d}' % (i, "x" * (i % 7), i))
PY
expect_sha "$WORK/doc300.jsonl" 1f59a67f8b62bb73aa649407b226ad9d7f3def7afdeaec92e9283f72559cb55f "300-line input"
bin300=ad553d4ec8cf46558554b1356915e5771b2aed1c1c25c54bb3d3c498d244d6e4
idx300=ea384a1a148714b913672ff8334dd729d9065dcc3589ed9da9bb81d74daf635d
zstd -q -o "$WORK/doc300.jsonl.zst" "$WORK/doc300.jsonl"
xz -k -c "$WORK/doc300.jsonl" > "$WORK/doc300.data"  # xz content under a misleading name
gzip -c "$WORK/doc300.jsonl" > "$WORK/doc300.jsonl.gz"
for input in doc300.jsonl doc300.jsonl.zst doc300.data doc300.jsonl.gz; do
  for workers in 1 4; do
    pp --input "$WORK/$input" --output-prefix "$WORK/o" --append-eod --workers $workers > /dev/null
    expect_sha "$WORK/o_text_document.bin" $bin300 "$input workers=$workers .bin"
    expect_sha "$WORK/o_text_document.idx" $idx300 "$input workers=$workers .idx"
  done
done
pp --input - --output-prefix "$WORK/stdin" --append-eod < "$WORK/doc300.jsonl.zst" > /dev/null
expect_sha "$WORK/stdin_text_document.idx" $idx300 "compressed stdin (-)"
cat "$WORK/doc300.jsonl" | pp --input - --output-prefix "$WORK/pipe" --append-eod > /dev/null
expect_sha "$WORK/pipe_text_document.bin" $bin300 "stdin at the end of a pipeline"

# Several inputs == their concatenation; shards merged == the whole.
head -n 100 "$WORK/doc300.jsonl" > "$WORK/part1.jsonl"
sed -n '101,220p' "$WORK/doc300.jsonl" | zstd -q > "$WORK/part2.jsonl.zst"
tail -n 80 "$WORK/doc300.jsonl" > "$WORK/part3.jsonl"
pp --input "$WORK/part1.jsonl" "$WORK/part2.jsonl.zst" "$WORK/part3.jsonl" --output-prefix "$WORK/multi" \
  --append-eod > /dev/null
expect_sha "$WORK/multi_text_document.bin" $bin300 "three inputs .bin"
expect_sha "$WORK/multi_text_document.idx" $idx300 "three inputs .idx"
for part in part1.jsonl part2.jsonl.zst part3.jsonl; do
  pp --input "$WORK/$part" --output-prefix "$WORK/shard_${part%%.*}" --append-eod --workers 2 > /dev/null
done
"$MDS_BIN/merge-datasets" --datasets "$WORK"/shard_part{1,2,3}_text_document --output-prefix "$WORK/merged" > /dev/null
expect_sha "$WORK/merged.bin" $bin300 "merged shards .bin"
expect_sha "$WORK/merged.idx" $idx300 "merged shards .idx"

# §8.2 edge cases: \r\n, a lone \r and a missing final newline; an empty text makes no document.
printf '{"text": "a"}\r\n{"text": "b"}\r{"text": "c"}\n{"text": ""}\n{"text": "d"}' > "$WORK/edge.jsonl"
pp --input "$WORK/edge.jsonl" --output-prefix "$WORK/edge" --append-eod > /dev/null
[ "$(xxd -p "$WORK/edge_text_document.bin")" = 400050c4410050c4420050c4430050c4 ] || fail "edge .bin"
pass "universal newlines, empty text, no final newline"

# Upstream-compatible flags: unique prefixes (--vocab), --flag=value.
"$MDS_BIN/preprocess" --input "$WORK/tiny.jsonl" --output-prefix="$WORK/abbrev" --tokenizer-type GPT2BPETokenizer \
  --vocab "$MDS_DATA/gpt2/vocab.json" --merge "$MDS_DATA/gpt2/merges.txt" --append-eod > /dev/null
expect_same_files "$WORK/abbrev_text_document.idx" "$WORK/tiny_text_document.idx" "abbreviated flags"
"$MDS_BIN/preprocess" --help | grep -q -- "--json-keys" || fail "--help lists flags"
pass "--help"

# Bad inputs: one line naming file and line, non-zero exit, no dataset left behind.
bad() {  # name content expected-text
  printf '%b' "$2" > "$WORK/$1.jsonl"
  expect_failure "$WORK/$1.jsonl:$3" pp --input "$WORK/$1.jsonl" --output-prefix "$WORK/bad_$1" --workers 2
  expect_no_outputs "$WORK/bad_$1"
}
good='{"text": "fine"}\n'
bad invalid_json "$good$good{\"text\": \"x\",}\n" "3: invalid JSON"
bad missing_key "$good{\"txt\": \"x\"}\n" "2: no key 'text'"
bad not_string "$good$good$good{\"text\": 5}\n" "4: key 'text' is a number"
bad blank_line "$good\n$good" "2: blank line"
bad invalid_utf8 "$good{\"text\": \"caf\xe9\"}\n" "2: invalid UTF-8"
bad lone_surrogate "{\"text\": \"\\\\ud800\"}\n" "1: key 'text' has a lone surrogate"
"$MDS_PYTHON" -c "print('{\"text\": \"ok\"}\n' * 200000, end='')" > "$WORK/late.jsonl"
printf 'not json\n' >> "$WORK/late.jsonl"
expect_failure "late.jsonl:200001: invalid JSON" pp --input "$WORK/late.jsonl" --output-prefix "$WORK/late_out" --workers 2
expect_no_outputs "$WORK/late_out"

# Opt-in skipping reports how many lines were left out.
printf '{"text": "a"}\nnot json\n\n{"text": "b"}\n{"x": 1}\n' > "$WORK/skip.jsonl"
pp --input "$WORK/skip.jsonl" --output-prefix "$WORK/skip" --append-eod --skip-invalid-lines > "$WORK/skip.log"
grep -q "Skipped 3 invalid lines; the first: $WORK/skip.jsonl:2: invalid JSON" "$WORK/skip.log" || fail "skip report: $(cat "$WORK/skip.log")"
[ "$(xxd -p "$WORK/skip_text_document.bin")" = 400050c4410050c4 ] || fail "skip output"
pass "--skip-invalid-lines"

# SentencePiece: ids equal those of the spm_encode CLI (Debian's sentencepiece), plus EOD = eos id.
head -c 300000 "$MDS_DATA/corpora/tinyshakespeare.txt" > "$WORK/spm_corpus.txt"
spm_train --input="$WORK/spm_corpus.txt" --model_prefix="$WORK/spm" --vocab_size=500 --model_type=bpe \
  --character_coverage=1.0 --minloglevel=2 > /dev/null 2>&1
"$MDS_BIN/preprocess" --input "$WORK/doc300.jsonl" --output-prefix "$WORK/spm_out" --append-eod \
  --tokenizer-type SentencePieceTokenizer --tokenizer-model "$WORK/spm.model" > /dev/null
"$MDS_PYTHON" -c 'import json, sys; [print(json.loads(l)["text"]) for l in open(sys.argv[1])]' "$WORK/doc300.jsonl" |
  spm_encode --model="$WORK/spm.model" --output_format=id | sed 's/$/ 2/' > "$WORK/spm_expected.txt"
"$MDS_PYTHON" - "$WORK/spm_out_text_document" > "$WORK/spm_got.txt" <<'PY'
import sys, numpy as np
idx = open(sys.argv[1] + ".idx", "rb").read()
assert idx[17] == 8, "uint16 for a 500-token vocabulary"
n = int(np.frombuffer(idx, np.uint64, 1, 18)[0])
sizes = np.frombuffer(idx, np.int32, n, 34)
tokens = np.fromfile(sys.argv[1] + ".bin", np.uint16)
offset = 0
for size in sizes:
    print(" ".join(map(str, tokens[offset:offset + size])))
    offset += size
PY
cmp -s "$WORK/spm_expected.txt" "$WORK/spm_got.txt" || fail "SentencePiece ids differ from spm_encode"
pass "SentencePieceTokenizer ids equal spm_encode's"

# Bad flags and files.
expect_failure "--split-sentences: NLTK punkt" pp --input "$WORK/tiny.jsonl" --output-prefix "$WORK/x" --split-sentences
expect_failure "does not exist" pp --input "$WORK/tiny.jsonl" --output-prefix "$WORK/no/such/dir/x"
expect_failure "no-such.jsonl" pp --input "$WORK/no-such.jsonl" --output-prefix "$WORK/x"
expect_failure "--merge-file" "$MDS_BIN/preprocess" --input "$WORK/tiny.jsonl" --output-prefix "$WORK/x" \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$MDS_DATA/gpt2/vocab.json"
expect_failure "PretrainedFromHF needs --tokenizer-name-or-path" "$MDS_BIN/preprocess" \
  --input "$WORK/tiny.jsonl" --output-prefix "$WORK/x" --tokenizer-type PretrainedFromHF
expect_failure "not supported" "$MDS_BIN/preprocess" --input "$WORK/tiny.jsonl" --output-prefix "$WORK/x" \
  --tokenizer-type BertWordPieceCase --vocab-file "$MDS_DATA/gpt2/vocab.json"
zst_size=$(stat -c %s "$WORK/doc300.jsonl.zst")
head -c $((zst_size / 2)) "$WORK/doc300.jsonl.zst" > "$WORK/truncated.jsonl.zst"
expect_failure "truncated.jsonl.zst" pp --input "$WORK/truncated.jsonl.zst" --output-prefix "$WORK/trunc_out"
expect_no_outputs "$WORK/trunc_out"
expect_no_outputs "$WORK/x"
finish
