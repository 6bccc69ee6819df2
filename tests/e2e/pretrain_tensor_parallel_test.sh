#!/usr/bin/env bash
# Tensor-parallel pretrain under mpirun (issue 4): TP = 2 and TP = 2 × DP = 2 train the same 10
# steps (dropout on) as the single process, within 1e-5 relative on every loss and 2e-6 on the
# merged weights; each rank writes upstream's files for its TP rank; a TP×DP run stopped and
# resumed continues bit for bit, and so does a bf16 TP run (per-rank BF16_Optimizer files). The
# model is BLOOM-shaped: --embed-layernorm (its LayerNorm follows the TP sum of the lookups, so its
# copies on the TP ranks must stay equal, the merge check, and evaluate must take one of them) and
# ALiBi positions (each TP rank biases its own heads with their slopes).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"

write_grid_ds_config "$WORK/ds.json"
flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1
       --clip-grad 1.0 --seed 1234 --split 90,8,2 --eval-interval 5 --eval-iters 2
       --log-interval 5 --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
       --embed-layernorm --position-embedding-type alibi)
# Vp must be the same model at every T: 128·T-multiples would pad 50257 to 50304 at T = 1 but
# 50432 at T = 2 (more softmax columns, a different loss), so T = 2 pads to multiples of 64·2.
tp2=(--tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64)

run() { run_ranks "$@"; }
fp32=(--deepspeed --deepspeed_config "$WORK/ds.json")

run t1 1 "${fp32[@]}" --train-iters 10 --save "$WORK/ckpt-t1" --save-interval 10
run t2 2 "${fp32[@]}" "${tp2[@]}" --train-iters 10 --save "$WORK/ckpt-t2" --save-interval 10
run t2d2 4 "${fp32[@]}" "${tp2[@]}" --train-iters 10 --save "$WORK/ckpt-t2d2" --save-interval 10

"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" t1 t2 t2d2 ||
  fail "tensor-parallel runs differ from the single process"
pass "TP=2 and TP=2×DP=2 losses equal the single process's within 1e-5"

# TFLOPs divide by every rank of the job (training.md §5.10: W = T·P·D), so tflops × elapsed is
# the model's FLOPs over W: half the single process's at T = 2, a quarter at T = 2 × D = 2.
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "TFLOPs are not divided by the world size"
import json, sys
def products(name):
    records = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
    return [r["tflops"] * r["elapsed_s"] for r in records if r["type"] == "train"]
one = products("t1")
for name, world in (("t2", 2), ("t2d2", 4)):
    for a, b in zip(one, products(name)):
        assert abs(b * world / a - 1) < 1e-6, (name, a, b)
PY
pass "TFLOPs divide by the world size (T·P·D)"

"$MDS_PYTHON" - "$WORK" "$REPO/tests/e2e" <<'PY' || fail "tensor-parallel weights differ"
import pathlib, re, sys, torch
work = pathlib.Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from ckpt_torch_load_test import install_stubs  # upstream classes the files name
install_stubs()
ROWS = re.compile(r"word_embeddings\.weight|query_key_value\.|dense_h_to_4h\.")
COLUMNS = re.compile(r"self_attention\.dense\.weight|dense_4h_to_h\.weight")
def shards(name, tp):
    folder = work / name / "global_step10"
    out = {}
    for path in sorted(folder.glob(f"layer_*-model_{tp:02d}-model_states.pt")):
        layer = path.name.split("-")[0]
        for key, value in torch.load(path, map_location="cpu").items():
            out[f"{layer}:{key}"] = value.double()
    return out
one = shards("ckpt-t1", 0)
for name in ("ckpt-t2", "ckpt-t2d2"):
    a, b = shards(name, 0), shards(name, 1)
    assert a.keys() == b.keys() == one.keys(), name
    worst = 0.0
    for key, full in one.items():
        if ROWS.search(key):
            merged = torch.cat([a[key], b[key]], 0)
        elif COLUMNS.search(key):
            merged = torch.cat([a[key], b[key]], 1)
        else:
            assert torch.equal(a[key], b[key]), f"{name} {key}: TP duplicates differ"
            merged = a[key]
        assert merged.shape == full.shape, (name, key, merged.shape, full.shape)
        worst = max(worst, (merged - full).abs().max().item())
    print(f"{name}: {len(one)} tensors merged over TP, worst absolute difference {worst:.2e}")
    assert worst <= 2e-6, (name, worst)
    for mp in (0, 1):
        states = torch.load(work / name / "global_step10" / f"mp_rank_{mp:02d}_model_states.pt",
                            map_location="cpu", weights_only=False)
        assert states["mp_world_size"] == 2, states["mp_world_size"]
        assert states["dp_world_size"] == (2 if name.endswith("d2") else 1)
        assert states["args"].tensor_model_parallel_size == 2
PY
pass "TP=2 weights merged over TP equal the single process's; mp_rank files per TP rank"

