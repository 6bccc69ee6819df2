#!/usr/bin/env python3
"""The upstream path of --tokenizer-type PretrainedFromHF, timed: Megatron's preprocess_data.py
calls _AutoTokenizer.tokenize = transformers' `tokenizer.encode(text)` once per document (one
document a call, one worker process each). This script does that in one thread for every
document of a JSON-lines file, best of --repeats runs, and also the `tokenizers` library's own
batch encode (Rust; TOKENIZERS_PARALLELISM=false: one thread), and prints seconds for each.

  hf_tokenizer_baseline.py build FOLDER KIND            writes a tokenizer folder (KIND: gpt2 | bloom | neox)
  hf_tokenizer_baseline.py time FOLDER INPUT.jsonl      prints "encode SECONDS" and "batch SECONDS"
"""
import json
import os
import pathlib
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

ROOT = pathlib.Path(__file__).resolve().parents[2]


def build(folder, kind):
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    os.environ.setdefault("MDS_BIN", "")
    os.environ.setdefault("MDS_DATA", str(ROOT / "data"))
    os.environ.setdefault("MDS_TEST_TOOLS", "")
    os.environ.setdefault("MDS_TESTS", str(ROOT / "tests"))
    import hf_tokenizer_oracle_test as oracle
    {"gpt2": oracle.build_gpt2, "bloom": oracle.build_bloom, "neox": oracle.build_neox}[kind](pathlib.Path(folder))


def best(seconds_of, repeats=3):
    return min(seconds_of() for _ in range(repeats))


def time_folder(folder, input_path):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    texts = [json.loads(line)["text"] for line in open(input_path, encoding="utf-8")]

    def per_document():
        start = time.perf_counter()
        for text in texts:
            tokenizer.encode(text)
        return time.perf_counter() - start

    def batch():
        start = time.perf_counter()
        tokenizer.backend_tokenizer.encode_batch(texts)
        return time.perf_counter() - start

    print(f"encode {best(per_document):.3f}")
    print(f"batch {best(batch):.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    else:
        time_folder(sys.argv[2], sys.argv[3])
