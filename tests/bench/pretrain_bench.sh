#!/usr/bin/env bash
# Training-step throughput of `pretrain` (fp32, CPU) next to the same GPT-2 model trained by
# PyTorch (tests/bench/pytorch_gpt_baseline.py) and OpenBLAS sgemm (tests/bench/sgemm_peak.cpp),
# all measured in this run with the same thread count.
#
# Our step time is pretrain's own per-iteration time (the metrics file's elapsed_s, the value its
# "elapsed time per iteration" log field averages), mean over the iterations after the warm-up ones.
# tokens/s = G·s / step time. GFLOP/s = the BigScience TFLOPs estimate of train/throughput.h
# (72·G·s·L·h²·(1 + s/6h + V/16Lh), no activation checkpointing) / step time — the number pretrain
# itself logs as "TFLOPs", ×1000. "of peak" divides that by the sgemm GFLOP/s of a large square.
#
# Usage: tests/bench/pretrain_bench.sh [BUILD_DIR]   (default build/release; needs its bin/pretrain,
#        bin/preprocess and bin/sgemm_peak)
# Environment: MDS_BENCH_CONFIGS (default "small gpt2-124m"), MDS_BENCH_THREADS (default "1 2"),
#              MDS_BENCH_ITERS_SMALL / MDS_BENCH_WARMUP_SMALL (default 8 / 3),
#              MDS_BENCH_ITERS_124M / MDS_BENCH_WARMUP_124M (default 3 / 1),
#              MDS_BENCH_SKIP_TORCH=1 (ours only), MDS_TORCH_PYTHON (default /usr/bin/python3),
#              MDS_BENCH_ENV: extra VAR=value words for every timed run, mds and PyTorch alike, e.g.
#              "OMP_WAIT_POLICY=passive OPENBLAS_THREAD_TIMEOUT=4" (see docs/performance.md).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
python="${MDS_TORCH_PYTHON:-/usr/bin/python3}"
configs="${MDS_BENCH_CONFIGS:-small gpt2-124m}"
threads_list="${MDS_BENCH_THREADS:-1 2}"
read -r -a extra_env <<< "${MDS_BENCH_ENV:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# name → L h heads s b G iters warmup
config_values() {
  case "$1" in
    small) echo 4 256 4 256 4 8 "${MDS_BENCH_ITERS_SMALL:-8}" "${MDS_BENCH_WARMUP_SMALL:-3}" ;;
    gpt2-124m) echo 12 768 12 1024 4 8 "${MDS_BENCH_ITERS_124M:-3}" "${MDS_BENCH_WARMUP_124M:-1}" ;;
    *) echo "unknown config $1 (small, gpt2-124m)" >&2; exit 2 ;;
  esac
}

source "$repo/tests/bench/bench_lib.sh"
make_shakespeare_dataset "$work"

# Mean elapsed_s of the train records after the first $2 iterations.
mean_elapsed() {  # metrics.jsonl warmup
  python3 - "$1" "$2" <<'PY'
import json, sys
times = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1]))
         if r.get("type") == "train" and r["iteration"] > int(sys.argv[2])]
assert times, "no timed iterations"
print(f"{sum(times) / len(times):.6f}")
PY
}

run_ours() {  # threads L h heads s b G iters warmup → mean step seconds
  local t=$1 L=$2 h=$3 n=$4 s=$5 b=$6 G=$7 iters=$8 warmup=$9 dir="$work/ours-$1-$2-$3"
  mkdir -p "$dir"
  cat > "$dir/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": $b, "train_batch_size": $G, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0}, "steps_per_print": 1000000, "wall_clock_breakdown": false }
JSON
  env "${extra_env[@]}" OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" "$build/bin/pretrain" \
    --num-layers "$L" --hidden-size "$h" --num-attention-heads "$n" --seq-length "$s" \
    --max-position-embeddings "$s" --micro-batch-size "$b" --global-batch-size "$G" \
    --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.01 \
    --clip-grad 1.0 --seed 1234 --split 100,0,0 --train-iters "$iters" --log-interval 1 \
    --eval-interval 1000000 --eval-iters 1 --data-path "$work/shakespeare_text_document" \
    "${tokenizer[@]}" --metrics-file "$dir/metrics.jsonl" \
    --deepspeed --deepspeed_config "$dir/ds.json" > "$dir/log" 2>&1 ||
    { tail -20 "$dir/log" >&2; exit 1; }
  mean_elapsed "$dir/metrics.jsonl" "$warmup"
}

