#!/usr/bin/env bash
# Hugging Face GPT-2 export (merge-mp-partitions --to-hf) and import (issue 7, ckpt/hf_folder.h)
# against transformers itself (the oracle venv's transformers 4.40 on Debian's torch):
#   - a T = 2 × P = 2 checkpoint exported with every padded row in fp32 loads with
#     GPT2LMHeadModel.from_pretrained and gives our logits within 1e-5; import(export(x)) is x
#     bit for bit; GPT2Tokenizer loads the folder's tokenizer files;
#   - exported with the tokenizer's 50257 rows in bf16 it loads as bf16 with vocab_size 50257;
#   - a GPT-2 that transformers initialised and saved imports into our model with its logits;
#   - a truncated safetensors file and a non-GPT-2 config fail with one line naming the file.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
"$MDS_PYTHON" -c 'import transformers' 2> /dev/null ||
  fail "$MDS_PYTHON has no transformers (scripts/test.sh installs it in build/oracle-venv)"
make_shakespeare_dataset "$WORK/shakespeare"
probe="$MDS_TEST_TOOLS/hf_gpt2_probe"

write_grid_ds_config "$WORK/ds.json"
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --make-vocab-size-divisible-by 64 "${gpt2_flags[@]}")
flags=("${model[@]}" --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --seed 1234
       --split 90,8,2 --eval-interval 1000 --eval-iters 1 --log-interval 5
       --data-path "$WORK/shakespeare_text_document" --deepspeed --deepspeed_config "$WORK/ds.json")
run_ranks train 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 3 \
  --save "$WORK/ckpt" --save-interval 3

tokens=464,3290,318,257,1332,286,13,50256
"$probe" export "$WORK/hf" 50304 fp32 "$tokens" -- "${model[@]}" --micro-batch-size 1 \
  --load "$WORK/ckpt" > "$WORK/ours.json" 2> "$WORK/export.err" ||
  { cat "$WORK/export.err"; fail "export of the T=2×P=2 checkpoint"; }
grep -q "import(export(x)) is bit-identical" "$WORK/export.err" || fail "no round-trip check"
pass "import(export(x)) gives the checkpoint's weights bit for bit"

# The command users run writes the same folder.
"$MDS_BIN/merge-mp-partitions" "${model[@]}" --load "$WORK/ckpt" --to-hf "$WORK/hf-cli" \
  2> "$WORK/to-hf.err" || { cat "$WORK/to-hf.err"; fail "merge-mp-partitions --to-hf"; }
for file in model.safetensors vocab.json merges.txt tokenizer_config.json; do
  cmp -s "$WORK/hf/$file" "$WORK/hf-cli/$file" || fail "merge-mp-partitions --to-hf: $file differs"
done
# The probe exports the inference model (no dropout); the command keeps the training flags'.
grep -q '"resid_pdrop": 0.1,' "$WORK/hf-cli/config.json" || fail "--to-hf config: dropout"
pass "merge-mp-partitions --to-hf writes the same weights and tokenizer files, dropout 0.1 as trained"

"$MDS_PYTHON" - "$WORK" "$tokens" <<'PY' || fail "transformers disagrees with the fp32 export"
import json, pathlib, sys, torch
from transformers import GPT2LMHeadModel, GPT2Tokenizer
work, tokens = pathlib.Path(sys.argv[1]), [int(t) for t in sys.argv[2].split(",")]
model = GPT2LMHeadModel.from_pretrained(work / "hf").eval()
assert model.config.vocab_size == 50304 and model.config.n_layer == 2, model.config
with torch.no_grad():
    theirs = model(torch.tensor([tokens])).logits[0].double()
ours = torch.tensor(json.loads((work / "ours.json").read_text()), dtype=torch.float64)
worst = (theirs - ours).abs().max().item()
print(f"fp32 export: {tuple(ours.shape)} logits, worst absolute difference {worst:.2e}")
assert worst <= 1e-5, worst
tokenizer = GPT2Tokenizer.from_pretrained(work / "hf")
assert tokenizer.eos_token_id == 50256 and tokenizer.encode(" of.") == [286, 13], tokenizer
PY
pass "GPT2LMHeadModel.from_pretrained on the export gives our logits within 1e-5"

