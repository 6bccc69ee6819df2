#!/usr/bin/env bash
# 3D parallel pretrain under mpirun (issue 4): every grid TP, PP, DP ∈ {1, 2} times ZeRO 0, 1
# and 2 (fp32, fp32 communication, dropout and clipping on) trains 10 steps with the single
# process's losses within 1e-5 relative, and its weights once the ranks' layer files are put
# together (stages) and merged (TP); every rank writes the files upstream writes for its grid
# (layer files of its stage, mp_rank_{pp·T+tp}, zero_pp_rank_{dp}_mp_rank_{pp·T+tp}); a pipelined
# run stopped and resumed continues bit for bit, fp16 and bf16 included; P = 3 has a middle stage.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"

for stage in 0 1 2; do
  cat > "$WORK/z$stage.json" <<JSON
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": $stage}, "communication_data_type": "fp32",
  "steps_per_print": 2000 }
JSON
done
flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1
       --seed 1234 --split 90,8,2 --eval-interval 5 --eval-iters 2 --log-interval 5
       --make-vocab-size-divisible-by 64 --attention-dropout 0.1 --hidden-dropout 0.1
       --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}" --deepspeed)

# name = t<T>p<P>d<D>z<stage>
grid_run() {  # T P D stage
  local name="t$1p$2d$3z$4"
  run_ranks "$name" $(($1 * $2 * $3)) --deepspeed_config "$WORK/z$4.json" \
    --tensor-model-parallel-size "$1" --pipeline-model-parallel-size "$2" --train-iters 10 \
    --save "$WORK/ckpt-$name" --save-interval 10
}
for stage in 0 1 2; do
  grid_run 1 1 1 "$stage"
  others=()
  for t in 1 2; do for p in 1 2; do for d in 1 2; do
    [ "$t$p$d" = 111 ] && continue
    grid_run "$t" "$p" "$d" "$stage"
    others+=("t${t}p${p}d${d}z$stage")
  done; done; done
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" "t1p1d1z$stage" "${others[@]}" ||
    fail "ZeRO-$stage grids differ from the single process"
  pass "ZeRO-$stage: the 7 grids with TP, PP, DP ≤ 2 give the single process's losses within 1e-5"
done

# Files and gathered weights.
"$MDS_PYTHON" - "$WORK" "$REPO/tests/e2e" <<'PY' || fail "pipelined checkpoints"
import pathlib, re, sys, torch
work = pathlib.Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from ckpt_torch_load_test import install_stubs  # upstream classes the files name
install_stubs()
ROWS = re.compile(r"word_embeddings\.weight|query_key_value\.|dense_h_to_4h\.")
COLUMNS = re.compile(r"self_attention\.dense\.weight|dense_4h_to_h\.weight")

def weights(folder, tp):
    out = {}
    for path in sorted(folder.glob(f"layer_*-model_{tp:02d}-model_states.pt")):
        layer = int(path.name.split("_")[1].split("-")[0])
        for key, value in torch.load(path, map_location="cpu").items():
            out[(layer, key)] = value.double()
    return out

def gathered(folder, t):
    shards = [weights(folder, tp) for tp in range(t)]
    out = {}
    for key in shards[0]:
        parts = [s[key] for s in shards]
        if t == 1:
            out[key] = parts[0]
        elif ROWS.search(key[1]):
            out[key] = torch.cat(parts, 0)
        elif COLUMNS.search(key[1]):
            out[key] = torch.cat(parts, 1)
        else:
            assert all(torch.equal(parts[0], p) for p in parts), (folder, key)
            out[key] = parts[0]
    return out

def expected_files(t, p, d, stage):
    files = set()
    layers = [1, 3, 4, 6]  # embedding, L = 2 transformer layers, final LayerNorm, on any P
    for tp in range(t):
        files |= {f"layer_{layer:02d}-model_{tp:02d}-model_states.pt" for layer in layers}
    for mp in range(t * p):
        files.add(f"mp_rank_{mp:02d}_model_states.pt")
        if stage > 0:
            files |= {f"zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt" for dp in range(d)}
    return files

