#!/usr/bin/env bash
# merge-datasets against an independent writer/reader: numpy code that follows upstream's
# megatron/data/indexed_dataset.py layout writes the inputs and the expected merged files, the real
# binary merges, and numpy reads the result back the way MMapIndexedDataset does.
# Environment: MDS_BIN (folder of built programs), MDS_PYTHON (python with numpy).
set -euo pipefail

: "${MDS_BIN:?set MDS_BIN to the folder holding merge-datasets}"
PYTHON="${MDS_PYTHON:-python3}"
MERGE="$MDS_BIN/merge-datasets"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mds_merge_e2e.XXXXXX")"  # datasets only
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/mds_merge_e2e_logs.XXXXXX")"
trap 'rm -rf "$WORK" "$LOGS"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$PYTHON" -c 'import numpy' 2>/dev/null || fail "$PYTHON has no numpy (scripts/test.sh sets up the oracle venv)"

cat >"$WORK/layout.py" <<'EOF'
"""Upstream's index layouts (megatron/data/indexed_dataset.py), written with numpy only."""
import struct
import sys

import numpy as np

CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 7, np.uint16: 8}
TYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
         7: np.float64, 8: np.uint16}


def write_mmap(prefix, dtype, docs):
    """docs: list of documents, each a list of token lists (sentences)."""
    sizes, doc_idx = [], [0]
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            for sentence in doc:
                f.write(np.array(sentence, dtype=dtype).tobytes(order="C"))
                sizes.append(len(sentence))
            doc_idx.append(len(sizes))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[dtype]))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        pointers = np.array(sizes, dtype=np.int64) * np.dtype(dtype).itemsize
        pointers = np.concatenate([[0], np.cumsum(pointers)[:-1]]) if len(sizes) else pointers
        f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


def write_legacy(prefix, docs):
    """IndexedDatasetBuilder: always int32, offsets in elements, every array int64."""
    sizes, doc_idx, data_offsets, dim_offsets = [], [0], [0], [0]
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            for sentence in doc:
                f.write(np.array(sentence, dtype=np.int32).tobytes())
                data_offsets.append(data_offsets[-1] + len(sentence))
                sizes.append(len(sentence))
                dim_offsets.append(dim_offsets[-1] + 1)
            doc_idx.append(len(sizes))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"TNTIDX\x00\x00")
        f.write(struct.pack("<QQQ", 1, 4, 4))
        f.write(struct.pack("<QQQ", len(data_offsets) - 1, len(sizes), len(doc_idx)))
        for array in (dim_offsets, data_offsets, sizes, doc_idx):
            f.write(np.array(array, dtype=np.int64).tobytes())


def read_mmap(prefix):
    """MMapIndexedDataset.Index.__init__ + __getitem__, minus torch."""
    with open(prefix + ".idx", "rb") as stream:
        assert stream.read(9) == b"MMIDIDX\x00\x00"
        assert struct.unpack("<Q", stream.read(8)) == (1,)
        (code,) = struct.unpack("<B", stream.read(1))
        (n,) = struct.unpack("<Q", stream.read(8))
        (d,) = struct.unpack("<Q", stream.read(8))
        offset = stream.tell()
    buffer = memoryview(np.memmap(prefix + ".idx", mode="r", order="C"))
    sizes = np.frombuffer(buffer, dtype=np.int32, count=n, offset=offset)
    pointers = np.frombuffer(buffer, dtype=np.int64, count=n, offset=offset + sizes.nbytes)
    doc_idx = np.frombuffer(buffer, dtype=np.int64, count=d,
                            offset=offset + sizes.nbytes + pointers.nbytes)
    data = np.memmap(prefix + ".bin", mode="r", order="C")
    dtype = TYPES[code]
    items = [np.frombuffer(data, dtype=dtype, count=int(s), offset=int(p)).tolist()
             for p, s in zip(pointers, sizes)] if n else []
    return dtype, sizes.tolist(), pointers.tolist(), doc_idx.tolist(), items


