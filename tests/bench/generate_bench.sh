#!/usr/bin/env bash
# Generation and evaluation throughput of a GPT-2 124M-shaped model on this machine's CPU (or on
# its GPU, MDS_BENCH_DEVICE=cuda), ours against PyTorch in the same run on the same device: the
# same weights (our checkpoint exported to Hugging Face with tests/tools/hf_gpt2_probe) in
# transformers' GPT2LMHeadModel. A benchmark: it asserts nothing about time.
#   generate: greedy, unconditional, B samples decoded together, N new tokens each, with the KV
#             cache and with --recompute (the whole prefix every step, as upstream decodes);
#             transformers' generate with use_cache True / False.
#   evaluate: WikiText-2 test windows of s = 1024 tokens (--overlapping-eval 1024: no overlap);
#             PyTorch scores the same windows with one forward each.
# Usage: tests/bench/generate_bench.sh [BUILD_DIR]   (needs bin/pretrain, bin/generate,
#        bin/evaluate, tests/tools/hf_gpt2_probe; the oracle venv's python for transformers)
# Environment: MDS_BENCH_SAMPLES (B, default 4), MDS_BENCH_TOKENS (N, default 64),
#              MDS_BENCH_THREADS (default nproc), MDS_BENCH_PYTHON (default build/oracle-venv),
#              MDS_BENCH_DEVICE (cpu, the default, or cuda: every mds program gets --device cuda,
#              PyTorch moves the model there, warms up once and synchronizes before each clock
#              read). mds's times are whole processes (start, loading and, on a GPU, the CUDA
#              context included); PyTorch's exclude its loading. The "mds loop" columns are the
#              decoding or evaluation alone, as the programs log it (generate's "Avg s/batch" of
#              its one batch, evaluate's "evaluated … in X s"): the like-for-like comparison.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
samples="${MDS_BENCH_SAMPLES:-4}"
tokens="${MDS_BENCH_TOKENS:-64}"
threads="${MDS_BENCH_THREADS:-$(nproc)}"
python="${MDS_BENCH_PYTHON:-$repo/build/oracle-venv/bin/python}"
device="${MDS_BENCH_DEVICE:-cpu}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[ -z "${MDS_BENCH_DEBUG:-}" ] || set -x
export OMP_NUM_THREADS="$threads"

tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file "$repo/data/gpt2/vocab.json"
           --merge-file "$repo/data/gpt2/merges.txt")
model=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
       --max-position-embeddings 1024 "${tokenizer[@]}")
on_device=(--device "$device")
head -c 300000 "$repo/data/corpora/tinyshakespeare.txt" > "$work/corpus.txt"
python3 "$repo/scripts/text_to_jsonl.py" "$work/corpus.txt" "$work/corpus.jsonl"
"$build/bin/preprocess" --input "$work/corpus.jsonl" --output-prefix "$work/shakespeare" \
  "${tokenizer[@]}" --append-eod --workers 1 > /dev/null
cat > "$work/ds.json" << 'JSON'
{ "train_micro_batch_size_per_gpu": 1, "train_batch_size": 1, "zero_optimization": {"stage": 0},
  "steps_per_print": 1000 }
JSON
echo "== GPT-2 124M shape: 2 training steps to get a checkpoint" >&2
"$build/bin/pretrain" "${model[@]}" "${on_device[@]}" --micro-batch-size 1 --global-batch-size 1 \
  --train-iters 2 --lr 1e-4 --split 100,0,0 --eval-interval 1000 --eval-iters 1 --log-interval 1 \
  --data-path "$work/shakespeare_text_document" --deepspeed --deepspeed_config "$work/ds.json" \
  --save "$work/ckpt" --save-interval 2 > "$work/pretrain.log" 2>&1
"$build/tests/tools/hf_gpt2_probe" export "$work/hf" 50304 fp32 1 -- "${model[@]}" \
  --micro-batch-size 1 --load "$work/ckpt" > /dev/null 2> "$work/export.log"

