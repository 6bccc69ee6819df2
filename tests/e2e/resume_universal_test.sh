#!/usr/bin/env bash
# Resume on any grid through a universal checkpoint (issue 7): train 5 steps at grid A, save,
# convert-to-universal-checkpoint, resume at grid B with --universal-checkpoint; steps 6-10 give
# the uninterrupted run at A's losses within 1e-5 relative (fp32, dropout off). Pairs cover TP 2→1,
# PP 2→1, DP 4→2, DP 2→4, ZeRO 1→2, 2→1, 1→0 and 2→0, and TP 1→4 with a larger padded vocabulary.
# A run at B that saves right after loading, converted again, gives the first conversion's fp32
# masters, Adam moments and step exactly.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"
convert="$MDS_BIN/convert-to-universal-checkpoint"

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
       --make-vocab-size-divisible-by 64 --attention-dropout 0 --hidden-dropout 0
       --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}" --deepspeed --train-iters 10)

grid() {  # T P D stage -> pretrain flags and rank count in $grid_flags / $grid_ranks
  grid_flags=(--tensor-model-parallel-size "$1" --pipeline-model-parallel-size "$2"
              --deepspeed_config "$WORK/z$4.json")
  grid_ranks=$(($1 * $2 * $3))
}

# pair NAME "T P D stage" "T' P' D' stage'"
pair() {
  local name=$1
  grid $2
  run_ranks "$name-straight" "$grid_ranks" "${grid_flags[@]}"
  run_ranks "$name-half" "$grid_ranks" "${grid_flags[@]}" --exit-interval 5 \
    --save "$WORK/$name-ckpt" --save-interval 100
  "$convert" --input_folder "$WORK/$name-ckpt/global_step5" \
    --output_folder "$WORK/$name-universal/global_step5_universal" > "$WORK/$name-convert.log" 2>&1 ||
    { cat "$WORK/$name-convert.log"; fail "$name: convert-to-universal-checkpoint"; }
  grid $3
  run_ranks "$name-rest" "$grid_ranks" "${grid_flags[@]}" --load "$WORK/$name-universal" \
    --universal-checkpoint
  "$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 1e-5 steps "$WORK" \
    "$name-straight" "$name-rest" || fail "$name: the resumed run differs"
  pass "$name ($2 → $3): steps 6-10 after the universal resume equal the uninterrupted run"
}
pair tp2to1 "2 1 1 1" "1 1 1 1"

# DeepSpeed's v0.2 converter keeps Adam's step in each parameter's step.pt (torch's Adam: a
# float32 scalar tensor) where the optimizer keeps it per state rather than in param_groups: the
# same folder rewritten that way resumes to the same steps 6-10.
cp -r "$WORK/tp2to1-universal" "$WORK/v02-universal"
"$MDS_PYTHON" - "$WORK/v02-universal/global_step5_universal/zero" "$REPO/tests/e2e" <<'PY' ||
import pathlib, sys, torch
sys.path.insert(0, sys.argv[2])
from checkpoint_objects import load
zero = pathlib.Path(sys.argv[1])
state = load(zero / "optimizer_state.pt")
step = state["param_groups"][0]["step"]
for group in state["param_groups"]:
    del group["step"]
torch.save(state, zero / "optimizer_state.pt")
for folder in zero.iterdir():
    if folder.is_dir():
        torch.save(torch.tensor(float(step)), folder / "step.pt")
assert step == 6, step  # 5 updates after the construction-time step (training.md §4)
PY
  fail "rewriting the universal checkpoint v0.2-style"
grid 1 1 1 1
run_ranks v02-rest "$grid_ranks" "${grid_flags[@]}" --load "$WORK/v02-universal" --universal-checkpoint
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 1e-5 steps "$WORK" \
  tp2to1-straight v02-rest || fail "v0.2-style step.pt: the resumed run differs"
pass "Adam's step from v0.2-style step.pt files (optimizer_state.pt without it): the same steps 6-10"
pair pp2to1-zero1to2 "1 2 1 1" "1 1 2 2"
pair dp4to2-zero1to0 "1 1 4 1" "1 1 2 0"
pair dp2to4-zero2to1 "1 1 2 2" "1 1 4 1"
pair grid8-zero2to0 "2 2 2 2" "1 2 1 0"

# A larger padded vocabulary: at T = 4 the 50257 tokens pad to 50432 rows instead of T = 1's
# 50304. Resumed at T = 4, the run equals a T = 1 resume padded to the same 50432 rows
# (--pad-vocab-size-to); saved at once and converted again, the word embedding's first 50304 rows
# of fp32, exp_avg and exp_avg_sq are the source's and the 128 new rows are zero.
grid 1 1 1 1
run_ranks grow-half "$grid_ranks" "${grid_flags[@]}" --exit-interval 5 --save "$WORK/grow-ckpt" \
  --save-interval 100
"$convert" --input_folder "$WORK/grow-ckpt/global_step5" \
  --output_folder "$WORK/grow-universal/global_step5_universal" > "$WORK/grow-convert.log" 2>&1 ||
  { cat "$WORK/grow-convert.log"; fail "grow: convert-to-universal-checkpoint"; }
