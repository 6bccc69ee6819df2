#!/usr/bin/env python3
"""--tokenizer-type PretrainedFromHF against transformers (the oracle upstream's _AutoTokenizer
calls: tokenizer.encode(text), tokenizer.decode(ids), len(tokenizer), eos_token_id).

Tokenizers built here with the `tokenizers` library and saved by transformers' save_pretrained:
  bloom     BLOOM's pipeline (Split with its regex, ByteLevel without regex; <unk> <s> </s> <pad>),
            a BPE trained on Shakespeare and multilingual text, BloomTokenizerFast's config (no
            clean-up of decoded spaces), plus an added plain token and an lstrip/rstrip special;
  template  the same model with a TemplateProcessing "<s> $A </s>" and a ByteLevel pre-tokenizer
            that adds a prefix space, PreTrainedTokenizerFast's config (clean-up on);
  neox      GPT-NeoX-20b's pipeline (NFC, ByteLevel with GPT-2's regex) as GPTNeoXTokenizerFast, whitespace
            runs as normalized added tokens, a decomposed added token normalized and one raw;
  gpt2      GPT2TokenizerFast over the bundled GPT-2 files (ByteLevel with GPT-2's regex).
Each is read by tests/tools/hf_tokenizer_probe (encode, decode, vocabulary size, eod) over texts
that stress the pre-tokenizers (Unicode whitespace and BLOOM's punctuation, scripts, emoji,
special tokens inside words) and the Shakespeare corpus; `preprocess` writes the same ids (plus
EOD) into a dataset, which BigScience's tr11 command line (tiny) trains on and generate continues
from; a model name resolves through a Hugging Face cache folder; unsupported
tokenizer.json parts fail with one line naming the field."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)
from transformers import (AutoTokenizer, BloomTokenizerFast, GPT2TokenizerFast, GPTNeoXTokenizerFast,
                          PreTrainedTokenizerFast)

BIN = pathlib.Path(os.environ["MDS_BIN"])
DATA = pathlib.Path(os.environ["MDS_DATA"])
TOOLS = pathlib.Path(os.environ["MDS_TEST_TOOLS"])
TESTS = pathlib.Path(os.environ["MDS_TESTS"])
BLOOM_PATTERN = " ?[^(\\s|[.,!?…。，、।۔،])]+"
MULTILINGUAL = [
    "Le château, près de la forêt… était vide! Où êtes-vous?",
    "東京は日本の首都です。大阪、京都，そして札幌。",
    "हिन्दी एक भाषा है। यह भारत में बोली जाती है।",
    "اللغة العربية، لغة جميلة۔ هل تتكلمها؟",
    "Emoji 👍🏽 and 🇫🇷 flags, zero\u200bwidth, combining é.",
    "tabs\tand\u00a0nbsp\u3000ideographic\u2028line\u2029para\u202fnarrow\u205fmath\u1680ogham",
    "(parens) | pipes || and ... dots!!! ?? ,, ،، ।। ۔۔ …… 。。 ，， 、、",
]
STRESS = [
    "", " ", "  ", "\n", "\n\n  \n", "a", " a", "a ", "  leading", "trailing  ", "Hello, world!  Two  spaces",
    "x ( y ) | z", "</s>", "<s></s><pad><unk>", "word</s>word", " </s> ", "a</s>\n", "<s> hello </s>",
    "the <mask> here", "extra_token_x inside", "extra_token_xy longer", "a <sep>   b", "\u3000<sep>\u3000x",
    "It's isn't we'll they're I'm you've 'quoted'", "don't , . ! ? 're 's",
    "numbers 123 4567 3.14 1,000,000", "mixed中文and English", "\u00a0\u00a0x", "\ud7ff\ue000\U0010ffff",
    "\x01\x02\x7f control", "\r\n windows\r\nline", " ?? ", "!" * 40, "a" * 300,
] + MULTILINGUAL + [
    # NFC: decomposed and precomposed, marks out of order, singletons, exclusions, Hangul jamo, a mark newer than
    # Unicode 9.0 (the tokenizers library's NFC data), the added tokens' decomposed forms.
    "cafe\u0301 caf\u00e9 Cafe\u0301s", "a\u0316\u0301\u0300 q\u0301\u0323 o\u031b\u0323\u0302", "\u212b \u2126 \u0958 \u2add",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 \ud55c\uad6d\uc5b4", "\u0d3b\u0301 a\u0d3b\u0316",
    "ne\u0301e and n\u00e9e, ne\u0301x and n\u00e9x, o\u0308ko\u0301 re\u0301sume\u0301",
]


def corpus_lines(limit):
    text = (DATA / "corpora/tinyshakespeare.txt").read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    return paragraphs[:limit]


def trained_bpe(pre_tokenizer, specials):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus_lines(400) + MULTILINGUAL * 3, trainer=trainer)
    return tokenizer


def bloom_pre_tokenizer(add_prefix_space=False):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=Regex(BLOOM_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False),
    ])


def build_bloom(folder):
    tokenizer = trained_bpe(bloom_pre_tokenizer(), ["<unk>", "<s>", "</s>", "<pad>"])
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = BloomTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                              eos_token="</s>", pad_token="<pad>")
    fast.add_tokens(["extra_token_x", "extra_token_xy"])  # plain added tokens, normalized
    fast.add_special_tokens({"additional_special_tokens": [
        AddedToken("<mask>", lstrip=True, rstrip=False, special=True),
        AddedToken("<sep>", lstrip=True, rstrip=True, special=True)]})
    fast.save_pretrained(folder)
    return fast


def build_template(folder):
    tokenizer = trained_bpe(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
                            ["<unk>", "<s>", "</s>"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(folder)
    return fast


def build_neox(folder):
    """GPT-NeoX-20b's pipeline: NFC, ByteLevel with GPT-2's regex, whitespace runs as normalized added tokens."""
    tokenizer = trained_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                            ["<|endoftext|>", "<|padding|>"])
    tokenizer.normalizer = normalizers.NFC()
    fast = GPTNeoXTokenizerFast(tokenizer_object=tokenizer)
    fast.add_tokens([" " * n for n in range(2, 6)] + ["ne\u0301e"])  # normalized: matched in NFC text
    fast.add_tokens([AddedToken("ne\u0301x", normalized=False)])  # matched in the raw text
    fast.save_pretrained(folder)
    return fast


def build_gpt2(folder):
    fast = GPT2TokenizerFast(vocab_file=str(DATA / "gpt2/vocab.json"), merges_file=str(DATA / "gpt2/merges.txt"))
    fast.save_pretrained(folder)
    return fast


def probe(name_or_path, texts, id_lists, work, env=None, extra_ids=0):
    src, dst = work / "probe_in.jsonl", work / "probe_out.jsonl"
    with open(src, "w", encoding="utf-8") as out:
        for text, ids in zip(texts, id_lists):
            out.write(json.dumps({"text": text, "ids": ids}) + "\n")
    subprocess.run([str(TOOLS / "hf_tokenizer_probe"), str(name_or_path), str(src), str(dst), str(extra_ids)],
                   check=True, env=env)
    lines = dst.read_text(encoding="utf-8").split("\n")[:-1]
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def check_tokenizer(name, folder, work):
    oracle = AutoTokenizer.from_pretrained(str(folder))
    texts = STRESS + corpus_lines(300)
    expected = [oracle.encode(text) for text in texts]
    # Decoding: the encodings, plus ids that do not form whole UTF-8 characters on their own.
    to_decode = expected + [ids[1:] for ids in expected if len(ids) > 1]
    info, results = probe(folder, texts + texts[:len(to_decode) - len(texts)], to_decode, work)
    assert info["vocab_size"] == len(oracle), f"{name}: vocab size {info['vocab_size']} vs {len(oracle)}"
    assert info["eod"] == oracle.eos_token_id, f"{name}: eod {info['eod']} vs {oracle.eos_token_id}"
    for text, want, got in zip(texts, expected, results):
        assert got["ids"] == want, f"{name}: {text!r}: ids {got['ids'][:30]} vs {want[:30]}"
    for ids, got in zip(to_decode, results):
        want = oracle.decode(ids)
        assert got["decoded"] == want, f"{name}: decode {ids[:20]}: {got['decoded']!r} vs {want!r}"
    print(f"ok: {name}: {len(texts)} texts encode and {len(to_decode)} id lists decode as transformers; "
          f"len {len(oracle)}, eod {oracle.eos_token_id}")
    return oracle


def read_mmidx(prefix):
    idx = pathlib.Path(str(prefix) + ".idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    dtype = {4: np.int32, 8: np.uint16}[idx[17]]
    n = int(np.frombuffer(idx, np.uint64, 1, 18)[0])
    sizes = np.frombuffer(idx, np.int32, n, 34)
    pointers = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    payload = np.fromfile(str(prefix) + ".bin", dtype=dtype)
    item = np.dtype(dtype).itemsize
    return [payload[p // item:p // item + s].tolist() for p, s in zip(pointers, sizes)]


def check_preprocess(folder, oracle, work):
    texts = [t for t in STRESS + corpus_lines(200) if t]
    jsonl = work / "docs.jsonl"
    with open(jsonl, "w", encoding="utf-8") as out:
        for text in texts:
            out.write(json.dumps({"text": text}) + "\n")
    prefix = work / "bloom_docs"
    run = subprocess.run([str(BIN / "preprocess"), "--input", str(jsonl), "--output-prefix", str(prefix),
                          "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", str(folder),
                          "--append-eod", "--workers", "2"], check=True, capture_output=True, text=True)
    documents = read_mmidx(str(prefix) + "_text_document")
    expected = [oracle.encode(t) + [oracle.eos_token_id] for t in texts]
    expected = [ids for ids in expected if len(ids) > 1]
    assert documents == expected, "preprocess: documents differ from transformers' encode + eos"
    assert "PretrainedFromHF" in run.stdout, run.stdout
    print(f"ok: preprocess --tokenizer-type PretrainedFromHF: {len(documents)} documents as transformers")


TINY_MODEL = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "32",
              "--max-position-embeddings", "32", "--embed-layernorm", "--position-embedding-type", "alibi",
              "--pad-vocab-size-to", "3072"]


def check_pretrain_and_generate(folder, oracle, work):
    """BigScience's tr11 (BLOOM 176B) command line at a tiny size trains with the tokenizer: its
    flags as tr11-176B-ml.slurm passes them (the pre-tokenizer's data through named weighted-split
    groups, bf16, ALiBi, the embedding LayerNorm, the padded vocabulary, batch-size ramp-up,
    sample-based schedule, tensorboard and kill-switch flags); the checkpoint's args name the
    tokenizer; generate continues prompts with it."""
    from checkpoint_objects import load
    ds_config = work / "ds.json"
    ds_config.write_text('{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0, '
                         '"zero_optimization": {"stage": 0}, "bf16": {"enabled": true}, "steps_per_print": 2000, '
                         '"wall_clock_breakdown": false}')
    data = work / "bloom_docs_text_document"
    (work / "train_paths.txt").write_text(f'"TRAIN: 1.0 0:0.9 {data}"\n')
    (work / "valid_paths.txt").write_text(f'"VALID: 1.0 0.9:1.0 {data}"\n')
    tokenizer = ["--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", str(folder)]
    tr11 = ["--pp-partition-method", "type:transformer|embedding", "--micro-batch-size", "2",
            "--rampup-batch-size", "4", "4", "64", "--global-batch-size", "8", "--train-samples", "120",
            "--init-method-std", "0.0048", "--sync-tp-duplicated-parameters", "--bf16", "--seed", "42",
            "--checkpoint-activations", "--abort-on-unmet-fused-kernel-constraints",
            "--kill-switch-path", str(work / "kill-switch"), "--optimizer", "adam", "--adam-beta1", "0.9",
            "--adam-beta2", "0.95", "--adam-eps", "1e-8", "--lr", "6e-5", "--min-lr", "6e-6",
            "--lr-decay-style", "cosine", "--lr-decay-samples", "100", "--lr-warmup-samples", "20",
            "--clip-grad", "1.0", "--weight-decay", "1e-1", "--exit-duration-in-mins", "5990",
            "--log-interval", "1", "--save", str(work / "ckpt"), "--save-interval", "10", "--eval-interval", "10",
            "--eval-iters", "1", "--tensorboard-dir", str(work / "tb"), "--tensorboard-queue-size", "5",
            "--log-timers-to-tensorboard", "--log-batch-size-to-tensorboard", "--log-validation-ppl-to-tensorboard",
            "--train-weighted-split-paths-path", str(work / "train_paths.txt"),
            "--valid-weighted-split-paths-path", str(work / "valid_paths.txt"), "--num-workers", "2",
            "--valid-num-workers", "0", "--data-impl", "mmap", "--distributed-backend", "nccl",
            "--deepspeed", "--deepspeed_config", str(ds_config), "--zero-stage", "0",
            "--deepspeed-activation-checkpointing"]
    run = subprocess.run([str(BIN / "pretrain"), *TINY_MODEL, *tokenizer, *tr11], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "padded vocab (size: 3004) with 68 dummy tokens (new size: 3072)" in run.stdout, run.stdout[:3000]
    assert "VALID loss at the end of training" in run.stdout, run.stdout[-2000:]
    tag = (work / "ckpt/latest").read_text().strip()
    state = load(work / "ckpt" / tag / "mp_rank_00_model_states.pt")
    args = state["args"]
    assert args.tokenizer_type == "PretrainedFromHF" and args.tokenizer_name_or_path == str(folder), args
    assert args.padded_vocab_size == 3072, args.padded_vocab_size
    (work / "prompts.txt").write_text("First Citizen:\nHello, world\n")
    subprocess.run([str(BIN / "generate"), *TINY_MODEL, *tokenizer, "--bf16", "--load", str(work / "ckpt"),
                    "--greedy", "--out-seq-length", "8", "--sample-input-file", str(work / "prompts.txt"),
                    "--sample-output-file", str(work / "generated.txt")], check=True, capture_output=True)
    generated = (work / "generated.txt").read_text(encoding="utf-8")
    assert generated.count("Megatron-LM:") == 2 and "Context:Hello, world" in generated, generated
    print("ok: tr11's command line (tiny) trains with PretrainedFromHF; the checkpoint's args name the tokenizer; "
          "generate continues prompts with it")
    # Without an eos token there is no end-of-document id for the flags that need one.
    no_eos = work / "no_eos"
    shutil.copytree(folder, no_eos)
    config = json.loads((no_eos / "tokenizer_config.json").read_text())
    config["eos_token"] = None
    (no_eos / "tokenizer_config.json").write_text(json.dumps(config))
    (no_eos / "special_tokens_map.json").unlink()
    run = subprocess.run([str(BIN / "pretrain"), *TINY_MODEL, "--tokenizer-type", "PretrainedFromHF",
                          "--tokenizer-name-or-path", str(no_eos), *tr11, "--eod-mask-loss"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "need the tokenizer's end-of-document token" in run.stderr, run.stderr[-2000:]
    print("ok: --eod-mask-loss with a tokenizer that has no eos token fails with one line")


def check_vocab_extra_ids(folders, work):
    """--vocab-extra-ids N: upstream's _AutoTokenizer passes additional_special_tokens=[<extra_id_0>, ...] to
    from_pretrained, replacing the files' lists (a listed token that is not an added token is not added)."""
    extra = [f"<extra_id_{i}>" for i in range(3)]
    texts = VARIANT_TEXTS + ["<extra_id_0>", "a <extra_id_2>b<extra_id_1>", "<extra_id_3> <mask> <sep> x"]
    listing = variant_folder(folders["gpt2"], work, "extra_ids", None,
                             lambda c: [c.pop("added_tokens_decoder"), c.update(additional_special_tokens=["<a>"])],
                             lambda m: m.update(additional_special_tokens=["<new>"]), (), None)
    cases = [(name, path, AutoTokenizer.from_pretrained(str(path), additional_special_tokens=extra))
             for name, path in (("bloom", folders["bloom"]), ("gpt2", folders["gpt2"]), ("listing", listing))]
    cases.append(("a bare tokenizer.json", folders["bloom"] / "tokenizer.json", PreTrainedTokenizerFast(
        tokenizer_file=str(folders["bloom"] / "tokenizer.json"), additional_special_tokens=extra)))
    for name, path, oracle in cases:
        expected = [oracle.encode(text) for text in texts]
        info, results = probe(path, texts, expected, work, extra_ids=len(extra))
        assert (info["vocab_size"], info["eod"]) == (len(oracle), oracle.eos_token_id), f"{name}: {info}"
        for text, want, got in zip(texts, expected, results):
            assert got["ids"] == want, f"{name}: {text!r}: {got['ids']} vs {want}"
            assert got["decoded"] == oracle.decode(want), f"{name}: decode {want}: {got['decoded']!r}"
    ds_config = work / "ds_extra_ids.json"
    ds_config.write_text('{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 2}')
    run = subprocess.run([str(BIN / "pretrain"), *TINY_MODEL, "--vocab-file", str(DATA / "gpt2/vocab.json"),
                          "--merge-file", str(DATA / "gpt2/merges.txt"), "--vocab-extra-ids", "3",
                          "--micro-batch-size", "2", "--train-iters", "1", "--lr", "1e-4", "--data-path",
                          str(work / "none"), "--deepspeed", "--deepspeed_config", str(ds_config)],
                         capture_output=True, text=True)
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1 and "only PretrainedFromHF adds the extra tokens" in lines[0], \
        run.stderr
    print(f"ok: --vocab-extra-ids adds transformers' extra ids to {len(cases)} tokenizers; GPT2BPETokenizer refuses it")


