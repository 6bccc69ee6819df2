#!/usr/bin/env bash
# merge-mp-partitions (issue 7): a T=2×P=2 fp32 model merged into one process (also from a
# Megatron-native copy written by torch), a bf16 T=1 model (trained at D=2, so with ZeRO files)
# split over TP and over PP, and TP 1→2→1 and 1→4→1 round-tripped:
# evaluate gives the same numbers before and after every conversion, generate the same text,
# pretrain --finetune at the target grid continues from the converted weights (same losses as the
# source grid finetuned), the round trip gives back the layer files byte for byte, bf16 stays bf16,
# and bad inputs fail with one line and write nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"

write_grid_ds_config "$WORK/fp32.json"  # fp32, ZeRO 0, b = 2, G = 8
write_ds_config "$WORK/bf16.json" bf16 0
sed -i 's/"train_batch_size": 4/"train_batch_size": 8/' "$WORK/bf16.json"
# --make-vocab-size-divisible-by 64 pads GPT-2's 50257 tokens to 50304 rows at T = 1 and T = 2:
# the same model on both grids, so evaluate's softmax over all rows gives the same numbers.
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --make-vocab-size-divisible-by 64 "${gpt2_flags[@]}")
flags=("${model[@]}" --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --min-lr 1e-4
       --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1 --seed 1234 --split 90,8,2
       --eval-interval 1000 --eval-iters 2 --log-interval 1
       --data-path "$WORK/shakespeare_text_document" --deepspeed)
fp32=(--deepspeed_config "$WORK/fp32.json")
bf16=(--deepspeed_config "$WORK/bf16.json" --bf16)

run_ranks src22 4 "${fp32[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --train-iters 6 --save "$WORK/ckpt-src22" --save-interval 6
run_ranks src1 2 "${bf16[@]}" --train-iters 6 --save "$WORK/ckpt-src1" --save-interval 6

merge() {  # name source target-T target-P extra-flags...
  local name=$1 source=$2 tp=$3 pp=$4; shift 4
  "$MDS_BIN/merge-mp-partitions" "${model[@]}" --model-type GPT --load "$WORK/$source" \
    --save "$WORK/ckpt-$name" --target-tensor-model-parallel-size "$tp" \
    --target-pipeline-model-parallel-size "$pp" "$@" > "$WORK/merge-$name.out" \
    2> "$WORK/merge-$name.err" || { cat "$WORK/merge-$name.err"; fail "merge-mp-partitions $name"; }
}
merge m11 ckpt-src22 1 1
merge s21 ckpt-src1 2 1
merge s12 ckpt-src1 1 2
merge rt11 ckpt-s21 1 1
merge s41 ckpt-src1 4 1  # 64·4-multiples: 50432 rows, the last 128 zero
merge rt41 ckpt-s41 1 1  # cut back to 50304
grep -q "reading TP rank 1 of 2" "$WORK/merge-m11.err" || fail "progress lines on stderr"
[ ! -s "$WORK/merge-m11.out" ] || fail "merge-mp-partitions prints nothing on stdout"
pass "merge 2×2 → 1×1, split 1×1 → 2×1, 1×2 and 4×1, round trips 1 → 2 → 1 and 1 → 4 → 1"

# Files, keys, dtypes and the bytes of the round trip, through torch.
"$MDS_PYTHON" - "$WORK" "$REPO/tests/e2e" <<'PY' || fail "converted checkpoints"
import pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from ckpt_torch_load_test import install_stubs
install_stubs()

def folder(name):
    return work / f"ckpt-{name}" / "global_step6"

def expect_files(name, t, p):
    found = sorted(f.name for f in folder(name).iterdir())
    layers = [f"layer_{s:02d}-model_{tp:02d}-model_states.pt" for s in (1, 3, 4, 6) for tp in range(t)]
    expected = sorted(layers + [f"mp_rank_{mp:02d}_model_states.pt" for mp in range(t * p)])
    assert found == expected, (name, found)
    assert (work / f"ckpt-{name}" / "latest").read_text() == "global_step6"
    for pp in range(p):
        for tp in range(t):
            s = torch.load(folder(name) / f"mp_rank_{pp * t + tp:02d}_model_states.pt",
                           map_location="cpu", weights_only=False)
            assert s["mp_world_size"] == t * p and s["dp_world_size"] == 1, name
            assert s["optimizer"] is None and s["module"] is None, name
            assert s["args"].tensor_model_parallel_size == t, name
            assert s["args"].pipeline_model_parallel_size == p, name
            assert s["args"].padded_vocab_size == 50304, name
            assert s["checkpoint_info"] == {"padded_vocab_size": 50304, "original_vocab_size": 50257}
            assert s["iteration"] == 6 and s["global_steps"] == 6, name

