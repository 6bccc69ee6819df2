#!/usr/bin/env bash
# Several ranks training on CUDA devices: T = 2, D = 2 and P = 2 under `mpirun -np 2` with
# --device cuda and --distributed-backend gloo (device tensors staged through host MPI, so the two
# ranks may share one GPU) against the single process on the CPU, same flags, data and seed (fp32,
# ZeRO 0, dropout and clipping on): every train and validation loss within 1e-4 relative. Then bf16
# and fp16 ZeRO 2, and with overlap_comm bf16 and fp16 ZeRO 1 and 2, at D = 2 against two host
# ranks (within 1e-3). With two
# or more GPUs the T = 2 and D = 2 runs are repeated over NCCL (one GPU per rank). Exits 77
# (skipped) without a CUDA device or without mpirun.
source "$MDS_TESTS/e2e/lib.sh"
source "$MDS_TESTS/e2e/pretrain_lib.sh"
source "$MDS_TESTS/gpu/gpu_lib.sh"
require_cuda_device
require_mpirun

make_shakespeare_dataset "$WORK/shakespeare"
write_grid_ds_config "$WORK/ds.json"
# Head dim 8 (a flash-attention kernel) at T = 1 and T = 2; the vocabulary padded to 64·2 at
# every T, so that T = 1 and T = 2 are the same model.
model_flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1
       --clip-grad 1.0 --seed 1234 --split 90,8,2 --eval-interval 5 --eval-iters 2
       --log-interval 1 --make-vocab-size-divisible-by 64 --attention-dropout 0.1
       --hidden-dropout 0.1 --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}"
       --train-iters 10)
flags=("${model_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json")

run_ranks host 1 --device cpu
run_ranks t2 2 --device cuda --distributed-backend gloo --tensor-model-parallel-size 2
run_ranks d2 2 --device cuda --distributed-backend gloo
run_ranks p2 2 --device cuda --distributed-backend gloo --pipeline-model-parallel-size 2
for name in t2 d2 p2; do
  grep -q "> training on cuda:" "$WORK/$name.log" || fail "$name does not say it trains on a device"
done
python3 "$MDS_TESTS/e2e/compare_metrics.py" --tolerance 1e-4 losses "$WORK" host t2 d2 p2 ||
  fail "device grids differ from the single host process"
pass "T=2, D=2 and P=2 on the device (staged through MPI, 2 ranks): losses within 1e-4 of the host's"

# bf16 (BF16_Optimizer, its master partitioned over D) and fp16 ZeRO 2 at D = 2 on the device
# against the same two ranks on the host: losses within 1e-3 relative
# (tests/gpu/training_mixed_precision_test.cpp argues the bound). The fp16 scale starts at 2^20
# and overflows: on the host it halves to 2^17 over the first three steps, regrows to 2^18 and
# overflows again at step 10.
cat > "$WORK/ds-bf16.json" <<'JSON'
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}, "steps_per_print": 2000 }
JSON
cat > "$WORK/ds-fp16-zero2.json" <<'JSON'
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 20, "loss_scale_window": 4},
  "zero_optimization": {"stage": 2}, "steps_per_print": 2000 }
JSON
# The reduction overlapping the backward (overlap_comm): bf16 (stage 0) and fp16 ZeRO 1
# all-reduce during the last micro-batch, fp16 ZeRO 2 reduces to the partitions' owners during
# every one.
sed 's/"stage": 0}/"stage": 0, "overlap_comm": true}/' "$WORK/ds-bf16.json" > "$WORK/ds-bf16-overlap.json"
for stage in 1 2; do
  sed "s/\"stage\": 2}/\"stage\": $stage, \"overlap_comm\": true}/" "$WORK/ds-fp16-zero2.json" \
    > "$WORK/ds-fp16-zero$stage-overlap.json"
done
for precision in bf16 fp16-zero2 bf16-overlap fp16-zero1-overlap fp16-zero2-overlap; do
  flags=("${model_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds-$precision.json"
         "--${precision%%-*}")
  run_ranks "$precision-host" 2 --device cpu
  run_ranks "$precision-d2" 2 --device cuda --distributed-backend gloo
  grep -q "> training on cuda:" "$WORK/$precision-d2.log" ||
    fail "$precision D=2 does not say it trains on a device"
  [[ $precision != *overlap ]] || grep -q "overlapped with the backward" "$WORK/$precision-d2.log" ||
    fail "$precision D=2 does not say its reduction overlaps the backward"
  python3 "$MDS_TESTS/e2e/compare_metrics.py" --tolerance 1e-3 losses "$WORK" "$precision-host" \
    "$precision-d2" || fail "$precision D=2 on the device differs from the host's two ranks"
done
pass "bf16, fp16 ZeRO 2, and with overlap_comm bf16 and fp16 ZeRO 1 and 2, at D=2 on the device (staged): losses within 1e-3 of the host's two ranks"
flags=("${model_flags[@]}" --deepspeed --deepspeed_config "$WORK/ds.json")

gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -ge 2 ]; then
  run_ranks t2nccl 2 --device cuda --distributed-backend nccl --tensor-model-parallel-size 2
  run_ranks d2nccl 2 --device cuda --distributed-backend nccl
  python3 "$MDS_TESTS/e2e/compare_metrics.py" --tolerance 1e-4 losses "$WORK" host t2nccl d2nccl ||
    fail "NCCL device grids differ from the single host process"
  pass "T=2 and D=2 over NCCL (one GPU per rank): losses within 1e-4 of the host's"
else
  # Two ranks on the one GPU: NCCL refuses, with one line that names the way out.
  rc=0
  timeout 300 mpirun -np 2 "$MDS_BIN/pretrain" "${flags[@]}" --device cuda \
    --distributed-backend nccl > "$WORK/shared.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "two NCCL ranks on one GPU fail without hanging (rc $rc)"
  grep -q "use the same GPU, and NCCL needs one GPU per rank" "$WORK/shared.log" ||
    fail "the error says NCCL needs one GPU per rank: $(tail -3 "$WORK/shared.log")"
  pass "two ranks on one GPU over NCCL: a one-line refusal naming --distributed-backend gloo"
fi
finish
