#!/usr/bin/env bash
# evaluate and generate on T × P ranks under mpirun (issue 6): checkpoints pretrain wrote at
# T2×P1, T1×P2, T2×P2 (fp32) and T2×P1 (bf16) run with the matching rank count, each rank loading
# only its own files, and give what one process gives from the merged model: WikiText loss and
# perplexities within 1e-6 relative, the same LAMBADA count, byte-identical greedy and seeded
# (top-k, temperature) samples. Also: evaluation and generation with 2 and 3 data-parallel
# replicas, a checkpoint run on another grid (cut from the merged model), a universal checkpoint on
# 2×2 ranks, and a wrong rank count refused with one line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"

# A barely trained model (a few steps at a small LR) keeps varied logits, so greedy and sampled
# tokens depend on every logit rather than on one learned favourite.
write_grid_ds_config "$WORK/ds.json"
write_ds_config "$WORK/bf16.json" bf16 0
sed -i 's/"train_batch_size": 4/"train_batch_size": 8/' "$WORK/bf16.json"
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 "${gpt2_flags[@]}"
       --make-vocab-size-divisible-by 64)
flags=("${model[@]}" --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
       --lr-warmup-iters 3 --weight-decay 0.1 --clip-grad 1.0 --seed 1234 --split 98,1,1
       --eval-interval 1000 --eval-iters 1 --log-interval 5 --train-iters 6 --save-interval 6
       --data-path "$WORK/shakespeare_text_document")
fp32=(--deepspeed --deepspeed_config "$WORK/ds.json")
# Weights-only checkpoints (--no-save-optim) but for T2×P2, which is converted to universal.
run_ranks t2p1 2 "${fp32[@]}" --tensor-model-parallel-size 2 --save "$WORK/t2p1" --no-save-optim
run_ranks t1p2 2 "${fp32[@]}" --pipeline-model-parallel-size 2 --save "$WORK/t1p2" --no-save-optim
run_ranks t2p2 4 "${fp32[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --save "$WORK/t2p2"
run_ranks b2p1 2 --bf16 --deepspeed --deepspeed_config "$WORK/bf16.json" \
  --tensor-model-parallel-size 2 --save "$WORK/b2p1"
pass "pretrain wrote T2×P1, T1×P2 (weights only), T2×P2 (fp32) and T2×P1 (bf16) checkpoints"

# Evaluation data: a slice of WikiText-2, and LAMBADA lines of two kinds: the last 12 words of
# bundled lines (the model gets those wrong), and prompts completed with the token one process
# predicts greedily for them, so that some answers are right and the count says something.
head -c 3000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
python3 - "$MDS_DATA/eval/lambada_test.jsonl" "$WORK/lambada-real.jsonl" "$WORK/prompts" <<'PY'
import json, sys
lines = [json.loads(line)["text"].split() for line in open(sys.argv[1])][:16]
with open(sys.argv[2], "w") as out:
    for words in lines[:8]:
        out.write(json.dumps({"text": " ".join(words[-12:])}) + "\n")
for i, words in enumerate(lines[8:]):
    with open(f"{sys.argv[3]}-{i}.txt", "w") as prompt:  # no newline: the model sees none
        prompt.write(" ".join(words[-7:-1]))
PY
for i in 0 1 2 3 4 5 6 7; do
  "$MDS_BIN/generate" "${model[@]}" --load "$WORK/t2p2" --greedy --out-seq-length 1 \
    --sample-input-file "$WORK/prompts-$i.txt" > "$WORK/completion-$i.txt" 2> "$WORK/gen.err" ||
    { cat "$WORK/gen.err"; fail "greedy completion of prompt $i"; }
done
python3 - "$WORK" > "$WORK/lambada.jsonl" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
print((work / "lambada-real.jsonl").read_text(), end="")
for i in range(8):
    prompt = (work / f"prompts-{i}.txt").read_text()
    record = (work / f"completion-{i}.txt").read_text()
    completion = record[record.index("\n\nMegatron-LM:") + 14:-1]
    print(json.dumps({"text": prompt + completion}))
PY

