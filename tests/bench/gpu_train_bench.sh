#!/usr/bin/env bash
# GPT-2 training throughput on one GPU (issue 5): `pretrain --device cuda` next to the PyTorch
# GPT-2 of the same shape (tests/bench/pytorch_gpt_baseline.py) measured in the same run on the
# same device: eager fp32, and the fast recipe (bf16 autocast, scaled_dot_product_attention,
# torch.compile, fused AdamW). tokens/s = G·s / mean step time after the warm-up steps;
# MFU = tokens/s × (6·N + 12·L·h·s) / the device's dense peak for the precision the run computes
# in (N = parameters, embeddings included; the attention term counts the causal half too, as
# llm.c and nanoGPT do). A benchmark: it asserts nothing about time.
#
# mds runs twice: fp32 (MFU against the fp32 peak, TF32 off) and bf16 (BF16_Optimizer with 16-bit
# activations and GEMMs on the device; MFU against the bf16 peak), as PyTorch's rows.
#
# Usage: tests/bench/gpu_train_bench.sh [BUILD_DIR]   (default build/release, a CUDA build: the
#        pack of scripts/pack-gpu-build.sh on a machine without our Debian libraries)
# Environment: MDS_GPU_BENCH_CONFIGS (default "gpt2-124m gpt2-350m gpt2-1.5b"; "tiny" for a smoke
#              run; NAME@B runs NAME with micro-batches of B, the global batch unchanged),
#              MDS_GPU_BENCH_ITERS / MDS_GPU_BENCH_WARMUP (default 12 / 4),
#              MDS_GPU_BENCH_RUNS (default "mds-fp32 mds-bf16 torch-eager torch-fast": the rows
#              measured for each config; mds-bf16-fixed is mds-bf16 with --fixed-kernel-shapes
#              (the default launch shapes, none timed; the picks of the others are printed),
#              mds-bf16-epilogues is mds-bf16 with
#              --cublaslt-epilogues, mds-bf16-tuned mds-bf16 with --gemm-tuning-file (a fresh
#              file: the GEMMs are timed in the first, untimed iteration), mds-tf32 mds-fp32 with
#              --tf32, its MFU against the TF32 peak; mds-bf16-nodrop and torch-fast-nodrop are
#              mds-bf16 and torch-fast without dropout, as llm.c trains; llmc is llm.c's
#              train_gpt2cu, bf16, which has no dropout: see MDS_LLMC_BIN),
#              MDS_LLMC_BIN (llm.c's train_gpt2cu for the llmc run, built from an llm.c checkout by
#              tests/bench/build_llmc.sh; it trains llm.c's own GPT-2 of the config's depth, "d12"
#              for gpt2-124m, from random weights on the same Shakespeare tokens),
#              MDS_TORCH_PYTHON (python with torch >= 2.0 and CUDA; default python3),
#              MDS_BENCH_DEVICE (default cuda; cpu runs the same commands on the host, to check the
#              script where there is no GPU), MDS_PEAK_TFLOPS_BF16 / _TF32 / _FP32 (when the
#              device is not in the table below).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
python="${MDS_TORCH_PYTHON:-python3}"
configs="${MDS_GPU_BENCH_CONFIGS:-gpt2-124m gpt2-350m gpt2-1.5b}"
iters="${MDS_GPU_BENCH_ITERS:-12}"
warmup="${MDS_GPU_BENCH_WARMUP:-4}"
runs="${MDS_GPU_BENCH_RUNS:-mds-fp32 mds-bf16 torch-eager torch-fast}"
for run in $runs; do
  case $run in
    mds-fp32 | mds-tf32 | mds-bf16 | mds-bf16-fixed | mds-bf16-epilogues | mds-bf16-tuned | \
      mds-bf16-nodrop | torch-eager | torch-fast | torch-fast-nodrop | llmc) ;;
    *) echo "gpu_train_bench: MDS_GPU_BENCH_RUNS: unknown run '$run' (mds-fp32, mds-tf32, mds-bf16, mds-bf16-fixed, mds-bf16-epilogues, mds-bf16-tuned, mds-bf16-nodrop, torch-eager, torch-fast, torch-fast-nodrop, llmc)" >&2
       exit 2 ;;
  esac
