#!/usr/bin/env python3
"""Our preprocess output, read by numpy with upstream's MMIDIDX layout, holds exactly the token ids
that tiktoken (an independent GPT-2 BPE built offline from the bundled vocab/merges) gives each
document, plus EOD. Covers the bundled corpora (Shakespeare, WikiText-2, LAMBADA) and the Unicode
stress fixture. Upstream treats a literal <|endoftext|> as text, so tiktoken is told the same."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ["MDS_BIN"])
DATA = pathlib.Path(os.environ["MDS_DATA"])
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOD = 50256
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
          7: np.float64, 8: np.uint16}


def read_mmidx(prefix):
    """Reads <prefix>.idx/.bin exactly as upstream's MMapIndexedDataset lays them out."""
    idx = pathlib.Path(str(prefix) + ".idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    assert np.frombuffer(idx, np.uint64, 1, 9)[0] == 1, "version"
    dtype = DTYPES[idx[17]]
    n = int(np.frombuffer(idx, np.uint64, 1, 18)[0])
    d = int(np.frombuffer(idx, np.uint64, 1, 26)[0])
    sizes = np.frombuffer(idx, np.int32, n, 34)
    pointers = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    doc_idx = np.frombuffer(idx, np.int64, d, 34 + 12 * n)
    assert len(idx) == 34 + 12 * n + 8 * d, "idx size"
    payload = np.memmap(str(prefix) + ".bin", dtype=dtype, mode="r")
    itemsize = np.dtype(dtype).itemsize
    return [payload[p // itemsize:p // itemsize + s] for p, s in zip(pointers, sizes)], doc_idx


def gpt2_encoding():
    ranks = data_gym_to_mergeable_bpe_ranks(str(DATA / "gpt2/merges.txt"), str(DATA / "gpt2/vocab.json"))
    return tiktoken.Encoding("gpt2-offline", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOD})


def check_corpus(name, jsonl, encoding, work):
    prefix = work / name
    subprocess.run([str(BIN / "preprocess"), "--input", str(jsonl), "--output-prefix", str(prefix),
                    "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", str(DATA / "gpt2/vocab.json"),
                    "--merge-file", str(DATA / "gpt2/merges.txt"), "--append-eod", "--workers", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    documents, doc_idx = read_mmidx(str(prefix) + "_text_document")
    expected = []
    with open(jsonl, encoding="utf-8") as lines:
        for line in lines:
            ids = encoding.encode(json.loads(line)["text"], allowed_special=set(), disallowed_special=())
            if ids:
                expected.append(ids + [EOD])
    assert len(documents) == len(expected), f"{name}: {len(documents)} documents, expected {len(expected)}"
    assert list(doc_idx) == list(range(len(expected) + 1)), f"{name}: doc_idx"
    for number, (ours, theirs) in enumerate(zip(documents, expected)):
        if ours.tolist() != theirs:
            raise AssertionError(f"{name}: document {number} differs: {ours.tolist()[:20]} vs {theirs[:20]}")
    tokens = sum(len(d) for d in expected)
    print(f"ok: {name}: {len(expected)} documents, {tokens} tokens equal to tiktoken")


def main():
    encoding = gpt2_encoding()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        corpora = {
            "shakespeare": DATA / "corpora/tinyshakespeare.txt",
            "wikitext_test": DATA / "eval/wikitext-2-test.txt",
            "wikitext_valid": DATA / "eval/wikitext-2-valid.txt",
        }
        for name, text in corpora.items():
            jsonl = work / f"{name}.jsonl"
            subprocess.run([sys.executable, str(REPO / "scripts/text_to_jsonl.py"), str(text), str(jsonl)], check=True)
            check_corpus(name, jsonl, encoding, work)
        check_corpus("lambada", DATA / "eval/lambada_test.jsonl", encoding, work)
        check_corpus("unicode_stress", REPO / "tests/fixtures/preprocess/unicode_stress.jsonl", encoding, work)
    print("5 passed, 0 failed")


if __name__ == "__main__":
    main()
