#!/usr/bin/env python3
"""tiktoken's GPT-2 encoder on the same corpora as tokenizer_bench, one thread, MB/s.

The gpt2 ranks are built offline from data/gpt2/{vocab.json,merges.txt} (no download) with the
GPT-2 split pattern, and special tokens are plain text (like upstream Megatron). Each corpus is
encoded about --megabytes worth of times in 5 rounds and the best round is reported (like
tokenizer_bench); the token count of one pass is printed for comparison with tokenizer_bench's.

Setup: /usr/bin/python3 -m venv --system-site-packages /tmp/v && /tmp/v/bin/pip install --no-deps
tiktoken; then /tmp/v/bin/python tests/bench/tokenizer_baseline.py
"""
import argparse
import os
import time

import tiktoken
import tiktoken.load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data")
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
DEFAULT_CORPORA = [
    os.path.join(DATA, "corpora", "tinyshakespeare.txt"),
    os.path.join(DATA, "eval", "wikitext-2-test.txt"),
    os.path.join(DATA, "eval", "wikitext-2-valid.txt"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", default=DEFAULT_CORPORA)
    parser.add_argument("--vocab", default=os.path.join(DATA, "gpt2", "vocab.json"))
    parser.add_argument("--merges", default=os.path.join(DATA, "gpt2", "merges.txt"))
    parser.add_argument("--megabytes", type=float, default=50)
    args = parser.parse_args()

    start = time.perf_counter()
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(args.merges, args.vocab)
    encoding = tiktoken.Encoding("gpt2-offline", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                 special_tokens={})
    print(f"tiktoken {tiktoken.__version__}, load: {(time.perf_counter() - start) * 1e3:.1f} ms")
    print(f"{'corpus':<28} {'MB':>9} {'tokens':>9} {'MB/s':>11}")
    for path in args.corpora:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        size = len(text.encode("utf-8"))
        rounds = 5
        passes = max(1, int(args.megabytes * 1e6 / rounds / size))
        tokens = encoding.encode(text, allowed_special=set(), disallowed_special=())  # warm up
        best = 0.0
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(passes):
                encoding.encode(text, allowed_special=set(), disallowed_special=())
            best = max(best, size * passes / 1e6 / (time.perf_counter() - start))
        print(f"{os.path.basename(path):<28} {size / 1e6:9.2f} {len(tokens):9d} {best:11.1f}")


if __name__ == "__main__":
    main()