run_ranks grow-t1 "$grid_ranks" "${grid_flags[@]}" --pad-vocab-size-to 50432 \
  --load "$WORK/grow-universal" --universal-checkpoint
grid 4 1 1 1
run_ranks grow-t4 "$grid_ranks" "${grid_flags[@]}" --load "$WORK/grow-universal" \
  --universal-checkpoint
grep -q "padded vocab (size: 50257) with 175 dummy tokens (new size: 50432)" "$WORK/grow-t4.log" ||
  fail "grow: the T=4 run does not pad to 50432 rows: $(grep -i 'padded vocab' "$WORK/grow-t4.log")"
"$MDS_PYTHON" "$REPO/tests/e2e/compare_metrics.py" --tolerance 1e-5 steps "$WORK" grow-t1 grow-t4 ||
  fail "grow: the T=4 resume differs from the T=1 resume padded to 50432 rows"
pass "universal T=1 (50304 rows) → T=4 (50432 rows): steps 6-10 equal a T=1 resume padded alike"
# Without --universal-checkpoint a folder holding only latest_universal loads nothing (upstream's
# warning, and a run from the initial weights); mds's warning says how to load it.
run_ranks grow-forgot "$grid_ranks" "${grid_flags[@]}" --load "$WORK/grow-universal" --exit-interval 1
cat "$WORK/grow-forgot.log" "$WORK/grow-forgot.err" | grep -qF \
  "$WORK/grow-universal/latest_universal exists: give --universal-checkpoint to load it" ||
  fail "no hint at --universal-checkpoint: $(grep -i metadata "$WORK/grow-forgot.log" "$WORK/grow-forgot.err")"
pass "a universal-only folder without --universal-checkpoint: the warning names the flag"
run_ranks grow-reload "$grid_ranks" "${grid_flags[@]}" --train-iters 5 --override-lr-scheduler \
  --load "$WORK/grow-universal" --universal-checkpoint --save "$WORK/grow-reload" --save-interval 100
"$convert" --input_folder "$WORK/grow-reload/global_step5" \
  --output_folder "$WORK/grow-again/global_step5_universal" > "$WORK/grow-again.log" 2>&1 ||
  { cat "$WORK/grow-again.log"; fail "grow: converting the T=4 checkpoint"; }
"$MDS_PYTHON" "$REPO/tests/e2e/compare_universal.py" --grown-rows 50304 \
  "$WORK/grow-universal/global_step5_universal/zero" "$WORK/grow-again/global_step5_universal/zero" ||
  fail "grow: the grown state is not the source's"
pass "the T=4 state holds the source's fp32, moments and rows exactly, the new rows zero"

# evaluate reads the universal checkpoint's fp32 weights: the same perplexity as the DeepSpeed
# checkpoint it was converted from.
head -c 4000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate() {  # name load-dir extra...
  local name=$1 load=$2; shift 2
  OMP_NUM_THREADS=1 "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" \
    --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --overlapping-eval 16 "${gpt2_flags[@]}" \
    --make-vocab-size-divisible-by 64 --load "$load" --results-file "$WORK/$name.json" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "evaluate $name"; }
}
evaluate eval-deepspeed "$WORK/tp2to1-ckpt"
evaluate eval-universal "$WORK/tp2to1-universal" --universal-checkpoint
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate of the universal checkpoint differs"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
a, b = (json.loads((work / f"eval-{n}.json").read_text()) for n in ("deepspeed", "universal"))
for key in ("avg_loss", "ppl", "adjusted_ppl"):
    if key in a:
        assert abs(a[key] - b[key]) <= 1e-6 * abs(a[key]), (key, a[key], b[key])
print("evaluate DeepSpeed vs universal:", {k: (a[k], b[k]) for k in a if isinstance(a[k], float)})
PY
pass "evaluate loads the universal checkpoint: the perplexity of the checkpoint it came from"

# Exact restoration: load at B, save at once (iteration 5), convert again, compare the files.
grid 1 1 2 2
run_ranks reload "$grid_ranks" "${grid_flags[@]}" --train-iters 5 --override-lr-scheduler \
  --load "$WORK/pp2to1-zero1to2-universal" --universal-checkpoint --save "$WORK/reload-ckpt" \
  --save-interval 100
"$convert" --input_folder "$WORK/reload-ckpt/global_step5" \
  --output_folder "$WORK/reload-universal/global_step5_universal" > "$WORK/reload-convert.log" 2>&1 ||
  { cat "$WORK/reload-convert.log"; fail "converting the reloaded checkpoint"; }
"$MDS_PYTHON" "$REPO/tests/e2e/compare_universal.py" \
  "$WORK/pp2to1-zero1to2-universal/global_step5_universal/zero" \
  "$WORK/reload-universal/global_step5_universal/zero" ||
  fail "the universal state did not come back exactly"
pass "fp32 masters, Adam moments and step survive universal → D=2 ZeRO 2 → universal exactly"
finish