launch() {  # ranks: the command prefix for that many processes
  [ "$1" = 1 ] && return
  printf '%s\n' timeout 120 mpirun -np "$1"
}
evaluate() {  # name ranks checkpoint task extra-flags...
  local name=$1 ranks=$2 checkpoint=$3 task=$4; shift 4
  local data="$WORK/wiki.txt"
  [ "$task" = LAMBADA ] && data="$WORK/lambada.jsonl"
  local prefix; mapfile -t prefix < <(launch "$ranks")
  "${prefix[@]}" "$MDS_BIN/evaluate" --task "$task" --valid-data "$data" "${model[@]}" \
    --overlapping-eval 16 --load "$WORK/$checkpoint" --results-file "$WORK/$name.json" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "evaluate $name"; }
}
generate() {  # name ranks checkpoint extra-flags...
  local name=$1 ranks=$2 checkpoint=$3; shift 3
  local prefix; mapfile -t prefix < <(launch "$ranks")
  "${prefix[@]}" "$MDS_BIN/generate" "${model[@]}" --load "$WORK/$checkpoint" "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "generate $name"; }
}
same_results() {  # a b: the JSON numbers within 1e-6 relative, counts exactly
  python3 - "$WORK/$1.json" "$WORK/$2.json" <<'PY'
import json, sys
a, b = (json.load(open(path)) for path in sys.argv[1:])
assert a.keys() == b.keys(), (a, b)
worst = 0.0
for key, x in a.items():
    y = b[key]
    if key == "checkpoint":
        continue
    if isinstance(x, float):
        worst = max(worst, abs(x - y) / max(abs(x), 1e-30))
        assert abs(x - y) <= 1e-6 * abs(x), (key, x, y)
    else:
        assert x == y, (key, x, y)
print(f"worst relative difference {worst:.1e}")
PY
}
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n' \
  > "$WORK/verses.txt"
greedy=(--greedy --out-seq-length 10 --sample-input-file "$WORK/verses.txt")
sampled=(--top_k 20 --temperature 1.3 --seed 77 --num-samples 4 --out-seq-length 12)

# Every checkpoint on its own grid (the sizes default to the checkpoint's) and on one process.
for run in "t2p1 2" "t1p2 2" "t2p2 4" "b2p1 2"; do
  set -- $run
  extra=()
  [ "$1" = b2p1 ] && extra=(--bf16)
  evaluate "$1-wiki-1" 1 "$1" WIKITEXT103 "${extra[@]}"
  evaluate "$1-wiki-n" "$2" "$1" WIKITEXT103 "${extra[@]}"
  grep -q "each rank reads its TP rank's layer files of its pipeline stage" "$WORK/$1-wiki-n.log" ||
    fail "$1: the ranks load their own files: $(cat "$WORK/$1-wiki-n.log")"
  difference="$(same_results "$1-wiki-1" "$1-wiki-n")" ||
    fail "$1: WikiText on $2 ranks differs from one process"
  pass "$1: WikiText loss on $2 ranks = one process ($difference)"
  evaluate "$1-lambada-1" 1 "$1" LAMBADA "${extra[@]}"
  evaluate "$1-lambada-n" "$2" "$1" LAMBADA "${extra[@]}"
  same_results "$1-lambada-1" "$1-lambada-n" > /dev/null ||
    fail "$1: LAMBADA on $2 ranks differs from one process"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert 0 < r["correct"] < r["total"], r' \
    "$WORK/$1-lambada-n.json" || fail "$1: the LAMBADA count should be neither 0 nor all"
  pass "$1: LAMBADA on $2 ranks = one process ($(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["correct"], "of", r["total"])' "$WORK/$1-lambada-n.json"))"
  generate "$1-greedy-1" 1 "$1" "${greedy[@]}" "${extra[@]}"
  generate "$1-greedy-n" "$2" "$1" "${greedy[@]}" "${extra[@]}"
  expect_same_files "$WORK/$1-greedy-1.out" "$WORK/$1-greedy-n.out" "$1: greedy prompts on $2 ranks"
  generate "$1-sampled-1" 1 "$1" "${sampled[@]}" "${extra[@]}"
  generate "$1-sampled-n" "$2" "$1" "${sampled[@]}" "${extra[@]}"
  expect_same_files "$WORK/$1-sampled-1.out" "$WORK/$1-sampled-n.out" \
    "$1: seeded top-k samples on $2 ranks"
done
[ "$(wc -l < "$WORK/t2p2-sampled-n.out")" = 4 ] || fail "4 samples expected"
[ "$(grep -c 'Megatron-LM:' "$WORK/t2p2-greedy-n.out")" = 4 ] || fail "4 continuations expected"

# Another grid than the checkpoint's: each rank cuts its shard from the merged model.
evaluate t2p1-as-t1p2 2 t2p1 WIKITEXT103 --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 2
same_results t2p1-wiki-1 t2p1-as-t1p2 > /dev/null || fail "T2×P1 checkpoint run at T1×P2 differs"
generate t1p2-as-t2p1 2 t1p2 "${greedy[@]}" --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 1
expect_same_files "$WORK/t1p2-greedy-1.out" "$WORK/t1p2-as-t2p1.out" \
  "a T1×P2 checkpoint generates the same at T2×P1, a T2×P1 one evaluates the same at T1×P2"

# A universal checkpoint on 2 × 2 ranks: each rank reads its slices.
"$MDS_BIN/convert-to-universal-checkpoint" --input_folder "$WORK/t2p2/global_step6" \
  --output_folder "$WORK/universal/global_step6_universal" > "$WORK/convert.log" 2>&1 ||
  { cat "$WORK/convert.log"; fail "convert-to-universal-checkpoint"; }
