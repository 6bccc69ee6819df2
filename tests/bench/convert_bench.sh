#!/usr/bin/env bash
# convert-to-universal-checkpoint throughput and peak memory on a GPT-2 350M checkpoint written by
# 8 ranks (TP = 4 × PP = 2, bf16 with BF16_Optimizer: the BLOOM-style layout upstream's converter
# was written for), next to baselines measured in the same run on the same files:
#   - the I/O floor: cat of every input file (page cache), and cp -r of the checkpoint folder;
#   - upstream tools/convert_checkpoint/ds_to_universal.py, when MDS_UPSTREAM_DIR names a
#     Megatron-DeepSpeed checkout and MDS_BENCH_PYTHON a python with torch, tqdm and deepspeed
#     (0.8.3 from PyPI works with DS_BUILD_OPS=0; not a dependency of mds).
# GB/s = bytes of the input checkpoint folder (layer, mp_rank and ZeRO files) / wall seconds. Peak
# memory: maximum resident set of the process tree's largest process (GNU time's "Maximum resident
# set size", which counts the pages of memory-mapped input files a process touched; for upstream,
# whose workers are separate processes, that of the largest one). Disk: the most bytes the
# converter's output folder (with its scratch files) held, sampled every second.
# A benchmark: it asserts nothing about time.
#
# Usage: tests/bench/convert_bench.sh [BUILD_DIR]   (default build/release; needs bin/pretrain,
#        bin/preprocess and bin/convert-to-universal-checkpoint, mpirun, /usr/bin/time)
# Environment: MDS_CONVERT_WORKERS and MDS_CONVERT_MERGE_WORKERS (extract and merge workers for
#              both converters; default 4 and 2, upstream's defaults), MDS_CONVERT_LAYERS (default 24: GPT-2 350M), MDS_BENCH_KEEP=DIR
#              keeps the checkpoint and outputs there.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
extract_workers="${MDS_CONVERT_WORKERS:-4}"
merge_workers="${MDS_CONVERT_MERGE_WORKERS:-2}"
layers="${MDS_CONVERT_LAYERS:-24}"
read -r tp pp dp <<< "${MDS_CONVERT_GRID:-4 2 1}"
ranks=$((tp * pp * dp))
if [ -n "${MDS_BENCH_KEEP:-}" ]; then
  work="$MDS_BENCH_KEEP"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
source "$repo/tests/bench/bench_lib.sh"
use_mpirun 1200
make_shakespeare_dataset "$work"
cat > "$work/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": 1, "train_batch_size": $((2 * dp)), "gradient_clipping": 1.0,
  "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}, "steps_per_print": 1000000 }
JSON
# GPT-2 350M's shape; a short sequence (the positions table keeps 1024 rows) keeps the one training
# step that gives the optimizer state its moments cheap on a CPU.
grid="T$tp × P$pp × D$dp"
echo "== writing the checkpoint: $layers layers × 1024 hidden, $ranks ranks ($grid, bf16)" >&2
mpirun -np "$ranks" "$build/bin/pretrain" --num-layers "$layers" --hidden-size 1024 \
  --num-attention-heads 16 --seq-length 64 --max-position-embeddings 1024 --micro-batch-size 1 \
  --global-batch-size $((2 * dp)) --lr 1e-4 --train-iters 1 --log-interval 1 --eval-interval 1000 \
  --eval-iters 0 --split 100,0,0 --bf16 --tensor-model-parallel-size "$tp" \
  --pipeline-model-parallel-size "$pp" --data-path "$work/shakespeare_text_document" "${tokenizer[@]}" \
  --deepspeed --deepspeed_config "$work/ds.json" --save "$work/ckpt" --save-interval 1 \
  > "$work/pretrain.log" 2>&1 || { tail -20 "$work/pretrain.log"; exit 1; }
input="$work/ckpt/global_step1"
bytes=$(du -sb "$input" | cut -f1)
files=$(find "$input" -type f | wc -l)

# seconds and peak RSS (MiB) of one command, from GNU time.
measure() {  # log command...
  local log=$1; shift
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" > "$log" 2>&1 || { tail -5 "$log"; return 1; }
  read -r seconds kib < "$log.time"
  echo "$seconds $((kib / 1024))"
}
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.2f", b / 1e9 / s }'; }
row() {  # what seconds mib
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$(rate "$2")" "$3"
}

