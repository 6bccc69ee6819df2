"""The GPT-2 pre-tokenizer's Unicode tables and classifier against the `regex` package.

1. Reruns scripts/gen_unicode_tables.py into a temporary file: it must equal the committed
   libcore/text/unicode_tables.inc (so the table is reproducible and up to date).
2. Runs the C++ classifier and pre-tokenizer through the test-only program
   tests/tools/unicode_oracle_probe: the class of every code point must be what `regex` says, and on random text
   full of edge-case characters (plus a slice of wikitext) the pre-tokens must equal
   regex.findall's and the ids those of upstream's gpt2_tokenization.py, transcribed below.

Run with MDS_PYTHON (a Python whose `regex` is 2022.10.31); MDS_BIN = the build's bin folder,
MDS_DATA = the data folder.
"""
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile

import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(ROOT, "scripts", "gen_unicode_tables.py")
TABLE = os.path.join(ROOT, "libcore", "text", "unicode_tables.inc")
DATA = os.environ.get("MDS_DATA", os.path.join(ROOT, "data"))
BIN = os.environ.get("MDS_BIN", os.path.join(ROOT, "build", "bin"))
TEST_TOOLS = os.environ.get("MDS_TEST_TOOLS", os.path.join(os.path.dirname(BIN), "tests", "tools"))
PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_unicode_tables", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_table_is_reproducible():
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "unicode_tables.inc")
        subprocess.run([sys.executable, GENERATOR, fresh], check=True)
        with open(fresh, encoding="ascii") as a, open(TABLE, encoding="ascii") as b:
            if a.read() != b.read():
                sys.exit(f"FAIL: {TABLE} differs from a fresh run of {GENERATOR}; regenerate it")
    print("ok: unicode_tables.inc is reproducible")


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class UpstreamGpt2:
    """megatron/tokenizer/gpt2_tokenization.py's encode path, with a plain memo as its cache."""

    def __init__(self, vocab_file, merges_file):
        with open(vocab_file, encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(merges_file, encoding="utf-8") as f:
            bpe_data = f.read().split("\n")[1:-1]
        self.bpe_ranks = dict(zip([tuple(m.split()) for m in bpe_data], range(len(bpe_data))))
        self.byte_encoder = bytes_to_unicode()
        self.memo = {}

    def bpe(self, token):
        if token in self.memo:
            return self.memo[token]
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda p: self.bpe_ranks.get(p, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        self.memo[token] = word
        return word

    def encode(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            token = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder.get(t, 0) for t in self.bpe(token))
        return ids


def edge_case_text(rng, length):
    """Random text drawn mostly from characters where the classes or the regex are subtle."""
    pool = ([chr(c) for c in range(0x09, 0x0E)] + [" "] * 12 + ["\x1c", "\x1d", "\x1e", "\x1f"] +
            [chr(c) for c in (0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                              0x205F, 0x3000, 0x200B, 0x180E, 0xFEFF)] +
            list("'''sStTrReEvVmMlLdD") + list("abcXYZ0129.,!?-=_$") +
            ["é", "ß", "ǅ", "ʰ", "ª", "日", "本", "ㄱ", "٣", "½", "Ⅻ", "²", "\u0301", "\u0903",
             "😀", "\u200d", "𝔘", "\U00031350", "\U00011F04", "\U0001E4D0", "ﬁ", "ｆ", "\u00ad"])
    out = []
    while len(out) < length:
        if rng.random() < 0.05:  # an arbitrary code point, never a surrogate
            c = rng.randrange(0x110000)
            out.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "x")
        else:
            out.append(rng.choice(pool) * (1 + int(rng.random() < 0.2) * rng.randrange(1, 5)))
    return "".join(out)


def check_cpp_against_regex(generator):
    binary = os.path.join(TEST_TOOLS, "unicode_oracle_probe")
    if not os.path.exists(binary):
        sys.exit(f"FAIL: {binary} not found (build the unicode_oracle_probe target first)")
    rng = random.Random(1234)
    with open(os.path.join(DATA, "eval", "wikitext-2-test.txt"), encoding="utf-8") as f:
        wikitext = f.read()[:300_000]
    text = edge_case_text(rng, 150_000) + wikitext
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "pretok_in.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        subprocess.run([binary, tmp, os.path.join(DATA, "gpt2", "vocab.json"),
                        os.path.join(DATA, "gpt2", "merges.txt")], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "classes.bin"), "rb") as f:
            classes = f.read()
        with open(os.path.join(tmp, "pretok_out.txt"), encoding="ascii") as f:
            lengths = [int(line) for line in f]
        with open(os.path.join(tmp, "ids_out.txt"), encoding="ascii") as f:
            ids = [int(line) for line in f]

    if len(classes) != 0x110000:
        sys.exit(f"FAIL: classes.bin has {len(classes)} bytes, expected 0x110000")
    codes = {None: 0, "L": 1, "N": 2, "S": 3}  # CharClass values
    expected = generator.classify_all()
    bad = [cp for cp in range(0x110000) if classes[cp] != codes[expected[cp]]]
    if bad:
        sys.exit(f"FAIL: C++ char_class differs from regex at {len(bad)} code points, "
                 f"first U+{bad[0]:04X}")
    print("ok: C++ char_class equals regex for all 0x110000 code points")

    pieces = PATTERN.findall(text)
    expected_lengths = [len(p.encode("utf-8")) for p in pieces]
    if lengths != expected_lengths:
        first = next((i for i, (a, b) in enumerate(zip(lengths, expected_lengths)) if a != b),
                     min(len(lengths), len(expected_lengths)))
        sys.exit(f"FAIL: pre-token {first} differs from regex.findall: {pieces[first]!r}")
    print(f"ok: {len(pieces)} pre-tokens equal regex.findall")

    upstream = UpstreamGpt2(os.path.join(DATA, "gpt2", "vocab.json"),
                            os.path.join(DATA, "gpt2", "merges.txt"))
    expected_ids = upstream.encode(text)
    if ids != expected_ids:
        first = next((i for i, (a, b) in enumerate(zip(ids, expected_ids)) if a != b),
                     min(len(ids), len(expected_ids)))
        sys.exit(f"FAIL: GPT-2 ids differ from upstream's at position {first}")
    print(f"ok: {len(ids)} GPT-2 ids equal upstream's")


def main():
    check_table_is_reproducible()
    check_cpp_against_regex(load_generator())


if __name__ == "__main__":
    main()