def read_legacy(prefix):
    """IndexedDataset.read_index + __getitem__."""
    with open(prefix + ".idx", "rb") as f:
        assert f.read(8) == b"TNTIDX\x00\x00"
        assert struct.unpack("<Q", f.read(8)) == (1,)
        code, element_size = struct.unpack("<QQ", f.read(16))
        length, s = struct.unpack("<QQ", f.read(16))
        (doc_count,) = struct.unpack("<Q", f.read(8))
        read = lambda n: np.frombuffer(f.read(8 * n), dtype=np.int64)
        dim_offsets, data_offsets, sizes, doc_idx = read(length + 1), read(length + 1), read(s), read(doc_count)
    items = []
    with open(prefix + ".bin", "rb") as f:
        for i in range(length):
            f.seek(int(data_offsets[i]) * element_size)
            items.append(np.frombuffer(f.read(4 * int(sizes[i])), dtype=TYPES[code]).tolist())
    return sizes.tolist(), doc_idx.tolist(), items


def flatten(docs):
    return [sentence for doc in docs for sentence in doc]


PART1 = [[[15496, 995, 50256]], [[1026, 338, 50256]]]
PART2 = [[[10, 11], [12, 13, 14]], [[15]], [[65, 50256]]]
WIDE = [[[70000, 1]], [[2, 3, 4]]]


def make(work):
    write_mmap(work + "/p1", np.uint16, PART1)
    write_mmap(work + "/empty", np.uint16, [])
    write_mmap(work + "/p2", np.uint16, PART2)
    write_mmap(work + "/whole", np.uint16, PART1 + PART2)
    write_mmap(work + "/b", np.uint16, [[[65, 50256]]])
    write_mmap(work + "/wide1", np.int32, WIDE)
    write_mmap(work + "/wide2", np.int32, PART1)
    write_mmap(work + "/wide_whole", np.int32, WIDE + PART1)
    write_legacy(work + "/c1", PART1)
    write_legacy(work + "/c2", PART2)
    write_legacy(work + "/c_whole", PART1 + PART2)


def check(work):
    dtype, sizes, pointers, doc_idx, items = read_mmap(work + "/out")
    assert dtype == np.uint16, dtype
    assert sizes == [3, 3, 2, 3, 1, 2], sizes
    assert pointers == [0, 6, 12, 16, 22, 24], pointers
    assert doc_idx == [0, 1, 2, 4, 5, 6], doc_idx
    assert items == flatten(PART1 + PART2), items
    dtype, sizes, pointers, doc_idx, items = read_mmap(work + "/wide_out")
    assert dtype == np.int32 and items == flatten(WIDE + PART1), items
    assert pointers == [0, 8, 20, 32], pointers
    sizes, doc_idx, items = read_legacy(work + "/c_out")
    assert items == flatten(PART1 + PART2), items
    assert doc_idx == [0, 1, 2, 4, 5, 6], doc_idx
    spec = bytes.fromhex(
        "4d4d49444944580000010000000000000008050000000000000006000000000000000300000003000000"
        "020000000300000003000000000000000000000006000000000000000c00000000000000100000000000"
        "00001600000000000000000000000000000001000000000000000200000000000000030000000000000004"
        "000000000000000500000000000000")
    assert open(work + "/spec.idx", "rb").read() == spec, "spec example .idx differs"
    assert open(work + "/spec.bin", "rb").read().hex() == \
        "883ce30350c40204520150c4410050c4883ce30350c40204520150c4"


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
EOF

"$PYTHON" "$WORK/layout.py" make "$WORK"

# --- successful merges ---------------------------------------------------------------------------
"$MERGE" --datasets "$WORK/p1" "$WORK/empty" "$WORK/p2" --output-prefix "$WORK/out" >"$LOGS/stdout"
grep -qF "Merging ['$WORK/p1', '$WORK/empty', '$WORK/p2']" "$LOGS/stdout" || fail "Merging line"
grep -qF "    concat $WORK/p2 size=4 for a total size of 6" "$LOGS/stdout" || fail "concat line"
grep -qF "Output prefix: $WORK/out" "$LOGS/stdout" || fail "Output prefix line"
grep -qE "^Time to merge: [0-9.e-]+$" "$LOGS/stdout" || fail "Time to merge line"
grep -qF "Merged 3 datasets to $WORK/out" "$LOGS/stdout" || fail "Merged line"
grep -qF "5 documents, 6 sequences, 14 tokens, 28 bytes" "$LOGS/stdout" || fail "summary line"
cmp "$WORK/out.idx" "$WORK/whole.idx" || fail "merged .idx differs from the whole dataset's"
cmp "$WORK/out.bin" "$WORK/whole.bin" || fail "merged .bin differs from the whole dataset's"

