#!/usr/bin/env bash
# --(train|valid|test)-weighted-split-paths (data.md §5.4, BigScience tr11's way of naming its
# validation sets): groups named train/valid/test over the document ranges --split gives train
# exactly as --data-path does; several validation groups are each evaluated as if alone, from
# their own position (upstream's one loader per group), also after a resume; the index maps carry
# the group names; the -path file variant and its errors.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
make_shakespeare_dataset "$WORK/split"
mkdir -p "$WORK/groups"
cp "$WORK/split_text_document".{bin,idx} "$WORK/groups/"  # a copy: its own index-map cache
write_ds_config "$WORK/ds.json" fp32 0
model=()  # the tiny model's flags without its --split, which belongs to --data-path
for ((i = 0; i < ${#tiny_model_flags[@]}; i++)); do
  if [ "${tiny_model_flags[i]}" = --split ]; then i=$((i + 1)); else model+=("${tiny_model_flags[i]}"); fi
done
common=("${model[@]}" "${gpt2_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json"
        --log-interval 1 --train-iters 6 --lr-decay-iters 6 --eval-interval 2 --eval-iters 2)
run() {  # name flags...
  local name=$1; shift
  "$MDS_BIN/pretrain" "${common[@]}" --metrics-file "$WORK/$name.jsonl" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: pretrain failed"; }
}
loss_lines() {  # log group → the values of its "<group> loss at …" lines
  grep -E "^$2 loss at " "$1" | sed -E "s/^$2 //"
}

# --split 90,8,2 cuts the documents at [0, t, v, N); the same cuts as fractions k / N (exact
# after PythonRound(k / N × N)).
run plain --data-path "$WORK/split_text_document" --split 90,8,2
read -r t v n < <(python3 - "$WORK/plain.log" <<'PY'
import re, sys
ranges = dict(re.findall(r"^ +(train|validation|test):\s+document indices in \[(\d+, \d+)\)", open(sys.argv[1]).read(), re.M))
train, valid, test = (tuple(map(int, ranges[k].split(", "))) for k in ("train", "validation", "test"))
print(train[1], valid[1], test[1])
PY
)
[ -n "$n" ] || { cat "$WORK/plain.log"; fail "no document ranges in the --data-path run's log"; }
frac() { python3 -c "print(repr($1 / $n))"; }
P="$WORK/groups/split_text_document"
train_group="train: 1 0:$(frac "$t") $P"
valid_range="$(frac "$t"):$(frac "$v")"
test_range="$(frac "$v"):1"

run named --train-weighted-split-paths "$train_group" --valid-weighted-split-paths "valid: 1 $valid_range $P" \
  --test-weighted-split-paths "test: 1 $test_range $P"
[ "$(grep ' loss at ' "$WORK/named.log")" = "$(grep ' loss at ' "$WORK/plain.log")" ] ||
  fail "groups named train/valid/test evaluate otherwise than --split: $(grep ' loss at ' "$WORK/named.log")"
[ "$(train_losses "$WORK/named.jsonl")" = "$(train_losses "$WORK/plain.jsonl")" ] ||
  fail "groups named train/valid/test train otherwise than --split"
ls "$WORK/groups/split_text_document_train_indexmap_24ns_32sl_1234s_doc_idx.npy" > /dev/null ||
  fail "no index maps of the train group next to its copy"
pass "groups train/valid/test over --split's ranges: the same losses as --data-path --split"

# Two validation groups over the same documents, and the test group from a -path file: each
# validation group reads what the single one read, round after round.
echo "\"first-test: 1 $test_range $P\"" > "$WORK/test_groups.txt"
grouped=(--train-weighted-split-paths "$train_group"
         --valid-weighted-split-paths "VA: 1 $valid_range $P" "VB: 1 $valid_range $P"
         --test-weighted-split-paths-path "$WORK/test_groups.txt")
run grouped "${grouped[@]}"
expected_valid=$(loss_lines "$WORK/plain.log" valid)
[ "$(wc -l <<< "$expected_valid")" = 4 ] || fail "expected 4 validation rounds: $expected_valid"
for group in VA VB; do
  [ "$(loss_lines "$WORK/grouped.log" "$group")" = "$expected_valid" ] ||
    fail "group $group: $(loss_lines "$WORK/grouped.log" "$group") vs $expected_valid"
done
[ "$(loss_lines "$WORK/grouped.log" first-test)" = "$(loss_lines "$WORK/plain.log" test)" ] ||
  fail "the test group from the -path file: $(loss_lines "$WORK/grouped.log" first-test)"
ls "$WORK/groups/split_text_document_VB_indexmap_32ns_32sl_1234s_doc_idx.npy" > /dev/null ||
  fail "no index maps named after the group VB"
python3 - "$WORK/grouped.jsonl" <<'PY' || fail "metrics records of the groups"
import json, sys
names = [(r["type"], r.get("name")) for r in map(json.loads, open(sys.argv[1])) if r["type"] != "train"]
assert names == [("valid", "VA"), ("valid", "VB")] * 4 + [("test", "first-test")], names
PY
pass "two validation groups each evaluate from their own position; the test group from a -path file"

# Resumed after the evaluation at iteration 2: both groups go on from their position
# (consumed_valid_samples // 2), as the straight run did.
run first "${grouped[@]}" --save "$WORK/ckpt" --save-interval 100 --exit-interval 3
run rest "${grouped[@]}" --load "$WORK/ckpt"
for group in VA VB; do
  [ "$(loss_lines "$WORK/rest.log" "$group")" = "$(loss_lines "$WORK/grouped.log" "$group" | tail -n 3)" ] ||
    fail "resumed group $group: $(loss_lines "$WORK/rest.log" "$group")"
done
pass "a resumed run evaluates each group from where the straight run did"

expect_one_line() {  # expected-stderr-besides-notes flags...
  local expected=$1; shift
  local rc=0
  "$MDS_BIN/pretrain" "${common[@]}" "$@" > /dev/null 2> "$WORK/bad.log" || rc=$?
  [ "$rc" != 0 ] && [ "$(grep -v '^pretrain: note: ' "$WORK/bad.log")" = "$expected" ] ||
    { cat "$WORK/bad.log"; fail "expected one line '$expected' (rc $rc)"; }
}
printf '"a: 1 0:1 %s"\n"b: 1 0:1 %s"\n' "$P" "$P" > "$WORK/two_lines.txt"
expect_one_line "pretrain: error: $WORK/two_lines.txt: must contain exactly one line of double-quoted groups" \
  --train-weighted-split-paths "$train_group" --valid-weighted-split-paths-path "$WORK/two_lines.txt"
expect_one_line "pretrain: error: --valid-weighted-split-paths-path: cannot read $WORK/missing.txt: No such file or directory" \
  --train-weighted-split-paths "$train_group" --valid-weighted-split-paths-path "$WORK/missing.txt"
pass "a bad or missing -path file fails with one line naming it"
finish