done
device="${MDS_BENCH_DEVICE:-cuda}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$repo/tests/bench/bench_lib.sh"
make_shakespeare_dataset "$work"

# name[@b] → L h heads s b G (micro-batches of b, G per step)
config_values() {
  local values
  values="$(named_config_values "${1%@*}")" || return 1
  if [[ "$1" == *@* ]]; then
    local b="${1##*@}" G="${values##* }" L h heads s
    if ! [[ "$b" =~ ^[1-9][0-9]*$ ]] || ((G % b != 0)); then
      echo "config $1: the micro-batch must divide the global batch $G" >&2; return 1
    fi
    read -r L h heads s _ _ <<< "$values"
    values="$L $h $heads $s $b $G"
  fi
  echo "$values"
}

named_config_values() {
  case "$1" in
    tiny) echo 2 64 4 64 2 4 ;;
    gpt2-124m) echo 12 768 12 1024 8 32 ;;
    gpt2-350m) echo 24 1024 16 1024 4 32 ;;
    gpt2-1.5b) echo 48 1600 25 1024 2 32 ;;
    *) echo "unknown config $1 (tiny, gpt2-124m, gpt2-350m, gpt2-1.5b)" >&2; exit 2 ;;
  esac
}

for config in $configs; do config_values "$config" > /dev/null || exit 2; done

device_name() {
  if [ "$device" = cpu ]; then grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'
  else nvidia-smi --query-gpu=name --format=csv,noheader | head -1; fi
}
# Dense tensor-core peaks (TFLOP/s) from the vendors' data sheets: bf16, TF32, and fp32 without
# TF32.
peak_tflops() {  # precision (bf16|tf32|fp32)
  local name; name="$(device_name)"
  local env_peak="MDS_PEAK_TFLOPS_${1^^}"
  if [ -n "${!env_peak:-}" ]; then echo "${!env_peak}"; return; fi
  case "$name:$1" in
    *H100*SXM*:bf16 | *H100*HBM3*:bf16 | *H200*:bf16) echo 989 ;;
    *H100*SXM*:fp32 | *H100*HBM3*:fp32 | *H200*:fp32) echo 67 ;;
    *H100*SXM*:tf32 | *H100*HBM3*:tf32 | *H200*:tf32) echo 494 ;;
    *H100*PCIe*:tf32) echo 378 ;;
    *A100*:tf32) echo 156 ;;
    *H100*PCIe*:bf16) echo 756 ;;
    *H100*PCIe*:fp32) echo 51 ;;
    *A100*:bf16) echo 312 ;;
    *A100*:fp32) echo 19.5 ;;
    *) echo "" ;;
  esac
}

flop_per_token() {  # L h s V → 6·N + 12·L·h·s
  awk -v L="$1" -v h="$2" -v s="$3" -v V="$4" 'BEGIN {
    n = V * h + s * h + L * (12 * h * h + 13 * h) + 2 * h
    printf "%.0f", 6 * n + 12 * L * h * s }'
}

mean_elapsed() {  # metrics.jsonl warmup → mean seconds per step after the warm-up
  python3 - "$1" "$2" <<'PY'
import json, sys
times = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1]))
         if r.get("type") == "train" and r["iteration"] > int(sys.argv[2])]
assert times, "no timed iterations"
print(f"{sum(times) / len(times):.6f}")
PY
}