"$MERGE" --datasets "$WORK/p1" "$WORK/b" "$WORK/p1" --output-prefix "$WORK/spec" >/dev/null
"$MERGE" --datasets "$WORK/wide1" "$WORK/wide2" --output-prefix "$WORK/wide_out" >/dev/null
cmp "$WORK/wide_out.idx" "$WORK/wide_whole.idx" || fail "int32 merge .idx"
cmp "$WORK/wide_out.bin" "$WORK/wide_whole.bin" || fail "int32 merge .bin"
"$MERGE" --datasets "$WORK/c1" "$WORK/c2" --output-prefix "$WORK/c_out" >/dev/null
cmp "$WORK/c_out.idx" "$WORK/c_whole.idx" || fail "legacy merge .idx"
cmp "$WORK/c_out.bin" "$WORK/c_whole.bin" || fail "legacy merge .bin"

# Upstream's distributed mode writes the same bytes; flags are accepted with notes.
"$MERGE" --merge distributed --torch-backend mpi --local_rank 0 \
  --datasets "$WORK/p1" "$WORK/empty" "$WORK/p2" --output-prefix "$WORK/dist" >"$LOGS/stdout"
grep -q "same bytes" "$LOGS/stdout" || fail "distributed note"
cmp "$WORK/dist.idx" "$WORK/whole.idx" || fail "distributed .idx"
"$MERGE" --torch-backend gloo --datas "$WORK/p1" --output "$WORK/abbrev" >"$LOGS/stdout"
grep -qF "Ignoring setting for --torch-backend since using a serial merge" "$LOGS/stdout" ||
  fail "serial --torch-backend note"
cmp "$WORK/abbrev.idx" "$WORK/p1.idx" || fail "single-input merge"

"$PYTHON" "$WORK/layout.py" check "$WORK"

# --- failures: exit status, one-line message, nothing left behind --------------------------------
expect_failure() {
  local status=$1 pattern=$2
  shift 2
  local before after rc=0
  before="$(ls "$WORK")"
  "$MERGE" "$@" >"$LOGS/stdout" 2>"$LOGS/stderr" || rc=$?
  local stderr
  stderr="$(cat "$LOGS/stderr")"
  [[ $rc -eq $status ]] || fail "exit status $rc, expected $status for: $* ($stderr)"
  grep -qF -- "$pattern" <<<"$stderr" || fail "stderr lacks '$pattern': $stderr"
  [[ $(wc -l <<<"$stderr") -eq 1 ]] || fail "expected one error line: $stderr"
  after="$(ls "$WORK")"
  [[ "$before" == "$after" ]] || fail "files changed after a failed merge: $after"
}

expect_failure 1 "merge-datasets: error: dataset $WORK/missing does not exist: $WORK/missing.idx is missing" \
  --datasets "$WORK/p1" "$WORK/missing" --output-prefix "$WORK/bad"
expect_failure 1 "has dtype int32 but the merged dataset has dtype uint16" \
  --datasets "$WORK/p1" "$WORK/wide1" --output-prefix "$WORK/bad"
expect_failure 1 "Dataset type 'cached' in file '$WORK/c1' does not match type 'mmap'" \
  --datasets "$WORK/p1" "$WORK/c1" --output-prefix "$WORK/bad"
expect_failure 1 "is also the input dataset" --datasets "$WORK/p1" --output-prefix "$WORK/p1"
head -c 50 "$WORK/p2.idx" >"$WORK/cut.idx"
cp "$WORK/p2.bin" "$WORK/cut.bin"
expect_failure 1 "$WORK/cut.idx: truncated" --datasets "$WORK/p1" "$WORK/cut" --output-prefix "$WORK/bad"
expect_failure 2 "--output-prefix is required" --datasets "$WORK/p1"
expect_failure 2 "--merge" --datasets "$WORK/p1" --output-prefix "$WORK/bad" --merge parallel

echo "merge_datasets_test: OK"
