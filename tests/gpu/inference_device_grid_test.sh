#!/usr/bin/env bash
# evaluate and generate on several ranks on CUDA devices: T = 2, P = 2 and D = 2 (evaluate's
# replicas) under `mpirun -np 2`, and T = 2 × P = 2 under `mpirun -np 4`, with --device cuda and
# --distributed-backend gloo (device tensors staged through host MPI, so the ranks may share one
# GPU) against one process on the CPU from the same checkpoint (pretrain's tiny model trained 6
# steps on the CPU): WikiText loss and perplexities within 1e-5 relative, the same LAMBADA count,
# greedy continuations byte-identical. With two or more GPUs T = 2 and D = 2 run over NCCL too;
# with one, two NCCL ranks on it are refused with one line. Exits 77 (skipped) without a CUDA
# device or without mpirun.
source "$MDS_TESTS/e2e/lib.sh"
source "$MDS_TESTS/e2e/pretrain_lib.sh"
source "$MDS_TESTS/gpu/gpu_lib.sh"
require_cuda_device
require_mpirun

make_shakespeare_dataset "$WORK/shakespeare"
write_grid_ds_config "$WORK/ds.json"
# Head dim 8 (flash and decode attention kernels), two heads per rank at T = 2; the vocabulary
# padded to a multiple of 64 (even, so T = 2 splits it).
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 "${gpt2_flags[@]}"
       --make-vocab-size-divisible-by 64)
"$MDS_BIN/pretrain" "${model[@]}" --device cpu --global-batch-size 8 --lr 1e-3 --min-lr 1e-4 \
  --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.1 --clip-grad 1.0 --seed 1234 \
  --split 98,1,1 --eval-interval 1000 --eval-iters 1 --log-interval 5 --train-iters 6 \
  --data-path "$WORK/shakespeare_text_document" --deepspeed --deepspeed_config "$WORK/ds.json" \
  --save "$WORK/ckpt" --save-interval 6 > "$WORK/pretrain.log" 2>&1 ||
  { cat "$WORK/pretrain.log"; fail "pretrain"; }
model+=(--load "$WORK/ckpt")

make_inference_eval_files 8
printf 'First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n' \
  > "$WORK/verses.txt"

launch() {  # ranks: the command prefix for that many processes
  [ "$1" = 1 ] && return
  printf '%s\n' timeout 300 mpirun -np "$1"
}
evaluate() {  # name ranks task flags...
  local name=$1 ranks=$2 task=$3; shift 3
  local data="$WORK/wiki.txt"
  [ "$task" = LAMBADA ] && data="$WORK/lambada.jsonl"
  local prefix; mapfile -t prefix < <(launch "$ranks")
  "${prefix[@]}" "$MDS_BIN/evaluate" "${model[@]}" --task "$task" --valid-data "$data" \
    --overlapping-eval 16 --results-file "$WORK/$name.json" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "evaluate $name"; }
}
generate() {  # name ranks flags...
  local name=$1 ranks=$2; shift 2
  local prefix; mapfile -t prefix < <(launch "$ranks")
  "${prefix[@]}" "$MDS_BIN/generate" "${model[@]}" --greedy --out-seq-length 10 \
    --sample-input-file "$WORK/verses.txt" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" ||
    { cat "$WORK/$name.err"; fail "generate $name"; }
}
same_results() {  # host device: the JSON numbers within 1e-5 relative, counts exactly
  python3 - "$WORK/$1.json" "$WORK/$2.json" <<'PY'
import json, sys
a, b = (json.load(open(path)) for path in sys.argv[1:])
assert a.keys() == b.keys(), (a, b)
worst = 0.0
for key, x in a.items():
    y = b[key]
    if isinstance(x, float):
        worst = max(worst, abs(x - y) / max(abs(x), 1e-30))
        assert abs(x - y) <= 1e-5 * abs(x), (key, x, y)
    else:
        assert x == y, (key, x, y)
print(f"worst relative difference {worst:.1e}")
PY
}
# Checks a device run against the host's: results, the device it ran on, the staged groups.
check_grid() {  # name ranks backend-text flags...
  local name=$1 ranks=$2 backend=$3; shift 3
  evaluate "$name-wiki" "$ranks" WIKITEXT103 "$@"
  evaluate "$name-lambada" "$ranks" LAMBADA "$@"
  grep -q "> running on cuda:" "$WORK/$name-wiki.log" || fail "$name does not say it runs on a device"
  grep -q "> device tensors between ranks: $backend" "$WORK/$name-wiki.log" ||
    fail "$name: the groups do not move device tensors ($backend): $(cat "$WORK/$name-wiki.log")"
  local difference
  difference="$(same_results host-wiki "$name-wiki")" || fail "$name: WikiText differs from the host"
  same_results host-lambada "$name-lambada" > /dev/null || fail "$name: LAMBADA differs from the host"
  pass "$name on $ranks ranks ($backend): WikiText within 1e-5 of the host's ($difference), the same LAMBADA count"
}

