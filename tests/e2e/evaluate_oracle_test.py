#!/usr/bin/env python3
"""evaluate end to end against independent oracles (data.md §6, §8.6).

A tiny model is pretrained for a few iterations and saved; `evaluate` then scores
* WIKITEXT103 on a slice of the bundled data/eval/wikitext-2-test.txt, with overlapping windows
  and a short last micro-batch: the summed loss must equal a float64 PyTorch forward
  (reference_gpt.py) over windows built here from tiktoken's tokens of the detokenized text within
  1e-5 relative; the token counts, the ratio and upstream's result lines must match exactly;
* LAMBADA on a few bundled lines plus lines built so that the model's own prediction is the last
  token: the number correct must equal the oracle's argmax count;
and bad inputs (missing checkpoint, missing file, a bad JSON line) fail with one clear line.
Environment: MDS_BIN (programs), MDS_DATA (data/), run by a python with torch and tiktoken.
"""

import json
import math
import subprocess
import tempfile
import pathlib

import evaluate_lib as lib
from evaluate_lib import check

TOLERANCE = 1e-5


def run_evaluate(work, args, expect_ok=True):
    result = subprocess.run([str(lib.BIN / "evaluate"), *lib.model_flags(work), *args],
                            capture_output=True, text=True, cwd=work,
                            env={"OMP_NUM_THREADS": "1"})
    if expect_ok and not check(result.returncode == 0,
                               f"evaluate {args} failed: {result.stderr.strip()}"):
        return None
    return result


def oracle_windows(tokens, seq, overlap):
    """data.md §6.2 step 4, written out: (window tokens, scored label positions)."""
    targets = len(tokens) - 1
    count = max(math.ceil(max(targets - overlap, 0) / overlap) + 1, 1)
    for k in range(count):
        start = k * overlap
        chunk = tokens[start:start + seq + 1]
        real = len(chunk)
        chunk = chunk + [lib.EOD] * (seq + 1 - real)
        scored = [p for p in range(seq) if p + 1 < real and (k == 0 or p >= seq - overlap)]
        yield chunk, scored


def check_wikitext(work, weights, encoding):
    raw = (lib.DATA / "eval/wikitext-2-test.txt").read_bytes()[:6000].decode("utf-8", "ignore")
    path = work / "wikitext-slice.txt"
    path.write_text(raw, encoding="utf-8")
    overlap = 12
    result = run_evaluate(work, ["--task", "WIKITEXT103", "--valid-data", str(path),
                                 "--micro-batch-size", "3", "--overlapping-eval", str(overlap),
                                 "--results-file", str(work / "wiki.json")])
    if result is None:
        return
    ours = json.loads((work / "wiki.json").read_text())
    tokens = lib.encode(encoding, lib.wikitext_detokenize(raw))
    original = len(raw.strip().split(" "))
    check(ours["num_tokenized_tokens"] == len(tokens),
          f"tokenized tokens {ours['num_tokenized_tokens']} vs tiktoken {len(tokens)}")
    check(ours["num_original_tokens"] == original,
          f"original tokens {ours['num_original_tokens']} vs {original}")
    total, windows = 0.0, 0
    for chunk, scored in oracle_windows(tokens, lib.SEQ, overlap):
        windows += 1
        if not scored:
            continue
        out = lib.logits(weights, chunk[:-1])
        losses = torch_cross_entropy(out, chunk[1:])
        total += sum(losses[p] for p in scored)
    check(ours["windows"] == windows, f"windows {ours['windows']} vs {windows}")
    error = abs(ours["total_loss"] - total) / abs(total)
    print(f"WIKITEXT103: {windows} windows, total loss ours {ours['total_loss']:.9f} "
          f"oracle {total:.9f} rel {error:.2e}")
    check(error <= TOLERANCE, f"total loss {ours['total_loss']} vs oracle {total}")
    avg = total / (len(tokens) - 1)
    ratio = (len(tokens) - 1) / (original - 1)
    line = (f" validation results on WIKITEXT103 | avg loss: {avg:.4E} | "
            f"ppl: {math.exp(min(20, avg)):.4E} | "
            f"adjusted ppl: {math.exp(min(20, avg * ratio)):.4E} | token ratio: {ratio} |")
    lines = result.stdout.splitlines()
    check(line in lines, f"result line {line!r} not in stdout:\n{result.stdout}")
    if line in lines:
        at = lines.index(line)
        check(lines[at - 1] == "-" * (len(line) + 1) == lines[at + 1], "dashes around the line")
    check(lines[-1] == "done :-)", "last line 'done :-)'")
    check(f" > number of original tokens: {original}, number of detokenized tokens: "
          f"{len(tokens)}" in lines, "token count line")


