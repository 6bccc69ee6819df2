#!/usr/bin/env bash
# Where a GPT-2 bf16 training step's time goes on one GPU: Nsight Compute (ncu) times every
# kernel of a short `pretrain --device cuda --bf16` run (one micro-batch per step: 8 × 1024
# tokens at 124M, 4 at 350M, 2 at 1.5B, as tests/bench/gpu_train_bench.sh; upstream's dropouts),
# and tests/bench/kernel_profile_summary.py sums the last whole
# iteration's kernels by name. The same run without ncu gives the wall-clock step time; the gap
# between the two is host work, copies and synchronization (ncu counts kernels only). Kernels run
# serialized under ncu at the clocks the card has (--clock-control none, caches not flushed).
# A measurement, asserting nothing.
#
# Usage: tests/bench/gpu_profile.sh [BUILD_DIR]   (a CUDA build or the pack of
#        scripts/pack-gpu-build.sh). Environment: MDS_NCU (default: ncu on PATH, else the newest
#        under /opt/nvidia/nsight-compute or /usr/local/cuda/bin), MDS_PROFILE_ITERS (default 3),
#        MDS_PROFILE_CSV_OUT (where to keep ncu's CSV, xz-compressed), MDS_PROFILE_MODEL
#        (gpt2-124m, the default; gpt2-350m or gpt2-1.5b), MDS_PROFILE_FLAGS (more pretrain
#        flags, e.g. --cublaslt-epilogues).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
iters="${MDS_PROFILE_ITERS:-3}"
ncu="${MDS_NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2> /dev/null | tail -1 || true)}"
[ -n "$ncu" ] && [ -x "$ncu" ] || { echo "gpu_profile: no ncu found (set MDS_NCU)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$repo/tests/bench/bench_lib.sh"
make_shakespeare_dataset "$work"
case "${MDS_PROFILE_MODEL:-gpt2-124m}" in
  gpt2-124m) model=(--num-layers 12 --hidden-size 768 --num-attention-heads 12); micro=8 ;;
  gpt2-350m) model=(--num-layers 24 --hidden-size 1024 --num-attention-heads 16); micro=4 ;;
  gpt2-1.5b) model=(--num-layers 48 --hidden-size 1600 --num-attention-heads 25); micro=2 ;;
  *) echo "gpu_profile: MDS_PROFILE_MODEL: unknown model $MDS_PROFILE_MODEL" >&2; exit 2 ;;
esac
cat > "$work/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": $micro, "train_batch_size": $micro, "gradient_clipping": 1.0,
  "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}, "steps_per_print": 1000000 }
JSON
args() {  # iterations metrics-file → the pretrain flags, into the array `flags`
  flags=(--device cuda --bf16 "${model[@]}"
    --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size $micro --global-batch-size $micro
    --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.01
    --clip-grad 1.0 --seed 1234 --split 100,0,0 --train-iters "$1" --log-interval 1
    --eval-interval 1000000 --eval-iters 1 --data-path "$work/shakespeare_text_document"
    "${tokenizer[@]}" --metrics-file "$2" --deepspeed --deepspeed_config "$work/ds.json")
  # shellcheck disable=SC2206  # the extra flags are words
  flags+=(${MDS_PROFILE_FLAGS:-})
}
args 8 "$work/plain.jsonl"
"$build/bin/pretrain" "${flags[@]}" > "$work/plain.log" 2>&1 || { tail -20 "$work/plain.log" >&2; exit 1; }
step_ms=$(python3 - "$work/plain.jsonl" <<'PY'
import json, sys
times = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1]))
         if r.get("type") == "train" and r["iteration"] > 3]
print(f"{1000 * sum(times) / len(times):.2f}")
PY
)
echo "without ncu: ${step_ms} ms per step (iterations 4-8, one micro-batch of $micro x 1024 tokens, ${MDS_PROFILE_MODEL:-gpt2-124m})"
args "$iters" "$work/ncu.jsonl"
"$ncu" --metrics gpu__time_duration.sum --csv --page raw --clock-control none \
  --cache-control none --log-file "$work/ncu.csv" "$build/bin/pretrain" "${flags[@]}" \
  > "$work/ncu-run.log" 2>&1 || { tail -n 20 "$work/ncu-run.log" "$work/ncu.csv" >&2; exit 1; }
[ -z "${MDS_PROFILE_CSV_OUT:-}" ] || xz -c "$work/ncu.csv" > "$MDS_PROFILE_CSV_OUT"
python3 "$repo/tests/bench/kernel_profile_summary.py" "$work/ncu.csv" --step-ms "$step_ms"