run_torch() {  # threads L h heads s b G iters warmup → mean step seconds
  local out
  out="$(env "${extra_env[@]}" OMP_NUM_THREADS="$1" OPENBLAS_NUM_THREADS="$1" "$python" \
    "$repo/tests/bench/pytorch_gpt_baseline.py" \
    --threads "$1" --layers "$2" --hidden-size "$3" --heads "$4" --seq-length "$5" \
    --micro-batch-size "$6" --global-batch-size "$7" --iters "$8" --warmup "$9")"
  sed -n 's/^RESULT mean_step_s=\([0-9.]*\).*/\1/p' <<< "$out"
}

model_gflop() {  # L h s G V → GFLOP per iteration (train/throughput.h, checkpointing off)
  awk -v L="$1" -v h="$2" -v s="$3" -v G="$4" -v V="$5" \
    'BEGIN { printf "%.3f", 72 * G * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)) / 1e9 }'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "extra environment: ${MDS_BENCH_ENV:-(none)}; $("$python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch')"
rows=()
for config in $configs; do
  read -r L h n s b G iters warmup <<< "$(config_values "$config")"
  gflop=$(model_gflop "$L" "$h" "$s" "$G" 50304)
  bound_one_thread=""
  for t in $threads_list; do
    echo "== $config (L=$L h=$h heads=$n s=$s b=$b G=$G), $t thread(s): $iters iterations, first $warmup untimed" >&2
    sgemm="$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$build/bin/sgemm_peak" \
      --layers "$L" --hidden "$h" --heads "$n" --seq "$s" --micro-batch "$b" --global-batch "$G")"
    echo "$sgemm" >&2
    peak=$(sed -n 's/^PEAK gflops=//p' <<< "$sgemm")
    # pretrain runs OpenBLAS single-threaded inside each of its own threads (ops/cpu/gemm.h), so
    # its bound is the one-thread sgemm time of every shape divided by the threads: perfect scaling.
    if [ "$t" = 1 ]; then bound_one_thread=$(sed -n 's/^STEP .*gemm_bound_s=\([0-9.]*\).*/\1/p' <<< "$sgemm"); fi
    if [ -z "${bound_one_thread:-}" ]; then
      bound_one_thread=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$build/bin/sgemm_peak" \
        --layers "$L" --hidden "$h" --heads "$n" --seq "$s" --micro-batch "$b" --global-batch "$G" |
        sed -n 's/^STEP .*gemm_bound_s=\([0-9.]*\).*/\1/p')
    fi
    gemm_bound=$(awk -v b="$bound_one_thread" -v t="$t" 'BEGIN { printf "%.3f", b / t }')
    ours=$(run_ours "$t" "$L" "$h" "$n" "$s" "$b" "$G" "$iters" "$warmup")
    echo "pretrain: $ours s/step" >&2
    torch="-"
    if [ "${MDS_BENCH_SKIP_TORCH:-0}" != 1 ]; then
      torch=$(run_torch "$t" "$L" "$h" "$n" "$s" "$b" "$G" "$iters" "$warmup")
      echo "pytorch: $torch s/step" >&2
    fi
    rows+=("$(awk -v c="$config" -v t="$t" -v o="$ours" -v p="$torch" -v f="$gflop" -v pk="$peak" \
      -v gb="$gemm_bound" -v tok="$((G * s))" 'BEGIN {
        speed = (p == "-") ? "-" : sprintf("%.2f×", p / o)
        ptok = (p == "-") ? "-" : sprintf("%.0f", tok / p)
        printf "| %s | %d | %.3f | %.0f | %.1f | %.0f%% | %s | %s | %s | %.1f | %.3f |",
          c, t, o, tok / o, f / o, 100 * f / o / pk, (p == "-") ? "-" : sprintf("%.3f", p), ptok,
          speed, pk, gb }')")
  done
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| config | threads | mds s/step | mds tokens/s | mds GFLOP/s | of sgemm peak | PyTorch s/step | PyTorch tokens/s | mds speed-up | sgemm peak GFLOP/s | sgemm-bound s/step |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
