"""The C++ NFC normalizer (libcore/text/unicode_nfc.cpp) against the `tokenizers` library 0.19.1.

1. Reruns scripts/gen_unicode_nfc_tables.py (under /usr/bin/python3, the command its header names)
   into a temporary file: it must equal the committed libcore/text/unicode_nfc_tables.inc.
2. Runs nfc_normalize through the test-only program tests/tools/unicode_nfc_probe on: every code
   point alone (surrogates skipped), the NFD of every decomposable one, each combining mark around
   marks of several classes, every canonical pair with marks between, Hangul jamo sequences, random
   strings mixing starters, marks, jamo and ASCII, and wikitext (as it is and in NFD). Every result
   must equal `tokenizers.normalizers.NFC().normalize_str`, and a string is_nfc_quick_yes passes
   must come back unchanged.

Run with MDS_PYTHON (a Python with `tokenizers` 0.19.1); MDS_DATA = the data folder,
MDS_TEST_TOOLS = the folder of the test-only programs.
"""
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

from tokenizers.normalizers import NFC

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(ROOT, "scripts", "gen_unicode_nfc_tables.py")
GENERATOR_PYTHON = "/usr/bin/python3"
TABLE = os.path.join(ROOT, "libcore", "text", "unicode_nfc_tables.inc")
DATA = os.environ.get("MDS_DATA", os.path.join(ROOT, "data"))
BIN = os.environ.get("MDS_BIN", os.path.join(ROOT, "build", "bin"))
TEST_TOOLS = os.environ.get("MDS_TEST_TOOLS", os.path.join(os.path.dirname(BIN), "tests", "tools"))
PROBE_MARKS = ["\u0301", "\u0316", "\u0334", "\u05b0"]  # classes 230, 220, 1, 10
HANGUL_JAMO = ([chr(c) for c in range(0x1100, 0x1200)] + [chr(c) for c in range(0xA960, 0xA97D)] +
               [chr(c) for c in range(0xD7B0, 0xD7FC)])


def check_table_is_reproducible():
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "unicode_nfc_tables.inc")
        subprocess.run([GENERATOR_PYTHON, GENERATOR, fresh], check=True)
        with open(fresh, encoding="ascii") as a, open(TABLE, encoding="ascii") as b:
            if a.read() != b.read():
                sys.exit(f"FAIL: {TABLE} differs from a fresh run of {GENERATOR}; regenerate it")
    print("ok: unicode_nfc_tables.inc is reproducible")


def scalar_values():
    return (chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def combining_marks():
    return [c for c in scalar_values() if unicodedata.combining(c)]


def canonical_pairs():
    """(first, second) of every canonical decomposition into two code points (Unicode 14.0)."""
    pairs = []
    for c in scalar_values():
        fields = unicodedata.decomposition(c).split()
        if len(fields) == 2 and not fields[0].startswith("<"):
            pairs.append((chr(int(fields[0], 16)), chr(int(fields[1], 16))))
    return pairs


def mark_cases():
    cases = []
    for mark in combining_marks():
        for probe in PROBE_MARKS:
            cases += ["a" + mark + probe, "a" + probe + mark, mark + probe, "e" + mark + "\u0301"]
    for first, second in canonical_pairs():
        cases.append(first + second)
        cases += [first + probe + second for probe in PROBE_MARKS]
    return cases


def hangul_cases(rng):
    cases = []
    for lead in range(0x1100, 0x1114):
        for vowel in range(0x1161, 0x1176):
            for trail in ("", "\u11a7", "\u11a8", "\u11c2", "\u11c3", "\u0301\u11a8"):
                cases.append(chr(lead) + chr(vowel) + trail)
    for syllable in range(0xAC00, 0xD7A4, 7):
        cases += [chr(syllable) + "\u11a8", chr(syllable) + "\u1161", chr(syllable) + "\u0301"]
    for _ in range(3000):
        cases.append("".join(rng.choice(HANGUL_JAMO + ["\uac00", "\uac01", "\u0301", "a"])
                             for _ in range(rng.randrange(1, 8))))
    return cases


def random_cases(rng, count):
    marks = combining_marks()
    pairs = canonical_pairs()
    starters = list("abcdeiouxyzAEIOU ,.\n\t0") + ["\u00e9", "\u00c5", "\u212b", "\u2126",
                                                   "\u0958", "\u0b47", "\u0b3e", "\u65e5",
                                                   "\U0001F600", "\U0001d15e", "\u0344", "\x00"]
    cases = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(1, 24)):
            kind = rng.random()
            if kind < 0.35:
                parts.append(rng.choice(marks))
            elif kind < 0.55:
                parts.append(rng.choice(starters))
            elif kind < 0.65:
                parts.append(rng.choice(HANGUL_JAMO))
            elif kind < 0.8:
                parts.append("".join(rng.choice(pairs)))
            elif kind < 0.9:
                parts.append(unicodedata.normalize("NFD", chr(rng.randrange(0xC0, 0x2000))))
            else:
                c = rng.randrange(0x110000)
                parts.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "x")
        cases.append("".join(parts))
    return cases


