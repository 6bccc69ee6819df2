#!/usr/bin/env python3
"""generate end to end against an independent oracle (data.md §7).

A tiny model is pretrained and saved; then
* greedy continuation of prompts (a file, three lines, the last without a newline, two prompts per
  micro-batch) must equal, byte for byte, the records built here from a float64 PyTorch forward
  (reference_gpt.py) that takes the argmax over the real vocabulary at every position of the whole
  sequence, with tiktoken as tokenizer; --recompute and standard input give the same bytes;
* unconditional sampling (--num-samples, --genfile) writes json.dumps lines with the keys text,
  length, finished; the same --seed gives the same file, another seed another file;
* on a terminal (a pty here) upstream's interactive prompt continues a typed prompt greedily as the
  oracle does, and `stop` exits;
* bad input fails with one clear line.
Environment: MDS_BIN (programs), MDS_DATA (data/), run by a python with torch and tiktoken.
"""

import json
import pathlib
import subprocess
import tempfile

import evaluate_lib as lib
from evaluate_lib import check

VOCAB = 50257
OUT = 7


def run_generate(work, args, stdin=None):
    result = subprocess.run([str(lib.BIN / "generate"), *lib.model_flags(work), *args],
                            input=stdin, capture_output=True, text=True, cwd=work,
                            env={"OMP_NUM_THREADS": "1"})
    check(result.returncode == 0, f"generate {args} failed: {result.stderr.strip()}")
    return result


def oracle_record(weights, encoding, line):
    tokens = lib.encode(encoding, line)
    last = min(lib.SEQ - 1, len(tokens) + OUT - 1)
    near_tie = False
    while len(tokens) <= last:
        out = lib.logits(weights, tokens)[-1][:VOCAB]
        top = out.topk(2)
        near_tie = near_tie or float(top.values[0] - top.values[1]) < 1e-4
        tokens.append(int(top.indices[0]))
        if tokens[-1] == lib.EOD:
            break
    text = encoding.decode(tokens)
    return "\nContext:" + line + "\n\nMegatron-LM:" + text[len(line):] + "\n", near_tie


def check_greedy(work, weights, encoding):
    prompts = work / "prompts.txt"
    prompts.write_text("First Citizen:\nBefore we proceed any further, hear me\nYou are all")
    result = run_generate(work, ["--greedy", "--out-seq-length", str(OUT), "--micro-batch-size",
                                 "2", "--sample-input-file", str(prompts), "--sample-output-file",
                                 str(work / "greedy.out")])
    if result.returncode != 0:
        return
    lines = ["First Citizen:\n", "Before we proceed any further, hear me\n", "You are all"]
    expected, ties = "", False
    for line in lines:
        record, tie = oracle_record(weights, encoding, line)
        expected += record
        ties = ties or tie
    check(not ties, "an oracle near-tie makes the greedy check ambiguous")
    got = (work / "greedy.out").read_text()
    check(got == expected, f"greedy records differ from the oracle:\n{got!r}\n{expected!r}")
    print(f"greedy: {len(lines)} prompts equal to the float64 oracle's argmax continuation")
    again = run_generate(work, ["--greedy", "--out-seq-length", str(OUT), "--recompute"],
                         stdin=prompts.read_text())
    check(again.stdout == expected, "--recompute from standard input differs from the cached run")