def check_hub_cache(folder, oracle, work):
    """A model name resolves through $HF_HUB_CACHE's models--ORG--NAME/snapshots/<refs/main>."""
    cache = work / "hub"
    snapshot = cache / "models--example--bloomish" / "snapshots" / "0123abc"
    shutil.copytree(folder, snapshot)
    (cache / "models--example--bloomish" / "refs").mkdir()
    (cache / "models--example--bloomish" / "refs" / "main").write_text("0123abc")
    env = dict(os.environ, HF_HUB_CACHE=str(cache))
    info, results = probe("example/bloomish", ["Hello, world!"], [[]], work, env)
    assert results[0]["ids"] == oracle.encode("Hello, world!"), results
    missing = subprocess.run([str(TOOLS / "hf_tokenizer_probe"), "example/absent", "/dev/null", str(work / "o")],
                             env=env, capture_output=True, text=True)
    assert missing.returncode != 0 and "does not download" in missing.stderr, missing.stderr
    print("ok: a model name resolves through the Hugging Face cache; an absent one fails with one line")


VARIANT_TEXTS = ["Hello world", " Hello", "a<|endoftext|>b", "a <|endoftext|> b", "<pad> x", "x<a> bc", "x<a>  bc",
                 "</s> and <s>", "x<new>y", "q  xy  z", "it 's done .", "a <a>b", "a  <a> b", ""]


