#!/usr/bin/env bash
# Peak resident memory of `pretrain` per parameter, on the CPU, for every precision and ZeRO stage
# (docs/performance.md, "pretrain memory per parameter"). A benchmark: it asserts nothing.
#
# Model: GPT-2 124M's shape (L = 12, h = 768, 12 heads, GPT-2 vocabulary padded to 50304:
# Ψ = 124,475,904 parameters) with a short sequence (s = 64, micro-batch 1, global batch 2 per
# rank: two micro-batches a step) so that activations weigh little next to the model state; two
# iterations, no evaluation, no checkpoint. Peak RSS is GNU time's "Maximum resident set size" of
# each rank (the largest rank is printed); bytes/param = peak RSS / Ψ, everything in the process
# included (code, libraries, the data set, activations, the optimizer).
#
# Usage: tests/bench/pretrain_memory_bench.sh [BUILD_DIR]   (default build/release; needs
#        bin/pretrain and bin/preprocess)
# Environment: MDS_MEMORY_RUNS: "precision:stage:ranks" words (default: fp32, bf16 and fp16 at
#              ZeRO 0 on one rank, fp32 and fp16 at ZeRO 1 and 2 on one rank, and the same at
#              two ranks), MDS_MEMORY_PRETRAIN: the pretrain binary (default BUILD_DIR/bin/pretrain).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
pretrain="${MDS_MEMORY_PRETRAIN:-$build/bin/pretrain}"
runs="${MDS_MEMORY_RUNS:-fp32:0:1 bf16:0:1 fp16:0:1 fp32:1:1 fp32:2:1 fp16:1:1 fp16:2:1 fp32:0:2 bf16:0:2 fp16:0:2 fp32:1:2 fp32:2:2 fp16:1:2 fp16:2:2}"
psi=124475904
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$repo/tests/bench/bench_lib.sh"
use_mpirun 600
export OMP_NUM_THREADS=1 MDS_DEVICE=cpu
make_shakespeare_dataset "$work"

echo "| precision | ZeRO stage | ranks | peak RSS (MiB, largest rank) | bytes/param |"
echo "| --- | ---: | ---: | ---: | ---: |"
for run in $runs; do
  IFS=: read -r precision stage ranks <<< "$run"
  precision_block="" precision_flag=()
  case "$precision" in
    bf16) precision_block='"bf16": {"enabled": true},' precision_flag=(--bf16) ;;
    fp16) precision_block='"fp16": {"enabled": true, "initial_scale_power": 12},'
          precision_flag=(--fp16) ;;
  esac
  global_batch=$((2 * ranks))
  cat > "$work/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": 1, "train_batch_size": $global_batch, "gradient_clipping": 1.0,
  $precision_block "zero_optimization": {"stage": $stage}, "steps_per_print": 1000000 }
JSON
  flags=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 64
         --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size "$global_batch"
         --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.01
         --clip-grad 1.0 --seed 1234 --split 100,0,0 --train-iters 2 --log-interval 1
         --eval-interval 1000000 --eval-iters 1 "${precision_flag[@]}"
         --data-path "$work/shakespeare_text_document" "${tokenizer[@]}"
         --deepspeed --deepspeed_config "$work/ds.json")
  rm -f "$work"/rss.*
  # Each rank under its own GNU time, writing its peak RSS (KiB) to rss.<rank>.
  timed=(sh -c '/usr/bin/time -f %M -o "$0/rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$work" "$pretrain"
         "${flags[@]}")
  launch=()
  [ "$ranks" = 1 ] || launch=(mpirun -np "$ranks")
  "${launch[@]}" "${timed[@]}" > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
  kib=$(cat "$work"/rss.* | sort -n | tail -1)
  python3 -c "import sys; kib, psi = int(sys.argv[1]), int(sys.argv[2]); \
print(f'| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {kib / 1024:.0f} | {kib * 1024 / psi:.1f} |')" \
    "$kib" "$psi" "$precision" "$stage" "$ranks"
done
