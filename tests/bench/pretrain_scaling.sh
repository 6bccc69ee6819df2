#!/usr/bin/env bash
# Multi-rank scaling of `pretrain` on this machine (CPU, MPI): time per iteration and the share of
# it rank 0 spends blocked in communication, for 1, 2, 4 and 8 ranks, data parallel only and with
# TP = 2, at the same global batch. A benchmark: it asserts nothing about time.
#
# Model: L = 4, h = 256, 4 heads, s = 256, GPT-2 vocabulary (50257, padded to 50304 at every TP),
# fp32, ZeRO 0, micro-batch 1, global batch 8 (8/D micro-batches per rank), one OpenMP thread per
# rank unless the row says otherwise. ms/iteration: mean over the iterations after the warm-up of
# G / "samples per second" from pretrain's log lines (--log-interval 1). Communication: the
# DeepSpeed config enables comms_logger, whose end-of-training summary (rank 0, every iteration
# including the warm-up) gives the seconds blocked in wait and the bytes rank 0 sent per iteration
# in each group (train/comms_report.h).
#
# Usage: tests/bench/pretrain_scaling.sh [BUILD_DIR]   (default build/release; needs bin/pretrain
#        and bin/preprocess)
# Environment: MDS_SCALING_RUNS: "ranks:tp:threads[:pp[:overlap]]" words (pp default 1; overlap
#              "o" sets zero_optimization.overlap_comm; default
#              "1:1:1 1:1:2 2:1:1 4:1:1 8:1:1 2:2:1 4:2:1 8:2:1"), MDS_SCALING_ITERS (default 20),
#              MDS_SCALING_WARMUP (default 5), MDS_SCALING_KEEP=DIR keeps every run's log there.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
runs="${MDS_SCALING_RUNS:-1:1:1 1:1:2 2:1:1 4:1:1 8:1:1 2:2:1 4:2:1 8:2:1}"
iters="${MDS_SCALING_ITERS:-20}"
warmup="${MDS_SCALING_WARMUP:-5}"
global_batch=8
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$repo/tests/bench/bench_lib.sh"
use_mpirun 600
make_shakespeare_dataset "$work"

cat > "$work/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": 1, "train_batch_size": $global_batch, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0}, "steps_per_print": 1000000, "wall_clock_breakdown": false,
  "comms_logger": {"enabled": true, "verbose": false, "prof_all": true, "debug": false} }
JSON
sed 's/"stage": 0}/"stage": 0, "overlap_comm": true}/' "$work/ds.json" > "$work/ds-overlap.json"
# --make-vocab-size-divisible-by 64: 50257 pads to 50304 at TP 1 and 2 alike (the same model).
flags=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256
       --max-position-embeddings 256 --micro-batch-size 1 --global-batch-size "$global_batch"
       --make-vocab-size-divisible-by 64 --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine
       --lr-warmup-iters 1 --weight-decay 0.01 --clip-grad 1.0 --seed 1234 --split 100,0,0
       --train-iters "$iters" --log-interval 1 --eval-interval 1000000 --eval-iters 1
       --data-path "$work/shakespeare_text_document" "${tokenizer[@]}"
       --deepspeed --deepspeed_config "$work/ds.json")

# One table row from a run's log: ms/iteration after the warm-up, and the comms_logger summary.
row() {  # log ranks tp threads pp overlap
  python3 - "$@" "$warmup" "$global_batch" <<'PY'
import re, sys
log, ranks, tp, threads, pp, overlap, warmup, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6] == "o", int(sys.argv[7]), int(sys.argv[8])
text = open(log).read()
times = [batch / float(sps) for it, sps in
         re.findall(r" iteration +(\d+)/ *\d+ \|.*? samples per second: ([0-9.]+) \|", text)
         if int(it) > warmup]
assert times, f"{log}: no iteration lines after the warm-up"
total = re.search(r"comms_logger total: ([0-9.]+) s blocked in communication, ([0-9.]+)% of ([0-9.]+) s", text)
assert total, f"{log}: no comms_logger summary"
header = re.search(r"comms_logger: world rank \d+ of \d+, (\d+) iterations", text)
iterations = int(header.group(1))
groups = []
for name, size, sent in re.findall(r"comms_logger group (\S+) \((\d+) ranks\): \d+ calls, (\d+) bytes sent per iteration", text):
    if int(sent) > 0:
        amount = f"{int(sent) / 2**20:.2f} MiB" if int(sent) >= 2**10 else f"{sent} B"
        groups.append(f"{name} ({size}): {amount}")
ms = 1000 * sum(times) / len(times)
comm_ms = 1000 * float(total.group(1)) / iterations
grid = f"TP={tp} × DP={ranks // (tp * pp)}" if pp == 1 else f"TP={tp} × PP={pp} × DP={ranks // (tp * pp)}"
grid += ", overlap_comm" if overlap else ""
print(f"| {ranks} | {grid} | {threads} | {ms:.0f} | {comm_ms:.0f} | {float(total.group(2)):.1f}% | {', '.join(groups) or '–'} |")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
  "$(mpirun --version | head -1); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
rows=()
for spec in $runs; do
  IFS=: read -r ranks tp threads pp overlap <<< "$spec"
  pp=${pp:-1}
  overlap=${overlap:-}
  log="$work/run-$ranks-$tp-$threads-$pp$overlap.log"
  config="$work/ds.json"
  [ "$overlap" != o ] || config="$work/ds-overlap.json"
  echo "== $ranks rank(s), TP=$tp, PP=$pp, $threads thread(s) per rank: $iters iterations" >&2
  launch=()
  [ "$ranks" = 1 ] || launch=(mpirun -np "$ranks")
  tp_flags=()
  [ "$tp" = 1 ] || tp_flags=(--tensor-model-parallel-size "$tp")
  [ "$pp" = 1 ] || tp_flags+=(--pipeline-model-parallel-size "$pp")
  start=$(date +%s)
  OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS=1 "${launch[@]}" "$build/bin/pretrain" \
    "${flags[@]}" "${tp_flags[@]}" --deepspeed_config "$config" > "$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
  echo "   $(( $(date +%s) - start )) s wall, $(grep -m1 'comms_logger total' "$log")" >&2
  if [ -n "${MDS_SCALING_KEEP:-}" ]; then mkdir -p "$MDS_SCALING_KEEP"; cp "$log" "$MDS_SCALING_KEEP/"; fi
  rows+=("$(row "$log" "$ranks" "$tp" "$threads" "$pp" "$overlap")")
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| ranks | grid | threads/rank | ms/iteration | comm ms/iteration | comm share | sent/iteration by rank 0, per group (ranks) |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | --- |"
printf '%s\n' "${rows[@]}"
