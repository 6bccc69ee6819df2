"""Differential test of JsonFieldExtractor against Python's own json.loads.

Generates seeded random JSON lines (valid ones, and mutations of them that are mostly invalid),
runs them through the json_fields_probe test tool and through the rules upstream's
tools/preprocess_data.py applies, and requires the same verdict and the same values for every line:

  s = line.decode('utf-8')      # strict, as the text-mode file read
  obj = json.loads(s + '\\n')   # upstream passes the line with its newline
  text = obj[key]               # KeyError; TypeError when obj is no dict
  must be a str                 # the tokenizer raises TypeError otherwise
  text.encode('utf-8')          # a lone surrogate raises UnicodeEncodeError

Environment: MDS_PYTHON runs this script; MDS_TEST_TOOLS is the folder holding json_fields_probe.
"""

import json
import multiprocessing
import os
import random
import re
import subprocess
import sys

SEED = 20240611
VALID_LINES = 10000
MUTATED_LINES = 20000
MAX_DEPTH = 979  # JsonFieldExtractor::kMaxDepth

KEY_SETS = [
    ["text"],
    ["text", "meta", "t\u00e9xt", "text"],
]


def python_verdict(line, keys):
    """The values upstream would tokenize, or None when upstream aborts on this line."""
    try:
        s = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    results = []
    for document in (s + "\n", s):
        try:
            obj = json.loads(document)
        except (ValueError, RecursionError):
            results.append(None)
            continue
        if not isinstance(obj, dict):
            results.append(None)
            continue
        values = []
        for key in keys:
            value = obj.get(key)
            if not isinstance(value, str):
                values = None
                break
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                values = None
                break
            values.append(value)
        results.append(values)
    # The trailing newline must not matter, or comparing lines without terminators would be wrong.
    assert results[0] == results[1], (line, results)
    return results[0]


# ---------------------------------------------------------------------------------------------
# Generation

STRING_PIECES = [
    "a", "text", " ", "hello world", "0", "\u00e9", "\u65e5\u672c", "\U0001F600", "\u2028",
    "\u0085", "\ufeff", "\x7f", "'", "/", "{", "}", "[", "]", ":", ",",
    "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t",
    "\\u0041", "\\u00e9", "\\u00E9", "\\u0000", "\\u001f", "\\u2028", "\\uFEFF",
    "\\ud83d\\ude00", "\\uD83D\\uDE00", "\\udbff\\udfff", "\\ud800\\udc00",
    "\\ud83d\\ud83d\\ude00",
]
# Pieces that make a document invalid (or its "text" unusable); only sloppy documents get them.
BAD_PIECES = ["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d\\u0041", "\\x", "\\u12",
              "\\u12g4", "\\U0041", "\t", "\x01", "\\'", "\\ud800\\u12"]
KEYS = ["text", "text", "text", "meta", "t\u00e9xt", "t\\u00e9xt", "t\\u0065xt", "Text", "text ",
        "tex", "id", "", "\\ud800", "te\\\"xt", "m\\u0065ta"]
NUMBERS = ["0", "-0", "1", "-1", "42", "123456789012345678901234567890", "0.5", "-0.0", "1e5",
           "1E+5", "1e-05", "2.5E-3", "123.456e789", "NaN", "Infinity", "-Infinity",
           "7" * 4300, "-" + "7" * 4300, "7" * 4301 + ".0", "7" * 4301 + "e3"]
BAD_NUMBERS = ["01", "1.", ".5", "1e", "1e+", "+1", "-", "--1", "0x1F", "1_000", "nan", "-NaN",
               "Inf", "7" * 4301, "-" + "7" * 4301]
LITERALS = ["true", "false", "null"]
BAD_LITERALS = ["True", "nul", "tru", "None"]
WHITESPACE = ["", "", "", " ", "  ", "\t", "\n", "\r", "\r\n"]
BAD_WHITESPACE = ["\x0c", "\u00a0", "\x0b"]


class Style:
    """How likely a generated document breaks a rule; most documents break none."""

    def __init__(self, rng):
        self.bad = 0.04 if rng.random() < 0.3 else 0.0


def pick(rng, style, good, bad):
    return rng.choice(bad) if rng.random() < style.bad else rng.choice(good)


def gen_whitespace(rng, style):
    if rng.random() < 0.3:
        return pick(rng, style, WHITESPACE, BAD_WHITESPACE)
    return "" if rng.random() < 0.5 else " "


def gen_string_body(rng, style, length=None):
    count = rng.randrange(0, 8) if length is None else length
    return "".join(pick(rng, style, STRING_PIECES, BAD_PIECES) for _ in range(count))


