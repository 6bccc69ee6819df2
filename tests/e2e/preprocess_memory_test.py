#!/usr/bin/env python3
"""preprocess streams: 200 MB of JSON lines through stdin (more than any buffer it keeps) run with
a peak resident set far below the input size, both for repetitive text and for text full of
distinct words that keeps the tokenizer cache evicting."""
import os
import pathlib
import random
import resource
import subprocess
import sys

BIN = pathlib.Path(os.environ["MDS_BIN"])
DATA = pathlib.Path(os.environ["MDS_DATA"])
LIMIT_MB = 300  # input is 200 MB of repetitive lines, ~60 MB of distinct words, ~8 MB of one line


def run(name, chunks, work):
    command = [str(BIN / "preprocess"), "--input", "-", "--output-prefix", str(work / name),
               "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", str(DATA / "gpt2/vocab.json"),
               "--merge-file", str(DATA / "gpt2/merges.txt"), "--append-eod", "--workers", "2"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    sent = 0
    for chunk in chunks:
        process.stdin.write(chunk)
        sent += len(chunk)
    process.stdin.close()
    assert process.wait() == 0, f"{name}: preprocess failed"
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # max over children so far
    assert peak_mb < LIMIT_MB, f"{name}: peak RSS {peak_mb:.0f} MB for {sent >> 20} MB of input"
    print(f"ok: {name}: {sent >> 20} MB streamed, peak RSS so far {peak_mb:.0f} MB")


def repetitive():
    line = b'{"text": "' + b"All the world's a stage, and all the men and women merely players. " * 20 + b'"}\n'
    block = line * ((1 << 20) // len(line) + 1)
    for _ in range(200):
        yield block


def distinct_words():
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(60):
        lines = []
        for _ in range(1000):
            words = " ".join("".join(rng.choices(letters, k=rng.randint(6, 12))) for _ in range(120))
            lines.append('{"text": "%s"}\n' % words)
        yield "".join(lines).encode()


def one_long_line():
    yield b'{"text": "' + b"x" * (8 << 20) + b'"}\n'


def main():
    work = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"mds-memory-{os.getpid()}"
    work.mkdir()
    try:
        run("repetitive", repetitive(), work)
        run("distinct_words", distinct_words(), work)
        run("one_long_line", one_long_line(), work)
    finally:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    print("3 passed, 0 failed")


if __name__ == "__main__":
    sys.exit(main())
