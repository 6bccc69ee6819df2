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
finish
