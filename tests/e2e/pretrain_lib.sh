# Helpers for the pretrain e2e tests (sourced after lib.sh): a small Shakespeare dataset, a tiny
# model's flags and DeepSpeed configs for each precision.
make_shakespeare_dataset() {  # prefix-out
  head -c 200000 "$MDS_DATA/corpora/tinyshakespeare.txt" > "$WORK/corpus.txt"
  python3 "$REPO/scripts/text_to_jsonl.py" "$WORK/corpus.txt" "$WORK/corpus.jsonl"
  "$MDS_BIN/preprocess" --input "$WORK/corpus.jsonl" --output-prefix "$1" "${gpt2_flags[@]}" \
    --append-eod --workers 1 > /dev/null
}

write_ds_config() {  # path precision(fp32|bf16|fp16) zero-stage
  local precision_block=""
  case "$2" in
    bf16) precision_block='"bf16": {"enabled": true},' ;;
    fp16) precision_block='"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 100, "hysteresis": 2, "min_loss_scale": 1},' ;;
  esac
  cat > "$1" <<JSON
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 4, "gradient_clipping": 1.0,
  $precision_block
  "zero_optimization": {"stage": $3}, "steps_per_print": 2000, "wall_clock_breakdown": false }
JSON
}

precision_flag() {  # precision
  case "$1" in bf16) echo --bf16 ;; fp16) echo --fp16 ;; *) echo "" ;; esac
}

tiny_model_flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
                  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4
                  --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 3
                  --weight-decay 0.1 --clip-grad 1.0 --seed 1234 --split 90,8,2
                  --eval-interval 1000 --eval-iters 2 --log-interval 5)

# The iteration/loss pairs of a metrics file, one "iteration loss" per line.
train_losses() {  # metrics.jsonl
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    record = json.loads(line)
    if record["type"] == "train":
        print(record["iteration"], record["lm_loss"])
PY
}

# Open MPI settings for oversubscribed runs (more ranks than cores) as root, with short timeouts.
use_mpirun() {
  command -v mpirun > /dev/null || fail "mpirun not found (scripts/install-deps.sh installs openmpi-bin)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
  export MDS_DIST_TIMEOUT_S=120
}

# fp32, ZeRO 0, b = 2, G = 8: the config of the multi-rank tests.
write_grid_ds_config() {  # path
  cat > "$1" <<'JSON'
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 0}, "steps_per_print": 2000 }
JSON
}

# pretrain with the caller's `flags` array on `ranks` processes (mpirun unless 1), its metrics in
# $WORK/<name>.jsonl and its output in $WORK/<name>.log / .err.
run_ranks() {  # name ranks extra-flags...
  local name=$1 ranks=$2; shift 2
  local launch=()
  [ "$ranks" = 1 ] || launch=(timeout 300 mpirun -np "$ranks")
  "${launch[@]}" "$MDS_BIN/pretrain" "${flags[@]}" --metrics-file "$WORK/$name.jsonl" "$@" \
    > "$WORK/$name.log" 2> "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name run"; }
}