"$probe" export "$WORK/hf-bf16" 50257 bf16 "$tokens" -- "${model[@]}" --micro-batch-size 1 \
  --load "$WORK/ckpt" > /dev/null 2> "$WORK/export-bf16.err" ||
  { cat "$WORK/export-bf16.err"; fail "bf16 export"; }
"$MDS_PYTHON" - "$WORK" "$tokens" <<'PY' || fail "the bf16 export with 50257 rows"
import json, pathlib, sys, torch
from transformers import GPT2LMHeadModel
work, tokens = pathlib.Path(sys.argv[1]), [int(t) for t in sys.argv[2].split(",")]
model = GPT2LMHeadModel.from_pretrained(work / "hf-bf16", torch_dtype="auto").eval()
assert model.config.vocab_size == 50257, model.config.vocab_size
assert model.transformer.wte.weight.dtype == torch.bfloat16
with torch.no_grad():
    theirs = model.float()(torch.tensor([tokens])).logits[0].double()
ours = torch.tensor(json.loads((work / "ours.json").read_text()), dtype=torch.float64)[:, :50257]
worst = ((theirs - ours).abs().max() / ours.abs().max()).item()
print(f"bf16 export: worst difference {worst:.2e} of the largest logit")
assert worst <= 2e-2, worst
PY
pass "the bf16 export with the tokenizer's 50257 rows loads as bf16 and tracks the fp32 logits"

"$MDS_PYTHON" - "$WORK" "$tokens" <<'PY' || fail "transformers' own GPT-2 could not be saved"
import json, pathlib, sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
work, tokens = pathlib.Path(sys.argv[1]), [int(t) for t in sys.argv[2].split(",")]
torch.manual_seed(7)
config = GPT2Config(vocab_size=50257, n_positions=32, n_embd=32, n_layer=2, n_head=4)
model = GPT2LMHeadModel(config).eval()
for name, p in model.named_parameters():
    if name.endswith("bias") or "ln_" in name:
        torch.nn.init.normal_(p, std=0.05, mean=1.0 if ".weight" in name else 0.0)
model.save_pretrained(work / "theirs", safe_serialization=True)
# transformers' other layouts of the same weights: pytorch_model.bin, and both sharded with an index.
model.save_pretrained(work / "theirs-bin", safe_serialization=False)
model.save_pretrained(work / "theirs-shards", safe_serialization=True, max_shard_size="200KB")
model.save_pretrained(work / "theirs-bin-shards", safe_serialization=False, max_shard_size="200KB")
assert (work / "theirs-shards/model.safetensors.index.json").exists()
assert (work / "theirs-bin-shards/pytorch_model.bin.index.json").exists()
with torch.no_grad():
    logits = model(torch.tensor([tokens])).logits[0].tolist()
(work / "theirs.json").write_text(json.dumps(logits))
PY
"$probe" import "$WORK/theirs" 50304 "$tokens" > "$WORK/imported.json" 2> "$WORK/import.err" ||
  { cat "$WORK/import.err"; fail "import of transformers' GPT-2"; }
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "imported GPT-2 gives other logits"
import json, pathlib, sys, torch
work = pathlib.Path(sys.argv[1])
theirs = torch.tensor(json.loads((work / "theirs.json").read_text()), dtype=torch.float64)
ours = torch.tensor(json.loads((work / "imported.json").read_text()), dtype=torch.float64)
worst = (ours[:, :50257] - theirs).abs().max().item()
print(f"import: worst absolute difference {worst:.2e}; padded columns {ours[:, 50257:].abs().max():.1f}")
assert worst <= 1e-5, worst
assert ours[:, 50257:].abs().max().item() == 0.0  # zero rows pad the vocabulary
PY
pass "a GPT-2 saved by transformers imports with the same logits (padded rows zero)"
for layout in bin shards bin-shards; do
  "$probe" import "$WORK/theirs-$layout" 50304 "$tokens" > "$WORK/imported-$layout.json" \
    2> "$WORK/import-$layout.err" || { cat "$WORK/import-$layout.err"; fail "import of theirs-$layout"; }
  cmp -s "$WORK/imported.json" "$WORK/imported-$layout.json" ||
    fail "theirs-$layout imports other weights than model.safetensors"
done
pass "pytorch_model.bin and sharded safetensors/.bin folders import the same weights bit for bit"