def added(content, special, normalized, lstrip=False, rstrip=False, token_id=0):
    return dict(id=token_id, content=content, single_word=False, lstrip=lstrip, rstrip=rstrip,
                normalized=normalized, special=special)


def added_object(content, lstrip=False, rstrip=False, typed=True):
    token = dict(content=content, single_word=False, lstrip=lstrip, rstrip=rstrip, normalized=False)
    return dict(token, special=True, __type="AddedToken") if typed else token


PADDING = dict(strategy="BatchLongest", direction="Right", pad_to_multiple_of=None, pad_id=0, pad_type_id=0)


def neox_template(j):
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<|endoftext|>": {
                               "id": "<|endoftext|>", "ids": [50256], "tokens": ["<|endoftext|>"]}}}


# What transformers and the tokenizers library do around tokenizer.json, each on a variant of the
# GPT-2 folder: (name, tokenizer.json edit, tokenizer_config.json edit, special_tokens_map.json
# edit, files to drop, config.json model_type).
VARIANTS = [
    ("added ids are reassigned", lambda j: j["added_tokens"].extend(
        [added("<new>", True, False, token_id=60000), added("Hello", False, False, token_id=50258)]),
     lambda c: c.pop("added_tokens_decoder"), None, (), None),
    ("special tokens only in the vocabulary are added", lambda j: j.update(added_tokens=[]),
     lambda c: c.pop("added_tokens_decoder"), None, (), None),
    ("a pad token of the config is added", None, lambda c: c.update(pad_token="<pad>"), None, (), None),
    ("an eos token of the config nowhere else is added", None, lambda c: c.update(eos_token="</s>"),
     lambda m: m.update(eos_token="</s>"), (), None),
    ("added_tokens_decoder flags replace tokenizer.json's", None,
     lambda c: c["added_tokens_decoder"]["50256"].update(lstrip=True, rstrip=True), None, (), None),
    ("matching resumes after a match, not after its rstrip", lambda j: j["added_tokens"].extend(
        [added("<a>", True, False, rstrip=True, token_id=50257), added(" b", False, False, token_id=50258),
         added("  ", False, True, token_id=50259), added("xy", False, True, True, True, token_id=50260)]),
     lambda c: c.pop("added_tokens_decoder"), None, (), None),
    ("special_tokens_map.json is ignored beside added_tokens_decoder", None, None,
     lambda m: m.update(eos_token="!"), (), None),
    ("special_tokens_map.json wins without added_tokens_decoder", None, lambda c: c.pop("added_tokens_decoder"),
     lambda m: m.update(eos_token="!"), (), None),
    ("an explicit null eos removes the class default", None, lambda c: c.update(eos_token=None),
     None, ("special_tokens_map.json",), None),
    ("clean_up_tokenization_spaces null cleans nothing", None,
     lambda c: c.update(clean_up_tokenization_spaces=None), None, (), None),
    ("GPT-2's class forces the config's add_prefix_space", None, lambda c: c.update(add_prefix_space=True),
     None, (), None),
    ("GPT-2's class drops a file's prefix space the config does not ask for",
     lambda j: j["pre_tokenizer"].update(add_prefix_space=True), lambda c: c.pop("add_prefix_space"),
     None, (), None),
    ("GPT-NeoX's class builds its template from add_bos_token/add_eos_token", neox_template,
     lambda c: c.update(tokenizer_class="GPTNeoXTokenizer", add_bos_token=True, add_eos_token=True),
     None, (), None),
    ("GPT-NeoX's class drops the file's template", neox_template,
     lambda c: c.update(tokenizer_class="GPTNeoXTokenizer"), None, (), None),
    ("BLOOM's class defaults add <unk> <s> </s> <pad>", None,
     lambda c: [c.update(tokenizer_class="BloomTokenizerFast", add_prefix_space=True),
                c.pop("eos_token"), c.pop("bos_token"), c.pop("unk_token")], None, ("special_tokens_map.json",), None),
    ("an AddedToken attribute is swapped for the decoder's token of its text", None,
     lambda c: c.update(bos_token=added_object("<|endoftext|>", True, True)), None, (), None),
    ("an attribute whose text an earlier one has is left out", lambda j: j.update(added_tokens=[]),
     lambda c: [c.pop("added_tokens_decoder"), c.update(unk_token=None, eos_token=added_object("<|endoftext|>", True))],
     None, ("special_tokens_map.json",), None),
    ("an empty pad_token is no token", None, lambda c: c.update(pad_token=""), None, (), None),
    ("additional_special_tokens keeps a str and an AddedToken of one text", None,
     lambda c: c.update(additional_special_tokens=["<a>", added_object("<a>", lstrip=True)]), None, (), None),
    ("special_tokens_map.json's additional AddedToken joins the config's str", None,
     lambda c: [c.pop("added_tokens_decoder"), c.update(additional_special_tokens=["<a>"])],
     lambda m: m.update(additional_special_tokens=[added_object("<a>", lstrip=True, typed=False)]), (), None),
    ("tokenizer.json's padding token is GPT-2's pad token", lambda j: j.update(padding=dict(PADDING, pad_token="<pad>")),
     lambda c: c.pop("pad_token"), None, (), None),
    ("BLOOM's class keeps its pad token over tokenizer.json's padding", lambda j: j.update(padding=dict(PADDING, pad_token="<a>")),
     lambda c: [c.update(tokenizer_class="BloomTokenizerFast"), c.pop("pad_token")], None, ("special_tokens_map.json",),
     None),
    ("config.json's model_type names the class", None,
     lambda c: [c.pop("tokenizer_class"), c.pop("eos_token")], None, ("special_tokens_map.json",), "gpt2"),
]