def gen_value(rng, style, depth):
    kind = rng.random()
    if kind < 0.4 or depth > 6:
        if rng.random() < 0.7:
            return '"' + gen_string_body(rng, style) + '"'
        return pick(rng, style, NUMBERS, BAD_NUMBERS)
    if kind < 0.55:
        return pick(rng, style, LITERALS, BAD_LITERALS)
    if kind < 0.75:
        items = [gen_value(rng, style, depth + 1) for _ in range(rng.randrange(0, 4))]
        ws = gen_whitespace(rng, style)
        return "[" + ws + ("," + gen_whitespace(rng, style)).join(items) + ws + "]"
    return gen_object(rng, style, depth + 1)


def gen_object(rng, style, depth, with_text=False):
    members = []
    for _ in range(rng.randrange(0, 5)):
        key = rng.choice(KEYS)
        members.append('"' + key + '"' + gen_whitespace(rng, style) + ":"
                       + gen_whitespace(rng, style) + gen_value(rng, style, depth))
    if with_text:
        members.insert(rng.randrange(0, len(members) + 1),
                       '"text": "' + gen_string_body(rng, style, rng.randrange(0, 20)) + '"')
        for key, chance in (("meta", 0.5), ("t\u00e9xt", 0.2), ("t\\u00e9xt", 0.2)):
            if rng.random() < chance:
                value = gen_string_body(rng, style, rng.randrange(0, 5))
                members.insert(rng.randrange(0, len(members) + 1), f'"{key}": "{value}"')
    ws = gen_whitespace(rng, style)
    return "{" + ws + ("," + gen_whitespace(rng, style)).join(members) + ws + "}"


def gen_document(rng):
    style = Style(rng)
    if rng.random() < 0.85:
        body = gen_object(rng, style, 1, with_text=rng.random() < 0.9)
    else:
        body = gen_value(rng, style, 1)
    return (gen_whitespace(rng, style) + body + gen_whitespace(rng, style)).encode("utf-8")


INSERTS = [b'"', b"\\", b",", b":", b"{", b"}", b"[", b"]", b"u", b"0", b"-", b".", b"e", b" ",
           b"\x00", b"\x1f", b"\t", b"\n", b"\r", b"N", b"I", b"\xef\xbb\xbf", b"\xc3\xa9",
           b"\xe2\x80\xa8", b"\xed\xa0\x80", b"\xc3", b"\x80", b"\\ud800", b"\\udc00", b"\\u",
           b"\"text\": \"x\"", b", \"text\": 1", b"null", b"1e5"]


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.random()
        position = rng.randrange(0, len(data) + 1)
        if op < 0.3 and data:
            del data[min(position, len(data) - 1)]
        elif op < 0.65:
            data[position:position] = rng.choice(INSERTS)
        elif op < 0.8 and data:
            data[min(position, len(data) - 1)] = rng.randrange(0, 256)
        elif op < 0.9 and data:
            end = rng.randrange(position, len(data) + 1)
            data[position:position] = data[position:end]
        else:
            data = data[:position]
    if rng.random() < 0.05:
        data = b"\xef\xbb\xbf" + data
    return bytes(data)


def nested(depth, open_text, close_text):
    return b'{"text": "a", "n": ' + open_text * (depth - 1) + b"0" + close_text * (depth - 1) + b"}"


HANDWRITTEN = [
    b"", b" ", b"\t\r\n", b"{}", b"[]", b'"text"', b"0", b"-0", b"NaN", b"null",
    b'{"text": "a"}', b'{"text": "a"}\x00', b'\xef\xbb\xbf{"text": "a"}',
    b' \xef\xbb\xbf{"text": "a"}',
    b'{"text": "a"} ', b'{"text": "a"} x', b'{"text": "a"}{}', b'{"text": "a",}', b'{"text" "a"}',
    b'{"text": "\\ud800"}', b'{"text": "\\ud800\\u0041"}', b'{"text": "\\ud800\\uZZZZ"}',
    b'{"text": "\\ud83d\\ude00"}', b'{"text": "x", "text": 5}', b'{"text": 5, "text": "x"}',
    b'{"t\\u0065xt": "escaped key"}', b'{"text": "a\\u0000b"}', b'{"text": "\xed\xa0\x80"}',
    b'{"text": "\xc0\xaf"}', b'{"text": "\xf4\x90\x80\x80"}',
    nested(500, b"[", b"]"), nested(500, b'{"k": ', b"}"),
    nested(5000, b"[", b"]"), nested(5000, b'{"k": ', b"}"),
    b"[" * 100000, b'{"text": "a", "n": ' + b"[" * 100000,
]


