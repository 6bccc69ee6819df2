"""Shared by evaluate_oracle_test.py and generate_oracle_test.py (holds no test): a tiny model
pretrained for a few iterations and saved by `pretrain`, its weights read back with torch, and an
independent float64 forward (reference_gpt.py) that gives logits; tiktoken built offline from the
bundled GPT-2 files as the tokenizer oracle.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_gpt  # noqa: E402

BIN = pathlib.Path(os.environ["MDS_BIN"])
DATA = pathlib.Path(os.environ["MDS_DATA"])
REPO = pathlib.Path(__file__).resolve().parents[2]
EOD = 50256
SEQ = 32
MAX_POSITIONS = 128
DIMS = reference_gpt.GptDims(num_layers=2, hidden_size=32, num_attention_heads=2, seq_length=SEQ,
                             padded_vocab_size=50304, max_position_embeddings=MAX_POSITIONS)
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)
    return condition


def finish(summary):
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(summary)


def tokenizer_flags():
    return ["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", str(DATA / "gpt2/vocab.json"),
            "--merge-file", str(DATA / "gpt2/merges.txt")]


def model_flags(work):
    """The tiny model's shape flags and --load, as evaluate and generate take them."""
    return ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "2",
            "--seq-length", str(SEQ), "--max-position-embeddings", str(MAX_POSITIONS),
            *tokenizer_flags(), "--load", str(work / "ckpt")]


def pretrain_tiny(work, iters=10):
    """A Shakespeare slice, `iters` iterations of the tiny model, saved to <work>/ckpt."""
    corpus = work / "corpus.txt"
    corpus.write_bytes((DATA / "corpora/tinyshakespeare.txt").read_bytes()[:60000])
    subprocess.run([sys.executable, str(REPO / "scripts/text_to_jsonl.py"), str(corpus),
                    str(work / "corpus.jsonl")], check=True)
    subprocess.run([str(BIN / "preprocess"), "--input", str(work / "corpus.jsonl"),
                    "--output-prefix", str(work / "shakes"), *tokenizer_flags(), "--append-eod",
                    "--workers", "1"], check=True, stdout=subprocess.DEVNULL)
    config = work / "ds.json"
    config.write_text(json.dumps({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
                                  "gradient_clipping": 1.0, "zero_optimization": {"stage": 0},
                                  "steps_per_print": 2000}))
    subprocess.run([str(BIN / "pretrain"), "--num-layers", "2", "--hidden-size", "32",
                    "--num-attention-heads", "2", "--seq-length", str(SEQ),
                    "--max-position-embeddings", str(MAX_POSITIONS), "--micro-batch-size", "2",
                    "--global-batch-size", "4", "--lr", "5e-3", "--train-iters", str(iters),
                    "--data-path", str(work / "shakes_text_document"), *tokenizer_flags(),
                    "--split", "90,8,2", "--eval-interval", "1000", "--eval-iters", "1",
                    "--save", str(work / "ckpt"), "--save-interval", str(iters), "--deepspeed",
                    "--deepspeed_config", str(config)],
                   check=True, cwd=work, stdout=subprocess.DEVNULL)
    return load_weights(work / "ckpt" / f"global_step{iters}")


def load_weights(folder):
    """Engine name -> float64 tensor from the layer files of one checkpoint folder."""
    weights = {}
    for name in reference_gpt.parameter_shapes(DIMS):
        if name.startswith("tied_modules.embed."):
            layer, key = 1, name[len("tied_modules.embed."):]
        else:
            spec, key = name.split(".", 1)
            layer = int(spec)
        state = torch.load(folder / f"layer_{layer:02d}-model_00-model_states.pt",
                           map_location="cpu")
        weights[name] = state[key].to(torch.float64)
    return weights


def logits(weights, tokens):
    """Float64 logits [len(tokens), Vp] of one sequence, from the reference layers."""
    ref = reference_gpt.GptReference(DIMS, dtype=torch.float64)
    t = torch.tensor([tokens], dtype=torch.long)
    x = weights[reference_gpt.WORD][t] + weights[reference_gpt.POSITION][torch.arange(len(tokens))]
    x = x.transpose(0, 1)
    with torch.no_grad():
        for layer in range(DIMS.num_layers):
            x = ref._layer(x, weights, layer)
        x = x.transpose(0, 1)
        final = DIMS.num_layers + 4
        x = F.layer_norm(x, (x.shape[-1],), weights[f"{final}.weight"], weights[f"{final}.bias"],
                         eps=DIMS.layernorm_epsilon)
        return (x @ weights[reference_gpt.WORD].t())[0]


def gpt2_encoding():
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    ranks = data_gym_to_mergeable_bpe_ranks(str(DATA / "gpt2/merges.txt"),
                                            str(DATA / "gpt2/vocab.json"))
    return tiktoken.Encoding("gpt2-offline", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOD})


def encode(encoding, text):
    return encoding.encode(text, allowed_special=set(), disallowed_special=())


def wikitext_detokenize(s):
    """data.md §6.2's WikiText detokenizer, step by step, with Python's re."""
    s = s.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "),
                 (" . ", ". "), (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        s = s.replace(a, b)
    for o, c in (("\\(", "\\)"), ("\\[", "\\]"), ("{", "}"), ('"', '"'), ("'", "'")):
        s = re.sub(o + r"\s*([^" + c + r"]*?)\s*" + c, o.replace("\\", "") + r"\1" +
                   c.replace("\\", ""), s)
    for a, b in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" \u00b0 ", "\u00b0"),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        s = s.replace(a, b)
    return s