# merge-mp-partitions --from-hf: the exported folder written back as a T = 2 × P = 2 checkpoint
# (shape and tokenizer from the folder) gives the training run's layer files byte for byte.
from_hf=("$MDS_BIN/merge-mp-partitions" --make-vocab-size-divisible-by 64
         --target-tensor-model-parallel-size 2 --target-pipeline-model-parallel-size 2)
"${from_hf[@]}" --from-hf "$WORK/hf-cli" --save "$WORK/back" 2> "$WORK/from-hf.err" ||
  { cat "$WORK/from-hf.err"; fail "merge-mp-partitions --from-hf of our export"; }
layer_files=("$WORK/ckpt/global_step3"/layer_*-model_states.pt)
[ "${#layer_files[@]}" = 8 ] || fail "expected 8 layer files, found ${#layer_files[@]}"
for file in "${layer_files[@]}"; do
  cmp -s "$file" "$WORK/back/global_step0/$(basename "$file")" ||
    fail "--from-hf of the export: $(basename "$file") differs from the training run's"
done
[ "$(cat "$WORK/back/latest")" = global_step0 ] || fail "--from-hf: latest"
pass "checkpoint → --to-hf → --from-hf at T=2×P=2 gives the 8 layer files back byte for byte"
evaluate_ckpt() {  # name load-dir extra...
  local name=$1 load=$2; shift 2
  "$MDS_BIN/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.txt" "${model[@]}" \
    --micro-batch-size 2 --load "$load" --results-file "$WORK/$name.json" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "evaluate $name"; }
}
head -c 3000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
evaluate_ckpt eval-trained "$WORK/ckpt"
evaluate_ckpt eval-back "$WORK/back"
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "evaluate of the re-imported checkpoint differs"
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
a, b = (json.loads((work / f"eval-{n}.json").read_text()) for n in ("trained", "back"))
for key in ("avg_loss", "ppl", "adjusted_ppl", "num_tokenized_tokens"):
    assert a[key] == b[key], (key, a[key], b[key])
print("evaluate, trained vs re-imported:", a["avg_loss"], b["avg_loss"])
PY
pass "evaluate gives the re-imported checkpoint the trained one's loss exactly"

# transformers' own GPT-2 (gelu_new, 50257 rows, no tokenizer files in its folder) imported at
# T = 2: generate's greedy continuations equal transformers' generate, and pretrain --finetune
# trains from it at T = 2 × D = 2.
openai_gelu=(--no-bias-gelu-fusion --openai-gelu)
"${from_hf[@]}" --from-hf "$WORK/theirs" --save "$WORK/theirs-ckpt" "${openai_gelu[@]}" \
  --target-pipeline-model-parallel-size 1 "${gpt2_flags[@]}" 2> "$WORK/from-theirs.err" ||
  { cat "$WORK/from-theirs.err"; fail "merge-mp-partitions --from-hf of transformers' GPT-2"; }
grep -q "50257 vocabulary rows, float32) -> .*(T = 2 × P = 1, float32, 50304 vocabulary rows)" \
  "$WORK/from-theirs.err" || fail "--from-hf names what it read and wrote: $(cat "$WORK/from-theirs.err")"
printf 'First Citizen:\nTo be, or not to be, that is\n' > "$WORK/prompts.txt"
"$MDS_BIN/generate" "${model[@]}" "${openai_gelu[@]}" --load "$WORK/theirs-ckpt" --greedy \
  --out-seq-length 10 --sample-input-file "$WORK/prompts.txt" \
  --sample-output-file "$WORK/theirs-gen.txt" 2> "$WORK/theirs-gen.err" ||
  { cat "$WORK/theirs-gen.err"; fail "generate from the imported GPT-2"; }
"$MDS_PYTHON" - "$WORK" <<'PY' || fail "greedy continuations differ from transformers'"
import pathlib, re, sys, torch
from transformers import GPT2LMHeadModel, GPT2Tokenizer
work = pathlib.Path(sys.argv[1])
model = GPT2LMHeadModel.from_pretrained(work / "theirs").eval()
tokenizer = GPT2Tokenizer.from_pretrained(work / "hf")  # the bundled GPT-2 files
ours = re.findall(r"\nMegatron-LM:(.*?)\n(?=\nContext:|$)", (work / "theirs-gen.txt").read_text(),
                  re.S)
