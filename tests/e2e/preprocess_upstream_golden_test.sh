#!/usr/bin/env bash
# preprocess writes byte-identical files to upstream tools/preprocess_data.py. The sha256 values
# below were produced by running upstream (Megatron-DeepSpeed 8387ae17) on the same inputs; the
# inputs are the bundled corpora turned into JSON lines by scripts/text_to_jsonl.py.
source "$(dirname "$0")/lib.sh"

"$MDS_PYTHON" "$REPO/scripts/text_to_jsonl.py" "$MDS_DATA/corpora/tinyshakespeare.txt" "$WORK/shakespeare.jsonl"
"$MDS_PYTHON" "$REPO/scripts/text_to_jsonl.py" "$MDS_DATA/eval/wikitext-2-test.txt" "$WORK/wikitext.jsonl"
expect_sha "$WORK/shakespeare.jsonl" cc3986f67ece78ce18965d05f7d874f54511e7cb140162ccb2540a88580d654f "shakespeare JSONL input"
expect_sha "$WORK/wikitext.jsonl" 739fe0dbb571946671ba78c0f4e877a761e684fbbd19cf29e1c6f64f37e0605c "wikitext JSONL input"
expect_sha "$MDS_DATA/eval/lambada_test.jsonl" 4aa8d02cd17c719165fc8a7887fddd641f43fcafa4b1c806ca8abc31fabdb226 "lambada JSONL input"
cp "$MDS_DATA/eval/lambada_test.jsonl" "$WORK/lambada.jsonl"
cp "$REPO/tests/fixtures/preprocess/unicode_stress.jsonl" "$WORK/unicode.jsonl"

check() {  # name workers bin-sha idx-sha [extra flags]
  local name=$1 workers=$2 bin=$3 idx=$4; shift 4
  "$MDS_BIN/preprocess" --input "$WORK/$name.jsonl" --output-prefix "$WORK/out_$name" \
    "${gpt2_flags[@]}" --workers "$workers" "$@" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "preprocess $name"; }
  local prefix=$WORK/out_${name}_text_document
  expect_sha "$prefix.bin" "$bin" "$name .bin (workers=$workers $*)"
  expect_sha "$prefix.idx" "$idx" "$name .idx (workers=$workers $*)"
  rm -f "$prefix.bin" "$prefix.idx"
}
for workers in 1 2 3; do
  check shakespeare $workers 60303c002724daac3c48fb1d9e81370f0709517f3a793a5b54e744980ba52151 \
    d26051fbfcb52d4c62d79ae725acb9b3c99b8f44687b913b62db26d2ec57e0c5 --append-eod
done
check wikitext 2 d61ace4ea9084e6c4a84041ecef39e0341f57a69321cac06b28e1bdd63481fc7 \
  671abe4477be946b6549af20eb4bc82f37b6a39796d99dc884282edc91fb80ec --append-eod
check lambada 2 cfdcffbb27e594343fa63c12bff2f06678eb1a8e5ce86260fdb48b898dd670eb \
  8dad2075feaa562ff3e7862a713ab14415996254ea9ad90dfd972efb8657de9a --append-eod
check unicode 1 c36a8d33854220f6eeb4657075d58b9f0d674a2def8692f505b484fb77714705 \
  40dc4a5f0b68dbe2af069406e915ceaf3d1bf7ce0cb0bf71358719b98649c701 --append-eod
check unicode 2 c36a8d33854220f6eeb4657075d58b9f0d674a2def8692f505b484fb77714705 \
  40dc4a5f0b68dbe2af069406e915ceaf3d1bf7ce0cb0bf71358719b98649c701 --append-eod
# Legacy TNTIDX, as upstream's preprocess_data_many_cores.py --dataset-impl cached --workers 2 writes it.
check shakespeare 2 2d04ccbdc3d9369aab388aab4af30b403bbbb8a72164b462d9d05949f0cf1ed6 \
  fffd1f3e39c139a25f37ddb44a1e68821acec0ac2f33b7828f2846b925378b43 --append-eod --dataset-impl cached

# Two keys, no EOD: one dataset per key.
"$MDS_PYTHON" - "$WORK/shakespeare.jsonl" "$WORK/multikey.jsonl" <<'PY'
import json, sys
with open(sys.argv[1]) as source, open(sys.argv[2], "w") as out:
    for line in source:
        head, _, rest = json.loads(line)["text"].partition("\n")
        out.write(json.dumps({"speaker": head, "text": rest}) + "\n")
PY
expect_sha "$WORK/multikey.jsonl" 923815f2b4b3664aad79529e6519fe2d66235e24761ae2395f15ab137a39e948 "two-key JSONL input"
"$MDS_BIN/preprocess" --input "$WORK/multikey.jsonl" --output-prefix "$WORK/multi" "${gpt2_flags[@]}" \
  --json-keys text speaker --workers 2 > /dev/null
expect_sha "$WORK/multi_text_document.bin" 7881a9ca6c670211ec1042c4e72a89710f9a5225e26c22b87dbd8bb79f430513 "key text .bin"
expect_sha "$WORK/multi_text_document.idx" ba0c2bb4b3bfdc0b9306aa514437b62d599f49aaaebf5a5e8cdd7c1e9be20024 "key text .idx"
expect_sha "$WORK/multi_speaker_document.bin" 159836f3c183860ed9264720558b0b3a09f97c26fc6c965891f529b0e477bfdf "key speaker .bin"
expect_sha "$WORK/multi_speaker_document.idx" 4ec23017c88982f431bda974f4af3f620139a8a4b974d7d40d286f37d1df09d4 "key speaker .idx"
finish