evaluate universal-n 4 universal WIKITEXT103
grep -q "universal: this rank's slices" "$WORK/universal-n.log" || fail "universal load line"
same_results t2p2-wiki-1 universal-n > /dev/null || fail "the universal checkpoint on 4 ranks differs"
pass "a universal checkpoint on 2 × 2 ranks evaluates as the checkpoint it came from"

# Evaluation on more ranks than T·P: W / (T·P) replicas split the windows and examples.
for run in "t2p1 4" "t1p2 6"; do
  set -- $run
  evaluate "$1-wiki-dp" "$2" "$1" WIKITEXT103
  grep -q "$(($2 / 2)) model replicas of" "$WORK/$1-wiki-dp.log" || fail "$1: replicas line"
  same_results "$1-wiki-1" "$1-wiki-dp" > /dev/null ||
    fail "$1: WikiText on $2 ranks ($(($2 / 2)) replicas) differs from one process"
  evaluate "$1-lambada-dp" "$2" "$1" LAMBADA
  same_results "$1-lambada-1" "$1-lambada-dp" > /dev/null ||
    fail "$1: LAMBADA on $2 ranks ($(($2 / 2)) replicas) differs from one process"
  pass "$1 on $2 ranks ($(($2 / 2)) replicas): WikiText and LAMBADA = one process"
done
# Generation on more ranks than T·P: replica k mod D decodes batch k, rank 0 writes them in order
# (one prompt or sample per batch here, so that every replica gets some).
for run in "t2p1 4 2" "t1p2 6 3" "t1p2 2 2 --pipeline-model-parallel-size 1"; do
  set -- $run
  name="$1-$2-ranks"
  generate "$name-greedy" "$2" "$1" "${greedy[@]}" --micro-batch-size 1 "${@:4}"
  grep -q "$3 model replicas of" "$WORK/$name-greedy.err" || fail "$name: replicas line"
  expect_same_files "$WORK/$1-greedy-1.out" "$WORK/$name-greedy.out" \
    "$1: greedy prompts on $2 ranks ($3 replicas)"
  generate "$name-sampled" "$2" "$1" "${sampled[@]}" --micro-batch-size 1 "${@:4}"
  expect_same_files "$WORK/$1-sampled-1.out" "$WORK/$name-sampled.out" \
    "$1: seeded top-k samples on $2 ranks ($3 replicas)"
done
rc=0
timeout 120 mpirun -np 3 "$MDS_BIN/generate" "${model[@]}" --load "$WORK/t2p1" --num-samples 1 \
  > "$WORK/bad-generate.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "generate on 3 ranks for T2×P1 exits non-zero (rc $rc)"
grep -q "generate: error: world size 3 is not a multiple of --tensor-model-parallel-size 2" \
  "$WORK/bad-generate.log" || fail "generate names the sizes: $(cat "$WORK/bad-generate.log")"
pass "generate on 3 ranks for a T2×P1 checkpoint is refused with one line"

# Standard input is rank 0's: every rank decodes the prompts it read.
mpirun -np 2 "$MDS_BIN/generate" "${model[@]}" --load "$WORK/t1p2" --greedy --out-seq-length 10 \
  < "$WORK/verses.txt" > "$WORK/stdin.out" 2> "$WORK/stdin.err" ||
  { cat "$WORK/stdin.err"; fail "prompts on standard input under mpirun"; }
expect_same_files "$WORK/t1p2-greedy-1.out" "$WORK/stdin.out" "prompts from rank 0's standard input"

# A rank count that is not T·P, or sizes given to one process: one line, non-zero exit.
rc=0
timeout 120 mpirun -np 3 "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
  "${model[@]}" --load "$WORK/t2p1" > "$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "3 ranks for a T2×P1 checkpoint exit non-zero (rc $rc)"
[ "$(grep -c '^evaluate: error:' "$WORK/bad.log")" = 1 ] || fail "one error line: $(cat "$WORK/bad.log")"
grep -q "evaluate: error: world size 3 is not a multiple of --tensor-model-parallel-size 2 × --pipeline-model-parallel-size 1 = 2" \
  "$WORK/bad.log" || fail "the error names the sizes: $(cat "$WORK/bad.log")"
pass "3 ranks for a T2×P1 checkpoint are refused with one line"
expect_failure "--tensor-model-parallel-size 2 × --pipeline-model-parallel-size 2 = 4 ranks, but this is one process" \
  "$MDS_BIN/generate" "${model[@]}" --load "$WORK/t2p2" --num-samples 1 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
rc=0
timeout 120 mpirun -np 3 "$MDS_BIN/generate" "${model[@]}" --load "$WORK/t1p2" --num-samples 1 \
  --tensor-model-parallel-size 3 --pipeline-model-parallel-size 1 > "$WORK/bad3.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "TP 3 of a 4-head model exits non-zero (rc $rc)"
grep -q "generate: error: --tensor-model-parallel-size 3: --num-attention-heads 4 is not divisible by it" \
  "$WORK/bad3.log" || fail "a TP size the model cannot take: $(cat "$WORK/bad3.log")"
pass "a TP size that does not divide the model is refused naming it"
finish