cat_all() { find "$input" -type f -exec cat {} + > /dev/null; }
cat_all  # warm the page cache for every reader alike
read -r cat_s cat_mib < <(measure "$work/cat" bash -c "$(declare -f cat_all); input=$input; cat_all")
read -r cp_s cp_mib < <(measure "$work/cp" cp -r "$input" "$work/copy")
rm -rf "$work/copy"
# Runs a converter writing into <out>, in its own session, under GNU time, sampling the disk use
# of <out> every second; stops it once that passes MDS_SCRATCH_LIMIT_GB (default 30). Sets
# run_rc, run_seconds, run_mib (peak RSS) and run_disk_gb (peak bytes under <out>).
run_watched() {  # log out command...
  local log=$1 out=$2; shift 2
  local limit=$(( ${MDS_SCRATCH_LIMIT_GB:-30} * 1000000000 )) peak=0 used pid
  setsid /usr/bin/time -f "%e %M" -o "$log.time" "$@" > "$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2> /dev/null; do
    sleep 1
    used=$(du -sb "$out" 2> /dev/null | cut -f1) || used=0
    [ "${used:-0}" -le "$peak" ] || peak=$used
    if [ "${used:-0}" -gt "$limit" ]; then
      kill -- -"$pid" 2> /dev/null || true
      echo "stopped by the benchmark: more than ${MDS_SCRATCH_LIMIT_GB:-30} GB on disk" >> "$log"
      break
    fi
  done
  run_rc=0
  wait "$pid" || run_rc=$?
  run_disk_gb=$(awk -v b="$peak" 'BEGIN { printf "%.1f", b / 1e9 }')
  run_seconds=""; run_mib=""
  if [ "$run_rc" = 0 ]; then
    read -r run_seconds kib < "$log.time"
    run_mib=$((kib / 1024))
  fi
}
result_row() {  # what log
  if [ "$run_rc" = 0 ]; then
    row "$1; $run_disk_gb GB on disk at the peak" "$run_seconds" "$run_mib"
  else
    echo "| $1 | failed after writing $run_disk_gb GB: $(grep -v 'it/s' "$2" | tail -1 | cut -c1-110) | | |"
  fi
}

run_watched "$work/ours" "$work/ours-out" "$build/bin/convert-to-universal-checkpoint" \
  --input_folder "$input" --output_folder "$work/ours-out/global_step1_universal" \
  --num_extract_workers "$extract_workers" --num_merge_workers "$merge_workers"
ours_row="$(result_row "mds convert-to-universal-checkpoint" "$work/ours")"
out_bytes=$(du -sb "$work/ours-out" | cut -f1)

# Upstream's extraction saves each fragment as a narrow() view, and torch.save writes a view's whole
# storage: every fragment file holds its group's entire flat partition, so its scratch grows as
# fragments × partition size; the disk limit above stops it.
upstream_row=""
if [ -n "${MDS_UPSTREAM_DIR:-}" ]; then
  python="${MDS_BENCH_PYTHON:-python3}"
  # Unpickling the saved args imports megatron, which imports transformers at module level:
  # the shim stands in for it (the real deepspeed must stay importable).
  mkdir -p "$work/shims"
  ln -sfn "$repo/tests/bench/upstream_shims/transformers" "$work/shims/transformers"
  cp "$repo/tests/bench/upstream_shims/sitecustomize.py" "$work/shims/"
  version="$("$python" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null || echo '?')"
  # GNU time reports the largest single process: the pool's workers are forked children, so this
  # is the main process or one worker, whichever peaked higher.
  run_watched "$work/upstream" "$work/upstream-out" env PYTHONPATH="$work/shims" "$python" \
    "$MDS_UPSTREAM_DIR/tools/convert_checkpoint/ds_to_universal.py" --input_folder "$input" \
    --output_folder "$work/upstream-out/global_step1_universal" \
    --num_extract_workers "$extract_workers" --num_merge_workers "$merge_workers"
  upstream_row="$(result_row "upstream ds_to_universal.py (deepspeed $version)" "$work/upstream")"
  rm -rf "$work/upstream-out"
fi

echo "checkpoint: $files files, $(awk -v b="$bytes" 'BEGIN { printf "%.2f", b / 1e9 }') GB" \
  "($layers layers, h 1024, $grid, bf16 weights + fp32 optimizer state);" \
  "universal output: $(awk -v b="$out_bytes" 'BEGIN { printf "%.2f", b / 1e9 }') GB"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ { print $2 }') GiB;" \
  "workers: $extract_workers extract, $merge_workers merge"
echo
echo "| what | seconds | GB/s of input | peak RSS (MiB) |"
echo "| --- | --- | --- | --- |"
row "cat of every input file (page cache)" "$cat_s" "$cat_mib"
row "cp -r of the checkpoint folder" "$cp_s" "$cp_mib"
echo "$ours_row"
[ -z "$upstream_row" ] || echo "$upstream_row"