evaluate host-wiki 1 WIKITEXT103 --device cpu
evaluate host-lambada 1 LAMBADA --device cpu
generate host-greedy 1 --device cpu
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert 0 < r["correct"] < r["total"], r' \
  "$WORK/host-lambada.json" || fail "the LAMBADA count should be neither 0 nor all"
[ "$(grep -c 'Megatron-LM:' "$WORK/host-greedy.out")" = 4 ] || fail "4 continuations expected"

gloo=(--device cuda --distributed-backend gloo)
staged="staged through MPI"
check_grid t2 2 "$staged" "${gloo[@]}" --tensor-model-parallel-size 2
check_grid p2 2 "$staged" "${gloo[@]}" --pipeline-model-parallel-size 2
check_grid d2 2 "$staged" "${gloo[@]}"
grep -q "2 model replicas of 1 × 1 ranks" "$WORK/d2-wiki.log" || fail "d2: the replicas line"
check_grid t2p2 4 "$staged" "${gloo[@]}" --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2
for run in "t2 2 --tensor-model-parallel-size 2" "p2 2 --pipeline-model-parallel-size 2" \
  "t2p2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"; do
  set -- $run
  name=$1 ranks=$2
  shift 2
  generate "$name-greedy" "$ranks" "${gloo[@]}" "$@"
  grep -q "> running on cuda:" "$WORK/$name-greedy.err" || fail "generate $name is not on a device"
  expect_same_files "$WORK/host-greedy.out" "$WORK/$name-greedy.out" \
    "greedy continuations on $ranks ranks on the device ($name) are the host's"
done

gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -ge 2 ]; then
  nccl=(--device cuda --distributed-backend nccl)
  check_grid t2nccl 2 NCCL "${nccl[@]}" --tensor-model-parallel-size 2
  check_grid d2nccl 2 NCCL "${nccl[@]}"
  generate t2nccl-greedy 2 "${nccl[@]}" --tensor-model-parallel-size 2
  expect_same_files "$WORK/host-greedy.out" "$WORK/t2nccl-greedy.out" \
    "greedy continuations at T = 2 over NCCL are the host's"
else
  # Two ranks on the one GPU: NCCL refuses, with one line that names the way out.
  rc=0
  timeout 300 mpirun -np 2 "$MDS_BIN/evaluate" "${model[@]}" --task WIKITEXT103 \
    --valid-data "$WORK/wiki.txt" --device cuda --distributed-backend nccl \
    --tensor-model-parallel-size 2 > "$WORK/shared.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "two NCCL ranks on one GPU fail without hanging (rc $rc)"
  grep -q "use the same GPU, and NCCL needs one GPU per rank" "$WORK/shared.log" ||
    fail "the error says NCCL needs one GPU per rank: $(tail -3 "$WORK/shared.log")"
  pass "two evaluate ranks on one GPU over NCCL: a one-line refusal naming --distributed-backend gloo"
fi
finish