run_ours() {  # L h heads s b G precision(fp32|bf16) [pretrain flags...] → mean step seconds
  local dir="$work/ours-$1-$2-$5-$7${8:+-$(md5sum <<< "${*:8}" | cut -c1-8)}"  # extra flags apart
  mkdir -p "$dir"
  cat > "$dir/ds.json" <<JSON
{ "train_micro_batch_size_per_gpu": $5, "train_batch_size": $6, "gradient_clipping": 1.0,
  "bf16": {"enabled": $([ "$7" = bf16 ] && echo true || echo false)},
  "zero_optimization": {"stage": 0}, "steps_per_print": 1000000, "wall_clock_breakdown": false }
JSON
  local precision=()
  [ "$7" = bf16 ] && precision=(--bf16)
  "$build/bin/pretrain" --device "$device" "${precision[@]}" --num-layers "$1" --hidden-size "$2" \
    --num-attention-heads "$3" --seq-length "$4" --max-position-embeddings "$4" \
    --micro-batch-size "$5" --global-batch-size "$6" --lr 1e-4 --min-lr 1e-5 \
    --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.01 --clip-grad 1.0 --seed 1234 \
    --split 100,0,0 --train-iters "$iters" --log-interval 1 --eval-interval 1000000 \
    --eval-iters 1 --data-path "$work/shakespeare_text_document" "${tokenizer[@]}" \
    --metrics-file "$dir/metrics.jsonl" --deepspeed --deepspeed_config "$dir/ds.json" "${@:8}" \
    > "$dir/log" 2>&1 || { tail -20 "$dir/log" >&2; return 1; }
  # The launch shapes its kernels picked by timing in the first iteration (none when fixed).
  sed -n 's/^ *> kernel shape picked by timing, /  picked: /p' "$dir/log" >&2
  mean_elapsed "$dir/metrics.jsonl" "$warmup"
}

run_torch() {  # L h heads s b G extra-flags... → mean step seconds
  local out
  out="$("$python" "$repo/tests/bench/pytorch_gpt_baseline.py" --device "$device" \
    --layers "$1" --hidden-size "$2" --heads "$3" --seq-length "$4" --micro-batch-size "$5" \
    --global-batch-size "$6" --iters "$iters" --warmup "$warmup" --threads "$(nproc)" \
    "${@:7}" 2>&1)" || { tail -5 <<< "$out" >&2; return 1; }
  sed -n 's/^RESULT mean_step_s=\([0-9.]*\).*/\1/p' <<< "$out"
}

# llm.c's token file: a header of 256 int32 (magic 20240520, version 1, token count), then the
# tokens as uint16: the Megatron .bin's tokens as they are (preprocess writes uint16 ids below
# 65500; wider ones are narrowed, all GPT-2 ids fit).
make_llmc_tokens() {  # megatron-prefix out-file
  python3 - "$1" "$2" <<'PY'
import array, os, struct, sys
prefix, out = sys.argv[1], sys.argv[2]
assert sys.byteorder == "little", "llm.c's token files are little-endian, as this machine is not"
with open(prefix + ".idx", "rb") as idx:
    header = idx.read(18)
assert header[:9] == b"MMIDIDX\x00\x00", prefix + ".idx: not a Megatron index"
tokens = array.array({8: "H", 4: "i", 5: "q"}[header[17]], open(prefix + ".bin", "rb").read())
assert tokens and max(tokens) < 65536, "ids do not fit llm.c's uint16 tokens"
with open(out + ".tmp", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(array.array("H", tokens).tobytes())
os.replace(out + ".tmp", out)
PY
}

# Puts the folders of libraries llm.c's program needs but the loader does not find (cuDNN, where
# only a Python wheel brings it, as PyTorch's does) on LD_LIBRARY_PATH.
find_llmc_libraries() {
  local missing lib dir
  missing=$(ldd "$MDS_LLMC_BIN" 2> /dev/null | sed -n 's/^\s*\(\S*\) => not found/\1/p')
  for lib in $missing; do
    dir=$("$python" -c 'import site, sys; print("\n".join(site.getsitepackages()))' 2> /dev/null |
      xargs -r -I{} find {} -name "$lib" -print -quit 2> /dev/null | head -1)
    [ -n "$dir" ] && export LD_LIBRARY_PATH="$(dirname "$dir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  missing=$(ldd "$MDS_LLMC_BIN" 2> /dev/null | sed -n 's/^\s*\(\S*\) => not found/\1/p')
  [ -z "$missing" ] || { echo "llmc: libraries not found: $missing" >&2; return 1; }
}

# llm.c builds GPT-2 of depth 12, 24, 36 or 48 ("dL") with its own widths: only those shapes.
llmc_depth_matches() {  # L h heads
  case "$1:$2:$3" in
    12:768:12 | 24:1024:16 | 36:1280:20 | 48:1600:25) return 0 ;;
    *) echo "llmc: llm.c has no GPT-2 of $1 layers, hidden $2, $3 heads" >&2; return 1 ;;
  esac
}

