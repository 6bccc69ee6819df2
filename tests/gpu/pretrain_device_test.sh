#!/usr/bin/env bash
# pretrain on a CUDA device against pretrain on the CPU, same flags, data and seed (fp32, ZeRO 0,
# dropout on, two micro-batches per iteration): every iteration's loss and the validation loss
# within 1e-4 of the CPU's; the checkpoint written from the device run's host copies holds the
# same files as the CPU's; the CPU resumes it and continues as it continues its own (within 1e-4).
# Then bf16 (BF16_Optimizer, ZeRO 0): 20 iterations on each, losses within 1e-3 (the 16-bit
# weights' rounding can land one ulp apart where the fp32 runs differ by 1e-5; see
# tests/gpu/training_mixed_precision_test.cpp), the same checkpoint files; and with
# --cublaslt-epilogues within 1e-2; with --gemm-tuning-file within 1e-3, and a rerun with the
# file it wrote repeats its losses exactly. An fp32 run with --tf32 stays within 1e-2 as well.
# Kernel shapes picked by timing (the default) give --fixed-kernel-shapes' losses exactly.
# Exits 77 (skipped) without a CUDA device.
source "$MDS_TESTS/e2e/lib.sh"
source "$MDS_TESTS/e2e/pretrain_lib.sh"
source "$MDS_TESTS/gpu/gpu_lib.sh"
require_cuda_device

make_shakespeare_dataset "$WORK/shakespeare"
write_ds_config "$WORK/ds.json" fp32 0
flags=("${tiny_model_flags[@]}" "${gpt2_flags[@]}" --data-path "$WORK/shakespeare_text_document"
       --deepspeed --deepspeed_config "$WORK/ds.json" --log-interval 1)

run() {  # name device extra-flags...
  local name=$1 device=$2; shift 2
  "$MDS_BIN/pretrain" "${flags[@]}" --device "$device" --metrics-file "$WORK/$name.jsonl" "$@" \
    > "$WORK/$name.log" 2> "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name run"; }
}
# 20 of 25 iterations, so that the resumed runs keep the LR schedule's length.
first_part=(--train-iters 25 --exit-interval 20 --save-interval 20)
run cpu cpu "${first_part[@]}" --save "$WORK/cpu-ckpt"
run gpu cuda "${first_part[@]}" --save "$WORK/gpu-ckpt"
grep -q "> training on cuda:0 (" "$WORK/gpu.log" || fail "the device run does not say it trains on cuda:0"
pass "pretrain --device cuda trains on cuda:0"

# Every train and valid record of `got` within `bound` of `want`'s, iteration by iteration.
compare_losses() {  # want.jsonl got.jsonl bound what
  python3 - "$@" <<'PY' || fail "$4"
import json, sys
want_path, got_path, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
def losses(path):
    return [(r["type"], r.get("iteration"), r["lm_loss"]) for r in map(json.loads, open(path))
            if r["type"] in ("train", "valid")]
want, got = losses(want_path), losses(got_path)
assert len(want) == len(got) and len(want) > 0, (len(want), len(got))
worst = 0.0
for (wt, wi, wl), (gt, gi, gl) in zip(want, got):
    assert (wt, wi) == (gt, gi), ((wt, wi), (gt, gi))
    worst = max(worst, abs(gl - wl) / abs(wl))
print("worst relative loss difference: %.3g over %d records" % (worst, len(want)))
assert worst <= bound, worst
PY
  pass "$4"
}
compare_losses "$WORK/cpu.jsonl" "$WORK/gpu.jsonl" 1e-4 "device losses within 1e-4 of the CPU's"
# --tf32: the device's fp32 GEMMs round their inputs to TF32 (~1e-3 relative a product), so the
# losses follow the CPU's within 1e-2, not 1e-4; the log says so, and only then.
run gpu-tf32 cuda "${first_part[@]}" --tf32
grep -q "> fp32 GEMMs round their inputs to TF32 (--tf32)" "$WORK/gpu-tf32.log" ||
  fail "the --tf32 run does not say it uses TF32"
grep -q "round their inputs to TF32" "$WORK/gpu.log" && fail "a run without --tf32 says it uses TF32"
compare_losses "$WORK/cpu.jsonl" "$WORK/gpu-tf32.jsonl" 1e-2 \
  "device losses with --tf32 within 1e-2 of the CPU's"

(cd "$WORK/cpu-ckpt" && find . -type f | sort) > "$WORK/cpu-files"
(cd "$WORK/gpu-ckpt" && find . -type f | sort) > "$WORK/gpu-files"
expect_same_files "$WORK/cpu-files" "$WORK/gpu-files" "the device checkpoint has the CPU's files"

run cpu-resumed cpu --train-iters 25 --load "$WORK/cpu-ckpt"
run gpu-resumed cpu --train-iters 25 --load "$WORK/gpu-ckpt"
compare_losses "$WORK/cpu-resumed.jsonl" "$WORK/gpu-resumed.jsonl" 1e-4 \
  "the CPU resumes the device checkpoint as its own"