# ---------------------------------------------------------------------------------------------
# Checks


def run_probe(probe, keys, lines):
    stdin = b"".join(line.hex().encode("ascii") + b"\n" for line in lines)
    result = subprocess.run([probe] + keys, input=stdin, stdout=subprocess.PIPE, check=True)
    outputs = result.stdout.decode("utf-8").split("\n")
    assert outputs[-1] == "", "probe output does not end in a newline"
    outputs.pop()
    assert len(outputs) == len(lines), (len(outputs), len(lines))
    return outputs


def compare(probe, keys, lines):
    outputs = run_probe(probe, keys, lines)
    mismatches = 0
    accepted = 0
    for line, output in zip(lines, outputs):
        expected = python_verdict(line, keys)
        if output.startswith("OK "):
            got = json.loads(output[3:])
            accepted += 1
        else:
            assert output.startswith("ERROR "), output
            got = None
        if got != expected:
            mismatches += 1
            if mismatches <= 20:
                print(f"MISMATCH keys={keys} line={line[:300]!r}\n  python: {expected!r}"
                      f"\n  probe:  {output[:300]}", file=sys.stderr)
    print(f"keys {keys}: {len(lines)} lines, {accepted} accepted, {mismatches} mismatches")
    return mismatches, accepted


def encode_in_worker(line):
    try:
        json.loads(line)
        return True
    except RecursionError:
        return False


def main():
    tools = os.environ.get("MDS_TEST_TOOLS")
    if not tools and os.environ.get("MDS_BIN"):
        # MDS_BIN is <build>/bin; the probe lives in <build>/tests/tools.
        build = os.path.dirname(os.path.normpath(os.environ["MDS_BIN"]))
        tools = os.path.join(build, "tests", "tools")
    if not tools:
        sys.exit("MDS_TEST_TOOLS is not set (the folder of the json_fields_probe binary)")
    probe = os.path.join(tools, "json_fields_probe")

    rng = random.Random(SEED)
    valid = [gen_document(rng) for _ in range(VALID_LINES)]
    mutated = [mutate(rng, rng.choice(valid)) for _ in range(MUTATED_LINES)]
    lines = HANDWRITTEN + valid + mutated
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(4300)  # the default, whatever PYTHONINTMAXSTRDIGITS says
    else:
        # Pythons before the limit (3.10.6 and older) accept any integer: skip those lines.
        lines = [line for line in lines if not re.search(rb"[0-9]{4301}", line)]

    failures = 0
    for keys in KEY_SETS:
        mismatches, accepted = compare(probe, keys, lines)
        failures += mismatches
        # Guard against a generator that stopped producing interesting documents.
        minimum = len(lines) // (10 if len(keys) == 1 else 100)
        assert accepted >= minimum, f"only {accepted} lines accepted with keys {keys}"

    # Nesting: the probe must stop exactly where upstream's RecursionError starts.
    outputs = run_probe(probe, ["text"], [nested(MAX_DEPTH, b"[", b"]"),
                                          nested(MAX_DEPTH + 1, b"[", b"]")])
    if not (outputs[0].startswith("OK ") and outputs[1].startswith("ERROR ")):
        print(f"nesting limit: depth {MAX_DEPTH} -> {outputs[0]!r}, {MAX_DEPTH + 1} -> "
              f"{outputs[1][:100]!r}", file=sys.stderr)
        failures += 1
    # Where upstream's RecursionError starts depends on the Python stack above json.loads, so the
    # pool is made straight from main(), as in preprocess_data.py (main() -> multiprocessing.Pool
    # -> imap(encoder.encode, fin, 25)).
    depths = list(range(MAX_DEPTH - 40, MAX_DEPTH + 40))
    threshold = None
    with multiprocessing.get_context("fork").Pool(1) as pool:
        documents = ["[" * d + "]" * d + "\n" for d in depths]
        for depth, ok in zip(depths, pool.imap(encode_in_worker, documents, 25)):
            if not ok:
                threshold = depth
                break
    print(f"python {sys.version.split()[0]}: pool-worker json.loads fails from depth {threshold}")
    if sys.version_info[:2] == (3, 11) and threshold != MAX_DEPTH + 1:
        print(f"expected CPython 3.11 to fail from depth {MAX_DEPTH + 1}", file=sys.stderr)
        failures += 1

    if failures:
        sys.exit(f"{failures} mismatches with Python")
    print("OK")


if __name__ == "__main__":
    main()