def torch_cross_entropy(out, labels):
    import torch
    import torch.nn.functional as F
    return F.cross_entropy(out, torch.tensor(labels), reduction="none").tolist()


def check_lambada(work, weights, encoding):
    texts = [json.loads(line)["text"] for line in
             (lib.DATA / "eval/lambada_test.jsonl").read_text(encoding="utf-8").splitlines()[:40]]
    texts = [t for t in texts if len(lib.encode(encoding, t)) <= lib.MAX_POSITIONS][:6]
    # Lines whose last token is the model's own clear favourite: they must count as correct.
    for text in list(texts[:4]):
        context = lib.encode(encoding, text)[:-1]
        out = lib.logits(weights, context)[-1]
        top = out.topk(2)
        if top.values[0] - top.values[1] < 1e-3:
            continue
        built = encoding.decode(context + [int(top.indices[0])])
        if lib.encode(encoding, built) == context + [int(top.indices[0])]:
            texts.append(built)
    path = work / "lambada_slice.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    correct, undecided = 0, 0
    for text in texts:
        tokens = lib.encode(encoding, text)
        out = lib.logits(weights, tokens[:-1])[-1]
        top = out.topk(2)
        undecided += int(top.values[0] - top.values[1] < 1e-4)
        correct += int(int(top.indices[0]) == tokens[-1])
    result = run_evaluate(work, ["--task", "LAMBADA", "--valid-data", str(path),
                                 "--seq-length", str(lib.MAX_POSITIONS), "--micro-batch-size", "2",
                                 "--results-file", str(work / "lambada.json")])
    if result is None:
        return
    ours = json.loads((work / "lambada.json").read_text())
    print(f"LAMBADA: {len(texts)} examples, correct ours {ours['correct']} oracle {correct}")
    check(undecided == 0, "an oracle near-tie makes the LAMBADA check ambiguous")
    check(ours["total"] == len(texts) and ours["correct"] == correct,
          f"LAMBADA {ours} vs oracle {correct}/{len(texts)}")
    check(correct > 0 and correct < len(texts), f"LAMBADA check not discriminating: {correct}")
    line = (f" validation results on LAMBADA | number correct: {float(correct):.4E} | "
            f"total examples: {float(len(texts)):.4E} | avg accuracy: "
            f"{correct / len(texts):.4E}")
    check(line in result.stdout.splitlines(), f"LAMBADA line {line!r} not in:\n{result.stdout}")


def check_bad_inputs(work):
    wiki = work / "wikitext-slice.txt"

    def fails(args, text, flags=None):
        cmd = [str(lib.BIN / "evaluate"), *(flags or lib.model_flags(work)), *args]
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
        lines = result.stderr.strip().splitlines()
        check(result.returncode != 0 and len(lines) == 1 and text in lines[0],
              f"{args}: expected one error line with {text!r}, got rc {result.returncode} "
              f"{result.stderr!r}")

    no_ckpt = [f if f != str(work / "ckpt") else str(work / "nowhere") for f in lib.model_flags(work)]
    fails(["--task", "WIKITEXT103", "--valid-data", str(wiki)], "nowhere: no such checkpoint folder",
          no_ckpt)
    fails(["--task", "WIKITEXT103", "--valid-data", str(work / "wiki-missing.txt")],
          "wiki-missing.txt")
    bad = work / "lambada_bad.jsonl"
    bad.write_text('{"text": "one two"}\n{"text": "three" four}\n')
    fails(["--task", "LAMBADA", "--valid-data", str(bad)], "lambada_bad.jsonl:2: invalid JSON")
    fails(["--task", "LAMBADA"], "--valid-data")
    fails(["--task", "RACE", "--valid-data", str(bad)], "--task")
    fails(["--task", "WIKITEXT103", "--valid-data", str(wiki), "--hidden-size", "64"],
          "hidden_size is 32 in the checkpoint but 64 on the command line")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        weights = lib.pretrain_tiny(work)
        encoding = lib.gpt2_encoding()
        check_wikitext(work, weights, encoding)
        check_lambada(work, weights, encoding)
        check_bad_inputs(work)
    lib.finish("evaluate matches the PyTorch and tiktoken oracles")


if __name__ == "__main__":
    main()