run gpu-on-gpu cuda --train-iters 25 --load "$WORK/gpu-ckpt"
compare_losses "$WORK/cpu-resumed.jsonl" "$WORK/gpu-on-gpu.jsonl" 1e-4 \
  "the device resumes its checkpoint"

write_ds_config "$WORK/ds-bf16.json" bf16 0
flags=("${tiny_model_flags[@]}" "${gpt2_flags[@]}" --data-path "$WORK/shakespeare_text_document"
       --deepspeed --deepspeed_config "$WORK/ds-bf16.json" --log-interval 1 --bf16)
run cpu-bf16 cpu --train-iters 20 --save "$WORK/cpu-bf16-ckpt" --save-interval 20
run gpu-bf16 cuda --train-iters 20 --save "$WORK/gpu-bf16-ckpt" --save-interval 20
grep -q "> training on cuda:0 (" "$WORK/gpu-bf16.log" || fail "the bf16 run does not train on cuda:0"
compare_losses "$WORK/cpu-bf16.jsonl" "$WORK/gpu-bf16.jsonl" 1e-3 \
  "bf16 device losses within 1e-3 of the CPU's"
(cd "$WORK/cpu-bf16-ckpt" && find . -type f | sort) > "$WORK/cpu-bf16-files"
(cd "$WORK/gpu-bf16-ckpt" && find . -type f | sort) > "$WORK/gpu-bf16-files"
expect_same_files "$WORK/cpu-bf16-files" "$WORK/gpu-bf16-files" \
  "the bf16 device checkpoint has the CPU's files"

# --cublaslt-epilogues (fc1's bias and GeLU in cuBLASLt's GEMM epilogue on the device; none on the
# CPU): within the issue's 1% of the CPU's bf16 losses (cuBLASLt's GeLU is not the kernels' to
# the ulp, so not the 1e-3 above).
run gpu-bf16-epilogues cuda --train-iters 20 --cublaslt-epilogues
compare_losses "$WORK/cpu-bf16.jsonl" "$WORK/gpu-bf16-epilogues.jsonl" 1e-2 \
  "bf16 device losses with --cublaslt-epilogues within 1e-2 of the CPU's"

# --gemm-tuning-file: the first run times cuBLASLt's candidates and writes its choices, within
# 1e-3 of the CPU's bf16 losses as the heuristic's run; the second reads them and repeats the
# first's losses exactly.
run gpu-bf16-tuned cuda --train-iters 20 --gemm-tuning-file "$WORK/gemms.txt"
grep -q "kept in $WORK/gemms.txt (--gemm-tuning-file)" "$WORK/gpu-bf16-tuned.log" ||
  fail "the tuned run does not name its GEMM tuning file"
[ "$(grep -c ' | m=' "$WORK/gemms.txt")" -gt 0 ] || fail "the tuning file holds no choice"
compare_losses "$WORK/cpu-bf16.jsonl" "$WORK/gpu-bf16-tuned.jsonl" 1e-3 \
  "bf16 device losses with tuned GEMM algorithms within 1e-3 of the CPU's"
run gpu-bf16-tuned-again cuda --train-iters 20 --gemm-tuning-file "$WORK/gemms.txt"
compare_losses "$WORK/gpu-bf16-tuned.jsonl" "$WORK/gpu-bf16-tuned-again.jsonl" 0 \
  "a rerun with the tuning file repeats the tuned run's losses"

# Launch shapes picked by timing (the default) against --fixed-kernel-shapes: the same losses to
# the bit. Head dim 64 (hidden 128, 2 heads), so that the attention's shapes are timed as well as
# the 16-bit loss's; the log names each pick, and a fixed run names none.
hn64=(--train-iters 20 --hidden-size 128 --num-attention-heads 2)
run gpu-bf16-shapes cuda "${hn64[@]}"
run gpu-bf16-fixed-shapes cuda "${hn64[@]}" --fixed-kernel-shapes
for op in attention_forward attention_backward cross_entropy_forward_backward; do
  grep -q "> kernel shape picked by timing, $op bfloat16" "$WORK/gpu-bf16-shapes.log" ||
    fail "the timed run does not log its $op pick"
done
grep -q "kernel shape picked by timing" "$WORK/gpu-bf16-fixed-shapes.log" &&
  fail "a run with --fixed-kernel-shapes logs a pick"
grep -q "> kernels in their default launch shapes (--fixed-kernel-shapes)" \
  "$WORK/gpu-bf16-fixed-shapes.log" || fail "the fixed run does not say so"
compare_losses "$WORK/gpu-bf16-fixed-shapes.jsonl" "$WORK/gpu-bf16-shapes.jsonl" 0 \
  "kernel shapes picked by timing give the default shapes' losses exactly"
finish