def check_interactive(work, weights, encoding):
    """On a terminal generate prompts like upstream; `stop` ends it. Driven through a pty."""
    import os
    import pty
    import select

    prompt = "Context prompt (stop to exit) >>> "
    leader, follower = pty.openpty()
    process = subprocess.Popen([str(lib.BIN / "generate"), *lib.model_flags(work), "--greedy",
                                "--out-seq-length", str(OUT)],
                               stdin=follower, stdout=follower, stderr=subprocess.PIPE, cwd=work,
                               env={"OMP_NUM_THREADS": "1"})
    os.close(follower)
    output = b""

    def read_until(marker, seconds=60):
        nonlocal output
        while marker.encode() not in output:
            ready, _, _ = select.select([leader], [], [], seconds)
            if not ready:
                return False
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                return False
            if not chunk:
                return False
            output += chunk
        return True

    check(read_until(prompt), f"no interactive prompt on a terminal: {output!r}")
    os.write(leader, b"First Citizen:\n")
    check(read_until("Megatron-LM:") and read_until(prompt),
          f"no continuation and second prompt: {output!r}")
    os.write(leader, b"stop\n")
    code = process.wait(timeout=60)
    os.close(leader)
    check(code == 0, f"`stop` exited {code}: {process.stderr.read()!r}")
    text = output.decode().replace("\r\n", "\n")
    record, tie = oracle_record(weights, encoding, "First Citizen:")
    continuation = record.split("\n\nMegatron-LM:", 1)[1]
    check(tie or f"Megatron-LM: {continuation}" in text,
          f"interactive continuation differs from the oracle's {continuation!r}: {text!r}")
    print("interactive: a terminal gets upstream's prompt, the greedy continuation, `stop` exits")


def check_sampling(work):
    def sample(seed, name):
        run_generate(work, ["--num-samples", "5", "--micro-batch-size", "2", "--top_k", "50",
                            "--top_p", "0.9", "--temperature", "0.8", "--seed", str(seed),
                            "--genfile", str(work / name)])
        return (work / name).read_text()

    first, second, other = sample(5, "a.jsonl"), sample(5, "b.jsonl"), sample(6, "c.jsonl")
    check(first == second, "the same --seed gave different samples")
    check(first != other, "another --seed gave the same samples")
    records = [json.loads(line) for line in first.splitlines()]
    check(len(records) == 5, f"{len(records)} samples, expected 5")
    for line, record in zip(first.splitlines(), records):
        check(list(record) == ["text", "length", "finished"], f"keys of {line}")
        check(line == json.dumps(record), f"not json.dumps' own text: {line}")
        check(0 <= record["length"] <= lib.SEQ - 1, f"length of {line}")
        check(record["finished"] or record["length"] == lib.SEQ - 1, f"unfinished {line}")
    print("sampling: seeded and reproducible, json.dumps lines")


def check_bad_inputs(work):
    def fails(args, text):
        result = subprocess.run([str(lib.BIN / "generate"), *lib.model_flags(work), *args],
                                capture_output=True, text=True, cwd=work)
        lines = result.stderr.strip().splitlines()
        check(result.returncode != 0 and len(lines) == 1 and text in lines[0],
              f"{args}: expected one error line with {text!r}, got {result.stderr!r}")

    fails(["--sample-input-file", str(work / "missing.txt")], "missing.txt: no such file")
    fails(["--num-samples", "2", "--sample-input-file", str(work / "prompts.txt")], "not both")
    fails(["--top_p", "1.5", "--num-samples", "1"], "--top_p")
    # Python's text mode raises on bytes that are not UTF-8 before any prompt is used.
    (work / "latin1.txt").write_bytes(b"First prompt\r\nSecond\rcaf\xe9 au lait\n")
    fails(["--sample-input-file", str(work / "latin1.txt"), "--sample-output-file",
           str(work / "latin1-out.txt")], "latin1.txt:3: not valid UTF-8")
    check(not (work / "latin1-out.txt").exists(), "no output for a rejected prompt file")
    # Piped prompts are read once the model is loaded (its log lines come first).
    with open(work / "latin1.txt", "rb") as piped:
        result = subprocess.run([str(lib.BIN / "generate"), *lib.model_flags(work),
                                 "--sample-output-file", str(work / "latin1-out.txt")],
                                capture_output=True, text=True, cwd=work, stdin=piped)
    last = result.stderr.strip().splitlines()[-1:]
    check(result.returncode != 0 and last and "standard input:3: not valid UTF-8" in last[0],
          f"piped non-UTF-8 prompts: {result.stderr!r}")
    check(not (work / "latin1-out.txt").exists(), "no output for rejected piped prompts")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        weights = lib.pretrain_tiny(work)
        encoding = lib.gpt2_encoding()
        check_greedy(work, weights, encoding)
        check_interactive(work, weights, encoding)
        check_sampling(work)
        check_bad_inputs(work)
    lib.finish("generate matches the PyTorch oracle")


if __name__ == "__main__":
    main()