worst_all = 0.0
for stage in (0, 1, 2):
    one = gathered(work / f"ckpt-t1p1d1z{stage}" / "global_step10", 1)
    for t in (1, 2):
        for p in (1, 2):
            for d in (1, 2):
                name = f"t{t}p{p}d{d}z{stage}"
                folder = work / f"ckpt-{name}" / "global_step10"
                found = {f.name for f in folder.iterdir() if f.suffix == ".pt"}
                assert found == expected_files(t, p, d, stage), (name, sorted(found))
                merged = gathered(folder, t)
                assert merged.keys() == one.keys(), (name, sorted(merged), sorted(one))
                worst = max((merged[k] - one[k]).abs().max().item() for k in one)
                assert worst <= 2e-6, (name, worst)
                worst_all = max(worst_all, worst)
                for pp in range(p):
                    for tp in range(t):
                        states = torch.load(folder / f"mp_rank_{pp * t + tp:02d}_model_states.pt",
                                            map_location="cpu", weights_only=False)
                        assert states["mp_world_size"] == t * p and states["dp_world_size"] == d
                        assert states["args"].pipeline_model_parallel_size == p
print(f"24 runs: upstream's files per grid; gathered weights within {worst_all:.1e} of one process")
PY
pass "every rank writes its stage's files; weights gathered over PP and TP equal the single process's"

