#!/usr/bin/env python3
"""GPT index maps on the 300-document dataset of data.md §8.2: our preprocess builds it, our
gpt_index_map_probe builds the train split's maps (split "969, 30, 1", 200 samples, seq_length 16,
seed 1234) and writes the .npy cache files, and numpy reads them back: the arrays start as §8.4 says,
the files are byte-identical to upstream's (sha256), and the first sample holds the spec's tokens."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

BIN = pathlib.Path(os.environ["MDS_BIN"])
DATA = pathlib.Path(os.environ["MDS_DATA"])
TOOLS = pathlib.Path(os.environ["MDS_TEST_TOOLS"])

JSONL_SHA256 = "1f59a67f8b62bb73aa649407b226ad9d7f3def7afdeaec92e9283f72559cb55f"
NPY_SHA256 = {
    "doc_idx": "6760bf277523d6ae72de3ab5c0d2ad4d058f7efdb05698e58d86fcd30346bb7a",
    "sample_idx": "25804b6ece9631cd10ec1168cfa483ed97758ab4f4ff470615cc88e8fa1a23a6",
    "shuffle_idx": "2817cadf40c41207049922ecbbb12ed9ee037eaaf585938f5314c02e02cdca24",
}
SAMPLE0 = [9907, 1139, 23748, 2124, 12343, 13, 50256, 24941, 1271, 18693, 1139, 23748, 2124, 31811,
           13, 50256, 24941]


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def write_jsonl(path):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for i in range(300):
            out.write('{"text": "Document number %d says hello %s.", "meta": %d}\n' % (i, "x" * (i % 7), i))
    assert sha256(path) == JSONL_SHA256, "the generated JSONL differs from data.md §8.2"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        write_jsonl(work / "docs.jsonl")
        subprocess.run([str(BIN / "preprocess"), "--input", str(work / "docs.jsonl"),
                        "--output-prefix", str(work / "docs"), "--tokenizer-type", "GPT2BPETokenizer",
                        "--vocab-file", str(DATA / "gpt2/vocab.json"),
                        "--merge-file", str(DATA / "gpt2/merges.txt"), "--append-eod"],
                       check=True, stdout=subprocess.DEVNULL)
        prefix = str(work / "docs_text_document")
        probe = subprocess.run([str(TOOLS / "gpt_index_map_probe"), prefix, "969, 30, 1", "train",
                                "200", "16", "1234"], check=True, capture_output=True, text=True)
        result = json.loads(probe.stdout)
        log = probe.stderr.splitlines()
        check(" > building shuffle index with split [0, 155) and [155, 311) ..." in log, f"log: {log}")
        check(result["range"] == [0, 291], f"train range {result['range']}")
        check(result["size"] == 311, f"size {result['size']}")
        stem = prefix + "_train_indexmap_200ns_16sl_1234s"
        for name in NPY_SHA256:
            check(result[name] == f"{stem}_{name}.npy", f"{name} path {result[name]}")

        doc_idx = np.load(result["doc_idx"], allow_pickle=False, mmap_mode="r")
        sample_idx = np.load(result["sample_idx"], allow_pickle=False, mmap_mode="r")
        shuffle_idx = np.load(result["shuffle_idx"], allow_pickle=False, mmap_mode="r")
        check(doc_idx.dtype == np.int32 and doc_idx.shape == (582,), f"doc_idx {doc_idx.dtype} {doc_idx.shape}")
        check(doc_idx[:10].tolist() == [40, 100, 137, 232, 221, 214, 69, 186, 104, 191],
              f"doc_idx starts {doc_idx[:10].tolist()}")
        check(sample_idx.dtype == np.int32 and sample_idx.shape == (312, 2),
              f"sample_idx {sample_idx.dtype} {sample_idx.shape}")
        check(sample_idx[:5].tolist() == [[0, 0], [1, 7], [3, 6], [5, 5], [7, 2]],
              f"sample_idx starts {sample_idx[:5].tolist()}")
        check(shuffle_idx.dtype == np.uint32 and shuffle_idx.shape == (311,),
              f"shuffle_idx {shuffle_idx.dtype} {shuffle_idx.shape}")
        check(shuffle_idx[:10].tolist() == [138, 1, 6, 96, 91, 154, 55, 121, 108, 27],
              f"shuffle_idx starts {shuffle_idx[:10].tolist()}")
        for name, expected in NPY_SHA256.items():
            check(sha256(result[name]) == expected, f"{name}.npy sha256 {sha256(result[name])}")
        check(result["sample0"] == SAMPLE0, f"ds[0] = {result['sample0']}")

        # A second run reuses the cache files unchanged.
        again = subprocess.run([str(TOOLS / "gpt_index_map_probe"), prefix, "969, 30, 1", "train",
                                "200", "16", "1234"], check=True, capture_output=True, text=True)
        check(not any("WARNING" in line for line in again.stderr.splitlines()), "cache not reused")
        check(json.loads(again.stdout)["sample0"] == SAMPLE0, "ds[0] from the reused cache")
    print("ok: gpt index maps of the 300-document dataset equal upstream's")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        sys.exit(1)