for name, t, p in (("m11", 1, 1), ("s21", 2, 1), ("s12", 1, 2), ("rt11", 1, 1)):
    expect_files(name, t, p)
def tensors(name, file):
    return torch.load(folder(name) / file, map_location="cpu")
for name in ("s21", "s12", "rt11"):
    for file in folder(name).glob("layer_*"):
        assert all(v.dtype == torch.bfloat16 for v in tensors(name, file.name).values()), file
for file in folder("src1").glob("layer_*"):
    for back in ("rt11", "rt41"):
        assert (folder(back) / file.name).read_bytes() == file.read_bytes(), (back, file.name)
# T = 4 pads the vocabulary to 50432 rows: the source's 50304 rows, then zeros.
words = torch.cat([tensors("s41", f"layer_01-model_{tp:02d}-model_states.pt")["word_embeddings.weight"]
                   for tp in range(4)], 0)
original = tensors("src1", "layer_01-model_00-model_states.pt")["word_embeddings.weight"]
assert words.shape == (50432, 32) and torch.equal(words[:50304], original), words.shape
assert not words[50304:].any()
s41 = torch.load(folder("s41") / "mp_rank_03_model_states.pt", map_location="cpu", weights_only=False)
assert s41["args"].padded_vocab_size == 50432 and s41["checkpoint_info"]["padded_vocab_size"] == 50432
# TP 2 → 1 by hand: column blocks stacked, row blocks side by side, replicas equal.
src = [tensors("src22", f"layer_03-model_{tp:02d}-model_states.pt") for tp in (0, 1)]
merged = tensors("m11", "layer_03-model_00-model_states.pt")
assert torch.equal(merged["self_attention.query_key_value.weight"],
                   torch.cat([s["self_attention.query_key_value.weight"] for s in src], 0))
assert torch.equal(merged["mlp.dense_4h_to_h.weight"],
                   torch.cat([s["mlp.dense_4h_to_h.weight"] for s in src], 1))
assert torch.equal(merged["input_layernorm.weight"], src[1]["input_layernorm.weight"])
print("converted checkpoints: upstream's files, bf16 kept, TP 1→2→1 and 1→4→1 byte for byte")
PY
pass "converted checkpoints: files, saved args, bf16 kept, vocabulary re-padded; round trips give back the layer files"

# A Megatron-native copy of the 2×2 checkpoint, written by torch (iter_0000006/mp_rank_TT_PPP/
# model_optim_rng.pt, stage-local layer numbers), merges into the same layer files.
"$MDS_PYTHON" - "$WORK" "$REPO/tests/e2e" <<'PY' || fail "writing the Megatron-native checkpoint"
import collections, pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from ckpt_torch_load_test import install_stubs
install_stubs()
src, out = work / "ckpt-src22" / "global_step6", work / "ckpt-native" / "iter_0000006"
OD = collections.OrderedDict
def layer(spec, tp):
    return torch.load(src / f"layer_{spec:02d}-model_{tp:02d}-model_states.pt", map_location="cpu")
for pp in (0, 1):
    for tp in (0, 1):
        states = torch.load(src / f"mp_rank_{pp * 2 + tp:02d}_model_states.pt", map_location="cpu",
                            weights_only=False)
        language_model = OD()
        if pp == 0:
            embedding = layer(1, tp)
            language_model["embedding"] = OD(
                word_embeddings=OD(weight=embedding["word_embeddings.weight"]),
                position_embeddings=OD(weight=embedding["position_embeddings.weight"]))
        encoder = OD((f"layers.0.{k}", v) for k, v in layer(3 + pp, tp).items())
        if pp == 1:
            encoder.update((f"final_layernorm.{k}", v) for k, v in layer(6, tp).items())
        language_model["encoder"] = encoder
        model = {"language_model": language_model}
        if pp == 1:
            model["word_embeddings_for_head"] = OD(weight=layer(1, tp)["word_embeddings.weight"])
        folder = out / f"mp_rank_{tp:02d}_{pp:03d}"
        folder.mkdir(parents=True)
        torch.save({"args": states["args"], "checkpoint_version": 3.0, "iteration": 6,
                    "tokens": states["tokens"], "checkpoint_info": states["checkpoint_info"],
                    "lr_scheduler": states["lr_scheduler"], "model": model},
                   folder / "model_optim_rng.pt")