# evaluate (one process) joins the stages and merges the TP shards of a T = 2 × P = 2 checkpoint.
head -c 4000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate() {  # name checkpoint
  OMP_NUM_THREADS=1 "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
    --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --overlapping-eval 16 "${gpt2_flags[@]}" \
    --make-vocab-size-divisible-by 64 --load "$2" --results-file "$WORK/$1.json" \
    > "$WORK/$1.log" 2>&1 || { cat "$WORK/$1.log"; fail "evaluate $1"; }
}
evaluate eval-one "$WORK/ckpt-t1p1d1z1"
evaluate eval-grid "$WORK/ckpt-t2p2d2z1"
grep -q "joining 2 pipeline stages" "$WORK/eval-grid.log" || fail "evaluate names the stages"
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate of the T=2×P=2 checkpoint differs from one process"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
one, grid = (json.loads((work / f"eval-{n}.json").read_text()) for n in ("one", "grid"))
def numbers(d, prefix=""):
    for key, value in d.items():
        if isinstance(value, dict):
            yield from numbers(value, prefix + key + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield prefix + key, value
a, b = dict(numbers(one)), dict(numbers(grid))
assert a.keys() == b.keys() and a, (a, b)
for key in a:
    assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (key, a[key], b[key])
print("evaluate one process vs T=2×P=2×D=2:", a)
PY
pass "evaluate loads a T=2×P=2 checkpoint on one process: the single process's perplexity"

# Stop and resume: 5 + 5 steps give the 10 straight steps bit for bit.
resume() {  # name ranks config extra-flags...
  local name=$1 ranks=$2 config=$3; shift 3
  run_ranks "$name-straight" "$ranks" --deepspeed_config "$config" "$@" --train-iters 10
  run_ranks "$name-half" "$ranks" --deepspeed_config "$config" "$@" --train-iters 10 \
    --exit-interval 5 --save "$WORK/ckpt-$name" --save-interval 100
  run_ranks "$name-rest" "$ranks" --deepspeed_config "$config" "$@" --train-iters 10 \
    --load "$WORK/ckpt-$name"
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" resume "$WORK" "$name-straight" \
    "$name-half" "$name-rest" || fail "$name: resumed run differs"
  pass "$name: 5 + resume + 5 steps equal 10 straight steps bit for bit"
}
pp2=(--pipeline-model-parallel-size 2)
resume p2-z0 2 "$WORK/z0.json" "${pp2[@]}"  # the tied replica comes back by broadcast
resume p2d2-z2 4 "$WORK/z2.json" "${pp2[@]}"
resume t2p2-z1 4 "$WORK/z1.json" "${pp2[@]}" --tensor-model-parallel-size 2
write_ds_config "$WORK/fp16.json" fp16 0
write_ds_config "$WORK/bf16.json" bf16 0
sed -i 's/"train_batch_size": 4/"train_batch_size": 8/' "$WORK/fp16.json" "$WORK/bf16.json"
resume p2d2-fp16 4 "$WORK/fp16.json" "${pp2[@]}" --fp16
resume p2d2-bf16 4 "$WORK/bf16.json" "${pp2[@]}" --bf16
[ -e "$WORK/ckpt-p2d2-bf16/global_step5/bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt" ] ||
  fail "bf16 at P=2×D=2 writes one BF16_Optimizer file per (dp, pp)"

# 16-bit pipelines against the single process (16-bit sums round differently).
for precision in fp16 bf16; do
  run_ranks "$precision-1" 1 --deepspeed_config "$WORK/$precision.json" --"$precision" \
    --train-iters 10
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 1e-4 losses "$WORK" \
    "$precision-1" "p2d2-$precision-straight" || fail "$precision P=2×D=2 differs from one process"
done
pass "fp16 and bf16 at P=2×D=2 track the single process within 1e-4"

# overlap_comm on a pipeline (stages 0, 1; 2 reduces every micro-batch's pieces to their owners
# during its backward): each stage's last backward starts its DP all-reduce, the
# tied word embedding's after ReduceTiedGrads (upstream's order): the bits of the runs without.
sed 's/"stage": 0}/"stage": 0, "overlap_comm": true}/' "$WORK/z0.json" > "$WORK/z0-overlap.json"
sed 's/"stage": 0}/"stage": 0, "overlap_comm": true}/' "$WORK/bf16.json" > "$WORK/bf16-overlap.json"
sed 's/"stage": 1}/"stage": 1, "overlap_comm": true}/' "$WORK/z1.json" > "$WORK/z1-overlap.json"
sed 's/"stage": 2}/"stage": 2, "overlap_comm": true}/' "$WORK/z2.json" > "$WORK/z2-overlap.json"
run_ranks p2d2-overlap 4 --deepspeed_config "$WORK/z0-overlap.json" "${pp2[@]}" --train-iters 10 \
  --save "$WORK/ckpt-p2d2-overlap" --save-interval 10
run_ranks p2d2-bf16-overlap 4 --deepspeed_config "$WORK/bf16-overlap.json" "${pp2[@]}" --bf16 \
  --train-iters 10
for stage in 1 2; do
  run_ranks "p2d2-z$stage-overlap" 4 --deepspeed_config "$WORK/z$stage-overlap.json" "${pp2[@]}" \
    --train-iters 10
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 0 losses "$WORK" "t1p2d2z$stage" \
    "p2d2-z$stage-overlap" || fail "ZeRO-$stage P=2×D=2 with overlap_comm: losses differ"
done
for name in p2d2-overlap p2d2-bf16-overlap p2d2-z1-overlap; do
  grep -q "gradient all-reduce overlapped with the backward" "$WORK/$name.log" ||
    fail "$name does not say it overlaps"
done
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 0 losses "$WORK" t1p2d2z0 \
  p2d2-overlap || fail "P=2×D=2 with overlap_comm: losses differ"
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 0 losses "$WORK" \
  p2d2-bf16-straight p2d2-bf16-overlap || fail "bf16 P=2×D=2 with overlap_comm: losses differ"
for file in "$WORK"/ckpt-t1p2d2z0/global_step10/layer_*; do
  cmp -s "$file" "$WORK/ckpt-p2d2-overlap/global_step10/$(basename "$file")" ||
    fail "P=2×D=2 with overlap_comm: weights differ: $(basename "$file")"
done
grep -q "gradient reduce to the partitions' owners overlapped with the backward" \
  "$WORK/p2d2-z2-overlap.log" || fail "p2d2-z2-overlap does not say it overlaps"
pass "overlap_comm at P=2×D=2 (fp32 and bf16 at stage 0, fp32 at stages 1 and 2): bit for bit those without"

# A middle stage (P = 3 over 3 layers: stage 1 holds neither embedding nor head).
run_ranks l3-1 1 --deepspeed_config "$WORK/z0.json" --num-layers 3 --train-iters 10
run_ranks l3-p3 3 --deepspeed_config "$WORK/z0.json" --num-layers 3 \
  --pipeline-model-parallel-size 3 --train-iters 10
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" losses "$WORK" l3-1 l3-p3 ||
  fail "P=3 differs from the single process"
pass "P=3 (a stage without embedding or head) gives the single process's losses within 1e-5"
finish