def data_cases():
    with open(os.path.join(DATA, "eval", "wikitext-2-test.txt"), encoding="utf-8") as f:
        wikitext = f.read()
    lines = [line for line in wikitext.split("\n") if line.strip()]
    return ([wikitext, unicodedata.normalize("NFD", wikitext)] + lines +
            [unicodedata.normalize("NFD", line) for line in lines])


def run_probe(strings):
    binary = os.path.join(TEST_TOOLS, "unicode_nfc_probe")
    if not os.path.exists(binary):
        sys.exit(f"FAIL: {binary} not found (build the unicode_nfc_probe target first)")
    with tempfile.TemporaryDirectory() as tmp:
        path_in, path_out = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
        with open(path_in, "wb") as f:
            for s in strings:
                data = s.encode("utf-8")
                f.write(b"%d\n" % len(data) + data)
        subprocess.run([binary, path_in, path_out], check=True)
        with open(path_out, "rb") as f:
            out = f.read()
    results, pos = [], 0
    while pos < len(out):
        newline = out.index(b"\n", pos)
        length, quick = out[pos:newline].split()
        end = newline + 1 + int(length)
        results.append((out[newline + 1:end].decode("utf-8"), quick == b"1"))
        pos = end
    if len(results) != len(strings):
        sys.exit(f"FAIL: the probe answered {len(results)} strings of {len(strings)}")
    return results


def compare(name, strings):
    normalizer = NFC()
    results = run_probe(strings)
    wrong = [(s, got) for s, (got, _) in zip(strings, results) if got != normalizer.normalize_str(s)]
    changed_quick = [s for s, (got, quick) in zip(strings, results) if quick and got != s]
    for s, got in wrong[:5]:
        print(f"  {[hex(ord(c)) for c in s[:12]]}: ours {[hex(ord(c)) for c in got[:12]]}, "
              f"tokenizers {[hex(ord(c)) for c in normalizer.normalize_str(s)[:12]]}")
    if wrong:
        sys.exit(f"FAIL: {name}: {len(wrong)} of {len(strings)} differ from tokenizers' NFC")
    if changed_quick:
        sys.exit(f"FAIL: {name}: {len(changed_quick)} strings passed is_nfc_quick_yes but changed")
    changed = sum(1 for s, (got, _) in zip(strings, results) if got != s)
    quick = sum(1 for _, q in results if q)
    print(f"ok: {name}: {len(strings)} strings equal tokenizers' NFC ({changed} changed by it, "
          f"{quick} quick yes)")
    return len(strings)


def main():
    check_table_is_reproducible()
    rng = random.Random(20240519)
    singles = list(scalar_values())
    total = compare("every code point", singles)
    total += compare("NFD of every code point",
                     [d for d in (unicodedata.normalize("NFD", c) for c in singles) if len(d) > 1])
    total += compare("marks and canonical pairs", mark_cases())
    total += compare("Hangul", hangul_cases(rng))
    randoms = random_cases(rng, 5000)
    total += compare("random strings", randoms + ["".join(randoms)])
    total += compare("wikitext-2 test", data_cases())
    print(f"ok: {total} strings in all")


if __name__ == "__main__":
    main()