(work / "ckpt-native" / "latest_checkpointed_iteration.txt").write_text("6")
PY
merge n11 ckpt-native 1 1
for file in "$WORK"/ckpt-m11/global_step6/layer_*; do
  expect_same_files "$file" "$WORK/ckpt-n11/global_step6/$(basename "$file")" \
    "Megatron-native input: $(basename "$file") as from the DeepSpeed checkpoint"
done

# evaluate before and after every conversion.
head -c 4000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate() {  # name checkpoint extra-flags...
  local name=$1 checkpoint=$2; shift 2
  OMP_NUM_THREADS=1 "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
    "${model[@]}" --micro-batch-size 2 --overlapping-eval 16 --load "$WORK/$checkpoint" \
    --results-file "$WORK/eval-$name.json" "$@" > "$WORK/eval-$name.log" 2>&1 ||
    { cat "$WORK/eval-$name.log"; fail "evaluate $name"; }
}
evaluate src22 ckpt-src22
evaluate m11 ckpt-m11
for name in src1 s21 s12 rt11 s41; do evaluate "$name" "ckpt-$name" --bf16; done
grep -q "merging 4 TP shards" "$WORK/eval-s41.log" || fail "evaluate merges the 4 TP shards"

"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate differs after a conversion"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
def numbers(name):
    d = json.loads((work / f"eval-{name}.json").read_text())
    return {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
for before, afters in (("src22", ["m11"]), ("src1", ["s21", "s12", "rt11"])):
    a = numbers(before)
    for after in afters:
        b = numbers(after)
        assert a.keys() == b.keys() and "avg_loss" in a, (a, b)
        for key in a:
            assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (after, key, a[key], b[key])
    print(f"evaluate {before} = {', '.join(afters)}: avg_loss {a['avg_loss']:.6f}")
PY
pass "evaluate gives the same loss and perplexity before and after each conversion"

printf 'First Citizen:\nYou are all resolved\n' > "$WORK/prompts.txt"
generate() {  # name checkpoint
  "$MDS_BIN/generate" "${model[@]}" --load "$WORK/$2" --greedy --out-seq-length 12 \
    --sample-input-file "$WORK/prompts.txt" --sample-output-file "$WORK/gen-$1.txt" \
    > "$WORK/gen-$1.log" 2>&1 || { cat "$WORK/gen-$1.log"; fail "generate $1"; }
}
generate src22 ckpt-src22
generate m11 ckpt-m11
[ -s "$WORK/gen-m11.txt" ] || fail "generate wrote samples"
expect_same_files "$WORK/gen-src22.txt" "$WORK/gen-m11.txt" "generate: the merged checkpoint continues the prompts as the 2×2 one"

# pretrain --finetune at the target grid starts from the converted weights: the same losses as the
# source grid finetuned from the source checkpoint (iteration 0, no optimizer state read).
run_ranks f22 4 "${fp32[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --train-iters 4 --load "$WORK/ckpt-src22" --finetune
run_ranks f11 1 "${fp32[@]}" --train-iters 4 --load "$WORK/ckpt-m11" --finetune
grep -q "successfully loaded checkpoint from $WORK/ckpt-m11 at iteration 0" "$WORK/f11.log" ||
  fail "finetune restarts at iteration 0"
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" f22 f11 ||
  fail "finetuning the merged checkpoint differs from finetuning the 2×2 one"
# bf16: the D=2 source finetuned on one rank (its ZeRO files are skipped), the splits at their
# grids and the round trip at D=2 (the converted checkpoint has no ZeRO files).
run_ranks fb1 1 "${bf16[@]}" --train-iters 4 --load "$WORK/ckpt-src1" --finetune
run_ranks fb21 2 "${bf16[@]}" --tensor-model-parallel-size 2 --train-iters 4 \
  --load "$WORK/ckpt-s21" --finetune
run_ranks fb12 2 "${bf16[@]}" --pipeline-model-parallel-size 2 --train-iters 4 \
  --load "$WORK/ckpt-s12" --finetune
run_ranks fbd2 2 "${bf16[@]}" --train-iters 4 --load "$WORK/ckpt-rt11" --finetune
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 1e-4 losses "$WORK" fb1 fb21 fb12 \
  fbd2 || fail "finetuning the bf16 conversions differs from finetuning the source"
pass "pretrain --finetune at the target grid continues from the converted weights (fp32 and bf16)"

# --embed-layernorm (BLOOM): merging T = 2 into one process keeps one copy of the TP-replicated
# embedding LayerNorm, [h] (upstream's DeepSpeedCheckpoint concatenates the copies into [2h],
# which no model can load); evaluate gives the same numbers before and after.
run_ranks eln2 2 "${fp32[@]}" --embed-layernorm --tensor-model-parallel-size 2 --train-iters 4 \
  --save "$WORK/ckpt-eln2" --save-interval 4
"$MDS_BIN/merge-mp-partitions" "${model[@]}" --embed-layernorm --load "$WORK/ckpt-eln2" \
  --save "$WORK/ckpt-eln1" 2> "$WORK/merge-eln1.err" || { cat "$WORK/merge-eln1.err"; fail "merge eln"; }
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "the embedding LayerNorm after the merge"
import pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
merged = torch.load(work / "ckpt-eln1/global_step4/layer_01-model_00-model_states.pt")
for rank in (0, 1):
    shard = torch.load(work / f"ckpt-eln2/global_step4/layer_01-model_{rank:02d}-model_states.pt")
    for key in ("word_embeddings.norm.weight", "word_embeddings.norm.bias"):
        assert merged[key].shape == (32,) and torch.equal(merged[key], shard[key]), (rank, key)
PY
evaluate eln2 ckpt-eln2 --embed-layernorm
evaluate eln1 ckpt-eln1 --embed-layernorm
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate differs after merging the --embed-layernorm model"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
a, b = (json.loads((work / f"eval-{n}.json").read_text())["avg_loss"] for n in ("eln2", "eln1"))
assert abs(a - b) <= 1e-5 * max(1.0, abs(a)), (a, b)
PY
pass "--embed-layernorm: one copy of the TP-replicated norm after merging; same evaluation"

# Bad inputs: one line, non-zero exit, nothing written.
bad() {  # expected-text name source extra-flags...
  local text=$1 name=$2 source=$3; shift 3
  local rc=0
  "$MDS_BIN/merge-mp-partitions" "${model[@]}" --load "$WORK/$source" --save "$WORK/bad-$name" \
    "$@" > "$WORK/bad-$name.out" 2> "$WORK/bad-$name.err" || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: expected a failure"
  [ "$(grep -c . "$WORK/bad-$name.err")" -eq 1 ] || fail "$name: not one line: $(cat "$WORK/bad-$name.err")"
  grep -qF -- "$text" "$WORK/bad-$name.err" || fail "$name: stderr lacks '$text': $(cat "$WORK/bad-$name.err")"
  [ ! -e "$WORK/bad-$name" ] || fail "$name: wrote $WORK/bad-$name"
  pass "$name fails with '$text'"
}
cp -r "$WORK/ckpt-src22" "$WORK/ckpt-broken"
rm "$WORK/ckpt-broken/global_step6/layer_04-model_01-model_states.pt"
bad "ckpt-broken/global_step6/layer_04-model_01-model_states.pt: missing from the checkpoint" \
  missing ckpt-broken
bad "--target-tensor-model-parallel-size 3 does not divide the 4 attention heads" heads \
  ckpt-src22 --target-tensor-model-parallel-size 3
bad "--tensor-model-parallel-size 1 contradicts the checkpoint" contradiction ckpt-src22 \
  --tensor-model-parallel-size 1
bad "--model-type BERT: only GPT checkpoints are supported" bert ckpt-src22 --model-type BERT
bad "hidden_size is 32 in the checkpoint but 64 on the command line" shape ckpt-src22 \
  --hidden-size 64
finish
