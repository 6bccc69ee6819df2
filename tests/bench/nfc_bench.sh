#!/usr/bin/env bash
# NFC throughput: mds's nfc_normalize (libcore/text/unicode_nfc.*) next to the `tokenizers`
# library's NFC normalizer (normalizers.NFC().normalize_str, Rust, what a tokenizer.json with
# "normalizer": {"type": "NFC"} runs), in the same run on the same texts, one thread each:
#   ascii      the bundled Shakespeare ×8 (every byte ASCII)
#   wikitext   WikiText-2 test ×8 (0.06% of the bytes non-ASCII)
#   mixed_nfc  random words from Latin-1, Greek, Cyrillic, CJK, Hangul and Vietnamese alphabets
#   mixed_nfd  the same text in NFD (every accent and syllable to be recomposed)
# MB/s = input bytes / best wall time of the repeats. A benchmark: it asserts nothing about time.
# Usage: tests/bench/nfc_bench.sh [BUILD_DIR]   (default build/release; needs bin/nfc_bench)
# Environment: MDS_PYTHON (default build/oracle-venv/bin/python, with tokenizers 0.19.1).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$repo/build/release}"
python="${MDS_PYTHON:-$repo/build/oracle-venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" - "$repo/data" "$work" <<'PY'
import random, sys, unicodedata
data, work = sys.argv[1], sys.argv[2]
rng = random.Random(1)
shakespeare = open(f"{data}/corpora/tinyshakespeare.txt", encoding="utf-8").read()
wikitext = open(f"{data}/eval/wikitext-2-test.txt", encoding="utf-8").read()
alphabets = ["abcdefghijklmnopqrstuvwxyz", "àáâãäåèéêëìíîïòóôõöùúûüýÿçñ", "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώ",
             "абвгдежзийклмнопрстуфхцчшщъыьэюяё", "日本語中文字漢字東京大阪", "가각간갇갈감갑값갓강개객거건걸검겁것게겨격견결",
             "ạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ"]
words, size = [], 0
while size < 2_000_000:
    alphabet = rng.choice(alphabets)
    words.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(2, 9))))
    size += len(words[-1]) + 1
mixed = " ".join(words)
texts = {"ascii": shakespeare * 8, "wikitext": wikitext * 8, "mixed_nfc": mixed,
         "mixed_nfd": unicodedata.normalize("NFD", mixed)}
for name, text in texts.items():
    open(f"{work}/{name}", "w", encoding="utf-8").write(text)
PY

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| text | MB | output size | mds nfc_normalize MB/s | tokenizers NFC MB/s | ratio |"
echo "| --- | --- | --- | --- | --- | --- |"
for name in ascii wikitext mixed_nfc mixed_nfd; do
  file="$work/$name"
  read -r _ bytes ours out_bytes _ < <(taskset -c 0 "$build/bin/nfc_bench" --repeats 10 "$file")
  theirs=$(taskset -c 0 "$python" - "$file" <<'PY'
import sys, time
from tokenizers import normalizers
text = open(sys.argv[1], encoding="utf-8").read()
nfc = normalizers.NFC()
best = min((lambda s: (nfc.normalize_str(text), time.perf_counter() - s)[1])(time.perf_counter()) for _ in range(3))
print(f"{best:.6f}")
PY
)
  awk -v n="$name" -v b="$bytes" -v o="$ours" -v t="$theirs" -v ob="$out_bytes" 'BEGIN {
    printf "| %s | %.1f | %s | %.0f | %.1f | %.0f× |\n", n, b / 1e6, (ob == b ? "size kept" : "size changed"),
           b / 1e6 / o, b / 1e6 / t, t / o }'
done