run_llmc() {  # L h heads s b G → mean step seconds (llm.c's own per-step timing)
  [ -n "${MDS_LLMC_BIN:-}" ] ||
    { echo "llmc: set MDS_LLMC_BIN to llm.c's train_gpt2cu (tests/bench/build_llmc.sh)" >&2; return 1; }
  [ "$device" = cuda ] || { echo "llmc: llm.c's train_gpt2cu runs on CUDA only" >&2; return 1; }
  llmc_depth_matches "$1" "$2" "$3" || return 1
  find_llmc_libraries || return 1
  local dir="$work/llmc-$1-$5"
  mkdir -p "$dir"
  [ -f "$work/llmc_tokens.bin" ] ||
    make_llmc_tokens "$work/shakespeare_text_document" "$work/llmc_tokens.bin" || return 1
  # One validation batch at the start and end (outside llm.c's timed section), no sampling, no
  # checkpoints; learning-rate and weight-decay settings as ours (they do not change the work).
  (cd "$dir" && "$MDS_LLMC_BIN" -i "$work/llmc_tokens.bin" -j "$work/llmc_tokens.bin" -e "d$1" \
    -b "$5" -t "$4" -d $(($6 * $4)) -x "$iters" -v 1000000 -m 1 -s 0 -l 1e-4 -u 1 -q 0.1 \
    -c 0.01 > log 2>&1) || { tail -20 "$dir/log" >&2; return 1; }
  awk -v warmup="$warmup" '
    /^step +[0-9]+\/[0-9]+ \|/ {
      split($0, field, "|"); split(field[1], step, /[ \/]+/)
      for (i = 1; i <= length(field); ++i)
        if (field[i] ~ / ms *$/) { ms = field[i]; sub(/ ms *$/, "", ms) }
      if (step[2] + 0 > warmup) { sum += ms; ++n }
    }
    END { if (n == 0) { print "llmc: no timed steps in its log" > "/dev/stderr"; exit 1 }
          printf "%.6f\n", sum / n / 1000 }' "$dir/log"
}

row() {  # what config seconds tokens-per-step flop-per-token peak
  awk -v what="$1" -v config="$2" -v sec="$3" -v tokens="$4" -v flop="$5" -v peak="$6" 'BEGIN {
    if (sec == "") { printf "| %s | %s | failed | | |\n", config, what; exit }
    tps = tokens / sec
    mfu = peak == "" ? "?" : sprintf("%.1f%%", 100 * tps * flop / (peak * 1e12))
    printf "| %s | %s | %.3f | %.0f | %s |\n", config, what, sec, tps, mfu }'
}

echo "device: $(device_name); $("$python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch');" \
  "peaks (TFLOP/s): bf16 $(peak_tflops bf16), tf32 $(peak_tflops tf32), fp32 $(peak_tflops fp32); $iters steps, first $warmup untimed"
compile=(--compile)
"$python" -c 'import torch, sys; sys.exit(0 if hasattr(torch, "compile") else 1)' 2> /dev/null ||
  compile=()