def variant_folder(base, work, number, tj, cfg, stm, drop, model_type):
    folder = work / f"variant{number}"
    shutil.copytree(base, folder)
    for name in drop:
        (folder / name).unlink()
    for name, edit in (("tokenizer.json", tj), ("tokenizer_config.json", cfg), ("special_tokens_map.json", stm)):
        if edit is not None:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
            edit(data)
            (folder / name).write_text(json.dumps(data), encoding="utf-8")
    if model_type is not None:
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return folder


def check_transformers_variants(gpt2_folder, work):
    for number, (name, tj, cfg, stm, drop, model_type) in enumerate(VARIANTS):
        folder = variant_folder(gpt2_folder, work, number, tj, cfg, stm, drop, model_type)
        oracle = AutoTokenizer.from_pretrained(str(folder))
        expected = [oracle.encode(text) for text in VARIANT_TEXTS]
        info, results = probe(folder, VARIANT_TEXTS, expected, work)
        assert (info["vocab_size"], info["eod"]) == (len(oracle), oracle.eos_token_id), \
            f"{name}: len/eod {info} vs {len(oracle)}, {oracle.eos_token_id}"
        for text, want, got in zip(VARIANT_TEXTS, expected, results):
            assert got["ids"] == want, f"{name}: {text!r}: {got['ids']} vs {want}"
            assert got["decoded"] == oracle.decode(want), f"{name}: decode {want}: {got['decoded']!r}"
    print(f"ok: {len(VARIANTS)} variants of what transformers does around tokenizer.json encode, decode and "
          "count as transformers")
    refused = {
        "a class mds does not reproduce": (None, lambda c: c.update(tokenizer_class="LlamaTokenizer"), None, (),
                                           None, "tokenizer_class LlamaTokenizer is not one mds reproduces"),
        "no class anywhere": (None, lambda c: c.pop("tokenizer_class"), None, (), None,
                              "names the tokenizer class"),
        "another tokenizer.json version": (lambda j: j.update(version="2.0"), None, None, (), None, "version"),
        "a merge part missing from the vocabulary": (lambda j: j["model"]["vocab"].pop("Ġt"), None, None, (), None,
                                                     "not in the vocabulary"),
    }
    for number, (name, (tj, cfg, stm, drop, model_type, message)) in enumerate(refused.items()):
        folder = variant_folder(gpt2_folder, work, f"refused{number}", tj, cfg, stm, drop, model_type)
        run = subprocess.run([str(TOOLS / "hf_tokenizer_probe"), str(folder), "/dev/null", str(work / "o")],
                             capture_output=True, text=True)
        lines = run.stderr.strip().splitlines()
        assert run.returncode != 0 and len(lines) == 1 and message in lines[0], f"{name}: {run.stderr!r}"
    print(f"ok: {len(refused)} folders transformers cannot load (or mds does not reproduce) fail with one line")