# evaluate runs on one process: it reads T from the checkpoint, loads both shards and merges them.
head -c 4000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate() {  # name checkpoint extra-flags...
  local name=$1 checkpoint=$2; shift 2
  OMP_NUM_THREADS=1 "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
    --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --overlapping-eval 16 "${gpt2_flags[@]}" \
    --embed-layernorm --position-embedding-type alibi \
    --load "$checkpoint" --results-file "$WORK/$name.json" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "evaluate $name"; }
}
evaluate eval-t1 "$WORK/ckpt-t1"
evaluate eval-t2 "$WORK/ckpt-t2" --make-vocab-size-divisible-by 64
grep -q "merging 2 TP shards" "$WORK/eval-t2.log" || fail "evaluate says it merges the TP shards"
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate of the TP=2 checkpoint differs from T=1"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
one, two = (json.loads((work / f"eval-{n}.json").read_text()) for n in ("t1", "t2"))
def numbers(d, prefix=""):
    for key, value in d.items():
        if isinstance(value, dict):
            yield from numbers(value, prefix + key + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield prefix + key, value
a, b = dict(numbers(one)), dict(numbers(two))
assert a.keys() == b.keys() and a, (a, b)
for key in a:
    assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (key, a[key], b[key])
print("evaluate T=1 vs merged T=2:", a)
PY
pass "evaluate loads a TP=2 checkpoint by merging its shards: same perplexity as T=1"

# Resume at TP=2 × DP=2: 5 steps, save, 5 more = the 10 straight steps, bit for bit.
run half 4 "${fp32[@]}" "${tp2[@]}" --train-iters 10 --exit-interval 5 --save "$WORK/ckpt-resume" \
  --save-interval 100
run rest 4 "${fp32[@]}" "${tp2[@]}" --train-iters 10 --save "$WORK/ckpt-resume" \
  --save-interval 100 --load "$WORK/ckpt-resume"
same_train_losses() {  # straight half rest
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" resume "$WORK" "$@"
}
same_train_losses t2d2 half rest || fail "resumed TP=2×DP=2 run differs"
for file in "$WORK"/ckpt-t2d2/global_step10/*.pt; do
  cmp -s "$file" "$WORK/ckpt-resume/global_step10/$(basename "$file")" ||
    [[ "$(basename "$file")" == mp_rank_* ]] ||  # args record --load/--exit-interval
    fail "resumed weights differ: $(basename "$file")"
done
pass "TP=2×DP=2: 5 + resume + 5 steps equal 10 straight steps, losses and weights bit for bit"

# bf16 at TP=2: each TP rank writes its BF16_Optimizer file; resuming continues bit for bit.
write_ds_config "$WORK/bf16.json" bf16 0
sed -i 's/"train_batch_size": 4/"train_batch_size": 8/' "$WORK/bf16.json"
bf16=(--bf16 --deepspeed --deepspeed_config "$WORK/bf16.json" "${tp2[@]}")
run b2 2 "${bf16[@]}" --train-iters 10 --save "$WORK/ckpt-b2" --save-interval 10
run bhalf 2 "${bf16[@]}" --train-iters 10 --exit-interval 5 --save "$WORK/ckpt-bres" --save-interval 100
run brest 2 "${bf16[@]}" --train-iters 10 --save "$WORK/ckpt-bres" --save-interval 100 \
  --load "$WORK/ckpt-bres"
for mp in 00 01; do
  [ -s "$WORK/ckpt-b2/global_step10/bf16_zero_pp_rank_0_mp_rank_${mp}_optim_states.pt" ] ||
    fail "bf16 TP=2 writes bf16_zero_pp_rank_0_mp_rank_${mp}_optim_states.pt"
done
same_train_losses b2 bhalf brest || fail "resumed bf16 TP=2 run differs"
pass "bf16 TP=2: per-TP-rank optimizer files; 5 + resume + 5 steps equal 10 straight steps"

# A TP=2 checkpoint does not load into a single process (another grid needs a universal
# checkpoint): one line naming the mismatch, nothing written.
rc=0
"$MDS_BIN/pretrain" "${flags[@]}" "${fp32[@]}" --make-vocab-size-divisible-by 64 --train-iters 12 \
  --load "$WORK/ckpt-t2" --save "$WORK/ckpt-wrong" --save-interval 1 > "$WORK/wrong-grid.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "loading a TP=2 checkpoint at T=1 fails"
grep -q "tensor_model_parallel_size is 2 in the checkpoint but 1 on the command line" \
  "$WORK/wrong-grid.log" || fail "the error names the TP size: $(tail -2 "$WORK/wrong-grid.log")"
[ ! -e "$WORK/ckpt-wrong/latest" ] || fail "a refused load writes no checkpoint"
pass "a TP=2 checkpoint loaded at T=1 is refused with one line"

# A world that does not hold whole TP groups is refused on every rank, without a hang.
rc=0
timeout 120 mpirun -np 3 "$MDS_BIN/pretrain" "${flags[@]}" "${fp32[@]}" "${tp2[@]}" \
  --train-iters 2 > "$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a 3-rank TP=2 run exits non-zero without hanging (rc $rc)"
grep -q "world size 3 is not divisible by --tensor-model-parallel-size 2" "$WORK/bad.log" ||
  fail "the error names the grid: $(cat "$WORK/bad.log")"
pass "a world size TP does not divide is a clear error"
finish