prompts = (work / "prompts.txt").read_text().splitlines(keepends=True)
assert len(ours) == len(prompts), ours
for prompt, continuation in zip(prompts, ours):
    ids = torch.tensor([tokenizer.encode(prompt)])
    out = model.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=50256)
    theirs = tokenizer.decode(out[0, ids.shape[1]:])
    assert continuation == theirs, (prompt, continuation, theirs)
    print(f"{prompt!r}: {continuation!r}")
PY
pass "generate from the imported GPT-2 continues prompts as transformers' generate does"
run_ranks finetune 4 --tensor-model-parallel-size 2 "${openai_gelu[@]}" --train-iters 3 \
  --load "$WORK/theirs-ckpt" --finetune
grep -q "successfully loaded checkpoint from .*theirs-ckpt at iteration 0" "$WORK/finetune.log" ||
  fail "pretrain --finetune did not load the imported GPT-2: $(cat "$WORK/finetune.log")"
[ "$(grep -c '"type":"train"' "$WORK/finetune.jsonl")" -ge 1 ] || fail "--finetune logged no step"
pass "pretrain --finetune at T=2 × D=2 trains from the imported GPT-2"

# --from-hf's bad inputs: one line, nothing written.
expect_failure "--from-hf and --load cannot both be given" "${from_hf[@]}" --from-hf "$WORK/theirs" \
  --load "$WORK/ckpt" --save "$WORK/nothing"
expect_failure "--num-layers 3 contradicts $WORK/theirs/config.json, whose 'n_layer' is 2" \
  "${from_hf[@]}" --from-hf "$WORK/theirs" --save "$WORK/nothing" --num-layers 3 "${gpt2_flags[@]}"
expect_failure "has no vocab.json and merges.txt" "${from_hf[@]}" --from-hf "$WORK/theirs" \
  --save "$WORK/nothing"
mkdir -p "$WORK/no-weights" && cp "$WORK/theirs/config.json" "$WORK/no-weights/"
expect_failure "$WORK/no-weights: no model.safetensors, model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json" \
  "${from_hf[@]}" --from-hf "$WORK/no-weights" \
  --save "$WORK/nothing" "${gpt2_flags[@]}"
[ ! -e "$WORK/nothing" ] || fail "--from-hf left $WORK/nothing behind"

# Bad inputs: one line naming the file.
cp -r "$WORK/theirs" "$WORK/bad"
head -c 5000 "$WORK/theirs/model.safetensors" > "$WORK/bad/model.safetensors"
expect_one_line() {  # log pattern what
  [ "$(wc -l < "$1")" = 1 ] && grep -q "$2" "$1" || { cat "$1"; fail "$3"; }
}
if "$probe" import "$WORK/bad" 50304 1 > /dev/null 2> "$WORK/bad.err"; then fail "truncated file accepted"; fi
expect_one_line "$WORK/bad.err" "bad/model.safetensors: the tensors end at byte" \
  "a truncated safetensors file is not named"
cp "$WORK/theirs/model.safetensors" "$WORK/bad/model.safetensors"
sed -i 's/"model_type": "gpt2"/"model_type": "bert"/' "$WORK/bad/config.json"
if "$probe" import "$WORK/bad" 50304 1 > /dev/null 2> "$WORK/bad.err"; then fail "bert accepted"; fi
expect_one_line "$WORK/bad.err" 'bad/config.json: model_type must be "gpt2"' \
  "a non-GPT-2 config is not named"
pass "a truncated safetensors file and a non-GPT-2 config fail with one line naming the file"
cp -r "$WORK/theirs-shards" "$WORK/bad-index"
"$MDS_PYTHON" - "$WORK/bad-index/model.safetensors.index.json" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
index["weight_map"]["transformer.extra"] = sorted(index["weight_map"].values())[0]
json.dump(index, open(sys.argv[1], "w"))
PY
if "$probe" import "$WORK/bad-index" 50304 1 > /dev/null 2> "$WORK/bad.err"; then fail "bad index accepted"; fi
expect_one_line "$WORK/bad.err" "bad-index/model.safetensors.index.json: tensor 'transformer.extra' is not in " \
  "an index naming a tensor its shard lacks is not named"
pass "an index listing a tensor its shard lacks fails with one line naming the index"
finish