def check_unicode_classes(work):
    """The GPT-2 regex's classes under the tokenizers library (Oniguruma, Unicode 14.0) for every
    code point: a character joins a run of letters, of digits, of other symbols or none."""
    out = work / "classes.bin"
    subprocess.run([str(TOOLS / "hf_tokenizer_probe"), "--classes", str(out)], check=True)
    ours = out.read_bytes()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)

    def theirs(cp):
        c = chr(cp)
        for lead, cls in (("a", 1), ("1", 2), ("!", 0)):
            if len(byte_level.pre_tokenize_str(lead + c)) == 1:
                return cls
        return 3

    differing = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and ours[cp] != theirs(cp)]
    assert not differing, f"{len(differing)} code points differ, first U+{differing[0]:04X}"
    print("ok: every code point's class in GPT-2's regex equals the tokenizers library's (Unicode 14.0)")


def check_refusals(folder, work):
    """Parts mds does not implement fail with one line naming the file and the field."""
    base = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    cases = {
        "normalizer": ({"normalizer": {"type": "NFKC"}}, "normalizer: type NFKC is not supported"),
        "normalizer step": ({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}},
                            "normalizer.normalizers[1]: type Lowercase is not supported"),
        "regex": ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated",
                                     "invert": False}}, "pre_tokenizer.pattern.Regex"),
        "model": ({"model": {"type": "WordPiece", "vocab": {}}}, "model.type: \"WordPiece\""),
        "unk": ({"model": dict(base["model"], unk_token="<unk>")}, "model.unk_token"),
        "decoder": ({"decoder": {"type": "Metaspace"}}, "decoder.type"),
    }
    for name, (patch, message) in cases.items():
        bad = work / f"bad_{name}"
        bad.mkdir()
        (bad / "tokenizer.json").write_text(json.dumps(dict(base, **patch)), encoding="utf-8")
        run = subprocess.run([str(TOOLS / "hf_tokenizer_probe"), str(bad), "/dev/null", str(work / "o")],
                             capture_output=True, text=True)
        lines = run.stderr.strip().splitlines()
        assert run.returncode != 0 and len(lines) == 1 and message in lines[0] and "tokenizer.json" in lines[0], \
            f"{name}: {run.stderr!r}"
    print(f"ok: {len(cases)} unsupported tokenizer.json parts fail with one line naming the field")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        folders = {name: work / name for name in ("bloom", "template", "neox", "gpt2")}
        bloom = build_bloom(folders["bloom"])
        build_template(folders["template"])
        build_neox(folders["neox"])
        build_gpt2(folders["gpt2"])
        oracles = {name: check_tokenizer(name, folder, work) for name, folder in folders.items()}
        assert len(bloom) == oracles["bloom"].__len__()
        check_preprocess(folders["bloom"], oracles["bloom"], work)
        check_pretrain_and_generate(folders["bloom"], oracles["bloom"], work)
        check_hub_cache(folders["bloom"], oracles["bloom"], work)
        check_refusals(folders["bloom"], work)
        check_transformers_variants(folders["gpt2"], work)
        check_vocab_extra_ids(folders, work)
        check_unicode_classes(work)


if __name__ == "__main__":
    main()