seconds() {  # command... : wall seconds
  local start end
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  python3 -c "print($end - $start)"
}
ours_generate() {  # extra flags...
  "$build/bin/generate" "${model[@]}" "${on_device[@]}" --load "$work/ckpt" --greedy \
    --num-samples "$samples" --micro-batch-size "$samples" --out-seq-length "$tokens" \
    --genfile "$work/gen.jsonl" "$@" 2> "$work/gen.log"
}
generated() { python3 -c 'import json,sys; print(sum(json.loads(l)["length"] for l in open(sys.argv[1])))' "$work/gen.jsonl"; }
# The seconds a program logged for its work alone (the number after `pattern` in its log).
logged_seconds() {  # log pattern
  python3 -c 'import re,sys
found = re.findall(sys.argv[2] + r"\s*([0-9.]+)", open(sys.argv[1]).read())
sys.exit(f"generate_bench: no \"{sys.argv[2]}\" line in {sys.argv[1]}") if not found else print(found[-1])' "$1" "$2"
}
cache_s=$(seconds ours_generate); cache_tokens=$(generated)
cache_loop_s=$(logged_seconds "$work/gen.log" "Avg s/batch:")
recompute_s=$(seconds ours_generate --recompute); recompute_tokens=$(generated)
recompute_loop_s=$(logged_seconds "$work/gen.log" "Avg s/batch:")

head -c 100000 "$repo/data/eval/wikitext-2-test.txt" > "$work/wiki.txt"
ours_evaluate() {
  "$build/bin/evaluate" --task WIKITEXT103 --valid-data "$work/wiki.txt" "${model[@]}" \
    "${on_device[@]}" --load "$work/ckpt" --micro-batch-size 1 --overlapping-eval 1024 \
    --results-file "$work/eval.json" > "$work/eval.log" 2>&1
}
eval_s=$(seconds ours_evaluate)
eval_loop_s=$(logged_seconds "$work/eval.log" "windows in")
eval_tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_tokenized_tokens"])' "$work/eval.json")

"$python" - "$work" "$samples" "$tokens" "$threads" "$cache_s" "$cache_tokens" "$recompute_s" \
  "$recompute_tokens" "$eval_s" "$eval_tokens" "$device" "$cache_loop_s" "$recompute_loop_s" \
  "$eval_loop_s" <<'PY'
import json, sys, time, torch
from transformers import AutoTokenizer, GPT2LMHeadModel
work, B, N, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ours = dict(cache=(float(sys.argv[5]), int(sys.argv[6])), recompute=(float(sys.argv[7]), int(sys.argv[8])),
            evaluate=(float(sys.argv[9]), int(sys.argv[10])))
device = sys.argv[11]
ours_loop = dict(cache=float(sys.argv[12]), recompute=float(sys.argv[13]), evaluate=float(sys.argv[14]))
torch.set_num_threads(threads)
model = GPT2LMHeadModel.from_pretrained(f"{work}/hf").eval().to(device)
start_ids = torch.full((B, 1), 50256, device=device)


def sync():
    if device != "cpu":
        torch.cuda.synchronize()


def generate(cache, new_tokens):
    with torch.no_grad():
        return model.generate(start_ids, do_sample=False, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, use_cache=cache, pad_token_id=50256,
                              attention_mask=torch.ones_like(start_ids))


if device != "cpu":
    generate(True, 4)  # the CUDA context, cuBLAS handles and kernels' first loads
theirs = {}
for name, cache in (("cache", True), ("recompute", False)):
    sync()
    start = time.time()
    out = generate(cache, N)
    sync()
    theirs[name] = (time.time() - start, (out.shape[1] - 1) * B)
ids = AutoTokenizer.from_pretrained(f"{work}/hf")(open(f"{work}/wiki.txt").read())["input_ids"]
windows = [ids[i:i + 1025] for i in range(0, len(ids) - 1, 1024)]
sync()
start = time.time()
with torch.no_grad():
    for w in windows:
        model(torch.tensor([w[:-1]], device=device))
sync()
theirs["evaluate"] = (time.time() - start, sum(len(w) - 1 for w in windows))
where = torch.cuda.get_device_name(0) if device != "cpu" else f"CPU, threads {threads}"
print(f"{where}, torch {torch.__version__}, B = {B} samples, N = {N} new tokens")
print("| task | mds s | mds tokens/s | mds loop s | mds loop tokens/s | PyTorch s | PyTorch tokens/s"
      " | mds / PyTorch | mds loop / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
label = {"cache": "generate, KV cache", "recompute": "generate, recompute (no cache)",
         "evaluate": "evaluate WikiText, s = 1024 windows"}
for key in ("cache", "recompute", "evaluate"):
    (s1, t1), (s2, t2), loop = ours[key], theirs[key], ours_loop[key]
    r1, r2, rl = t1 / s1 if s1 else 0, t2 / s2, t1 / loop if loop else 0
    print(f"| {label[key]} | {s1:.1f} | {r1:.0f} | {loop:.2f} | {rl:.0f} | {s2:.2f} | {r2:.0f}"
          f" | {r1 / r2:.2f}× | {rl / r2:.2f}× |")
PY