rows=()
wanted() { [[ " $runs " == *" $1 "* ]]; }
add_row() {  # as row(); echoed at once too, so a run cut short still shows its finished rows
  rows+=("$(row "$@")")
  echo "${rows[-1]}" >&2
}
for config in $configs; do
  values="$(config_values "$config")" || exit 2
  read -r L h n s b G <<< "$values"
  flop=$(flop_per_token "$L" "$h" "$s" 50304)
  echo "== $config (L=$L h=$h heads=$n s=$s b=$b G=$G)" >&2
  if wanted mds-fp32; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" fp32) || ours=""
    add_row "mds pretrain, fp32" "$config" "$ours" $((G * s)) "$flop" "$(peak_tflops fp32)"
  fi
  if wanted mds-tf32; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" fp32 --tf32) || ours=""
    add_row "mds pretrain, fp32, --tf32" "$config" "$ours" $((G * s)) "$flop" "$(peak_tflops tf32)"
  fi
  if wanted mds-bf16; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" bf16) || ours=""
    add_row "mds pretrain, bf16" "$config" "$ours" $((G * s)) "$flop" "$(peak_tflops bf16)"
  fi
  if wanted mds-bf16-fixed; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" bf16 --fixed-kernel-shapes) || ours=""
    add_row "mds pretrain, bf16, --fixed-kernel-shapes" "$config" "$ours" $((G * s)) "$flop" \
      "$(peak_tflops bf16)"
  fi
  if wanted mds-bf16-epilogues; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" bf16 --cublaslt-epilogues) || ours=""
    add_row "mds pretrain, bf16, --cublaslt-epilogues" "$config" "$ours" $((G * s)) "$flop" \
      "$(peak_tflops bf16)"
  fi
  if wanted mds-bf16-tuned; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" bf16 --gemm-tuning-file "$work/gemms-$config.txt") ||
      ours=""
    add_row "mds pretrain, bf16, --gemm-tuning-file" "$config" "$ours" $((G * s)) "$flop" \
      "$(peak_tflops bf16)"
    [ ! -f "$work/gemms-$config.txt" ] || sed 's/^/  /' "$work/gemms-$config.txt" >&2
  fi
  if wanted mds-bf16-nodrop; then
    ours=$(run_ours "$L" "$h" "$n" "$s" "$b" "$G" bf16 --attention-dropout 0 --hidden-dropout 0) ||
      ours=""
    add_row "mds pretrain, bf16, no dropout" "$config" "$ours" $((G * s)) "$flop" "$(peak_tflops bf16)"
  fi
  if wanted llmc; then
    llmc=$(run_llmc "$L" "$h" "$n" "$s" "$b" "$G") || llmc=""
    add_row "llm.c train_gpt2cu, bf16 (no dropout)" "$config" "$llmc" $((G * s)) "$flop" \
      "$(peak_tflops bf16)"
    [ -z "${MDS_LLMC_BIN:-}" ] || [ ! -f "$(dirname "$MDS_LLMC_BIN")/BUILD_INFO" ] ||
      sed 's/^/  /' "$(dirname "$MDS_LLMC_BIN")/BUILD_INFO" >&2
  fi
  if wanted torch-eager; then
    eager=$(run_torch "$L" "$h" "$n" "$s" "$b" "$G") || eager=""
    add_row "PyTorch eager, fp32" "$config" "$eager" $((G * s)) "$flop" "$(peak_tflops fp32)"
  fi
  if wanted torch-fast; then
    fast=$(run_torch "$L" "$h" "$n" "$s" "$b" "$G" --dtype bf16 --attention sdpa "${compile[@]}") ||
      fast=""
    add_row "PyTorch bf16 + SDPA${compile:+ + torch.compile}" "$config" "$fast" $((G * s)) "$flop" "$(peak_tflops bf16)"
  fi
  if wanted torch-fast-nodrop; then
    fast=$(run_torch "$L" "$h" "$n" "$s" "$b" "$G" --dtype bf16 --attention sdpa "${compile[@]}" \
      --attention-dropout 0 --hidden-dropout 0) || fast=""
    add_row "PyTorch bf16 + SDPA${compile:+ + torch.compile}, no dropout" "$config" "$fast" \
      $((G * s)) "$flop" "$(peak_tflops bf16)"
  fi
done
echo
echo "| config | what | s/step | tokens/s | MFU |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
