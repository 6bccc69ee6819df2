"""Oracle test of libcore's .pt reader and writer against torch itself (checkpoints.md §5).

1. torch_pt_probe writes a checkpoint with every value kind (nested dicts, an OrderedDict of tensors
   of every dtype incl. views sharing a storage, an argparse.Namespace, ints at every pickle width,
   floats, bools, None, str, bytes, lists, tuples); torch.load must return exactly the same content
   (tensors bit for bit), also with ZIP64 records forced on, and weights_only=True must load the
   tensor-only variant. The zip layout (64-byte aligned data, CRCs) is checked with zipfile.
2. torch.save writes such content plus a Linear state_dict and an Adam state_dict; the probe's dump
   must equal the canonical dump of what torch.load returns.
3. A pickle calling os.system is refused by the probe (non-zero exit, clear message) and runs nothing.

Environment: MDS_PYTHON (with torch) runs this script; MDS_TEST_TOOLS holds torch_pt_probe.
"""

import argparse
import collections
import io
import math
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import zipfile

import torch

PROBE = os.path.join(os.environ.get("MDS_TEST_TOOLS", "build/tests/tools"), "torch_pt_probe")
failures = []
checks = [0]


def check(condition, what):
    checks[0] += 1
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def canonical_dump(v):
    """The probe's dump format (tests/tools/torch_pt_probe.cpp), computed from Python objects."""
    if v is None:
        return "None"
    if v is True:
        return "True"
    if v is False:
        return "False"
    if isinstance(v, torch.Tensor):
        flat = v.detach().reshape(-1).contiguous()
        if flat.dtype == torch.bfloat16:
            flat = flat.view(torch.int16)
        data = flat.numpy().tobytes().hex()
        kind = "param(" if isinstance(v, torch.nn.Parameter) else "tensor("
        shape = ", ".join(str(d) for d in v.shape)
        return f"{kind}{str(v.dtype)[6:]}, [{shape}], rg={int(v.requires_grad)}, {data})"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "float:" + struct.pack(">d", v).hex()
    if isinstance(v, str):
        return "str:" + v.encode("utf-8").hex()
    if isinstance(v, bytes):
        return "bytes:" + v.hex()
    if isinstance(v, torch.dtype):
        return "global:" + str(v)
    if isinstance(v, torch.Size):
        return "obj:torch.Size((" + ", ".join(canonical_dump(x) for x in v) + "))"
    if isinstance(v, tuple):
        return "(" + ", ".join(canonical_dump(x) for x in v) + ")"
    if isinstance(v, list):
        return "[" + ", ".join(canonical_dump(x) for x in v) + "]"
    if isinstance(v, dict):
        prefix = "odict{" if isinstance(v, collections.OrderedDict) else "{"
        out = prefix + ", ".join(canonical_dump(k) + ": " + canonical_dump(x) for k, x in v.items()) + "}"
        if isinstance(v, collections.OrderedDict) and vars(v):
            out += "|state=" + canonical_dump(dict(vars(v)))
        return out
    if isinstance(v, argparse.Namespace):
        return "obj:argparse.Namespace()|state=" + canonical_dump(dict(vars(v)))
    raise TypeError(f"no canonical dump for {type(v)}")


def model_tensors():
    """The tensors torch_pt_probe writes (same values, storages and views)."""
    grid = torch.arange(12, dtype=torch.float32).mul(0.5).reshape(3, 4)
    m = collections.OrderedDict()
    m["grid"] = grid
    m["rows12"] = grid[1:3]
    m["transposed"] = grid.t()
    m["half"] = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float16)
    m["bf16"] = torch.tensor([[1.0, -1.0], [3.5, 0.0]], dtype=torch.bfloat16)
    m["f64"] = torch.tensor([math.pi, math.e], dtype=torch.float64)
    m["i64"] = torch.tensor([-1, 2**40], dtype=torch.int64)
    m["i32"] = torch.tensor([7, -7, 0], dtype=torch.int32)
    m["u8"] = torch.tensor([0, 127, 255], dtype=torch.uint8)
    m["flags"] = torch.tensor([True, False, True])
    m["scalar"] = torch.tensor(42.0)
    m["empty"] = torch.zeros(0, 3)
    return m


def everything():
    ints = [0, 255, 256, 65535, 65536, -1, -5, 2**31, -(2**31), -(2**31) - 1, 2**40, 2**63 - 1, -(2**63)]
    return {
        "ints": ints,
        "floats": (3.0, -0.0, 1e-300, 0.1, math.inf),
        "flags": [True, False, None],
        "text": "h\u00e9llo w\u00f6rld \u2713",
        "bytes": b"ab\x00\xff",
        "empty": {"list": [], "tuple": (), "dict": {}, "bytes": b""},
        "nested": {"a": {"b": {"c": [1, (2, 3), {"d": "e"}]}}},
        "int_keys": {0: "zero", 1: "one"},
        "args": argparse.Namespace(lr=0.5, layers=2, name="gpt", tied=True, eps=None, params_dtype=torch.bfloat16),
        "shape": torch.Size([2, 3]),
        "model": model_tensors(),
        "big_list": list(range(1500)),
    }


def run_probe(*args):
    return subprocess.run([PROBE, *args], capture_output=True, text=True)


def check_zip_layout(path, label):
    with zipfile.ZipFile(path) as z:
        check(z.testzip() is None, f"{label}: CRCs match")
        names = z.namelist()
        check(all(n.startswith("archive/") for n in names), f"{label}: single archive/ prefix")
        check(z.read("archive/version") == b"3\n", f"{label}: version record")
        with open(path, "rb") as f:
            raw = f.read()
        for info in z.infolist():
            check(info.compress_type == zipfile.ZIP_STORED, f"{label}: {info.filename} stored")
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26 : info.header_offset + 30])
            data_offset = info.header_offset + 30 + name_len + extra_len
            check(data_offset % 64 == 0, f"{label}: {info.filename} data 64-byte aligned")


def test_cpp_writes_torch_reads(tmp):
    expected = everything()
    for label, extra in (("plain", []), ("zip64", ["1"])):
        path = os.path.join(tmp, f"cpp_{label}.pt")
        r = run_probe("write", path, *extra)
        check(r.returncode == 0, f"probe write {label}: {r.stderr}")
        check_zip_layout(path, label)
        loaded = torch.load(path, map_location="cpu")
        check(canonical_dump(loaded) == canonical_dump(expected), f"{label}: torch.load returns the written content")
        m = loaded["model"]
        # Views keep their shared storage and offsets.
        check(m["rows12"].storage().data_ptr() == m["grid"].storage().data_ptr(), f"{label}: shared storage")
        check(m["rows12"].storage_offset() == 4, f"{label}: storage offset")
        check(m["transposed"].stride() == (1, 4), f"{label}: strides kept")
        dumped = run_probe("dump", path)
        check(dumped.returncode == 0 and dumped.stdout.strip() == canonical_dump(expected), f"{label}: probe re-reads its own file")

    path = os.path.join(tmp, "cpp_weights.pt")
    r = run_probe("write-weights", path)
    check(r.returncode == 0, f"probe write-weights: {r.stderr}")
    expected_weights = model_tensors()
    expected_weights["step"] = 12345678901
    expected_weights["names"] = ["a", (1, None)]
    expected_weights["ok"] = True
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
        check(canonical_dump(loaded) == canonical_dump(expected_weights), "weights_only=True content")
    except TypeError:  # torch without weights_only
        print("weights_only not supported by this torch; skipped")


def test_torch_writes_cpp_reads(tmp):
    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(linear.parameters(), lr=0.01)
    linear(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    cases = {
        "everything": everything(),
        "linear": linear.state_dict(),
        "adam": optimizer.state_dict(),
        "params": {"w": torch.nn.Parameter(torch.ones(2, 2)), "frozen": torch.nn.Parameter(torch.zeros(1), requires_grad=False)},
        "grad_tensor": {"master": torch.arange(4.0).requires_grad_()},
    }
    for name, obj in cases.items():
        path = os.path.join(tmp, f"torch_{name}.pt")
        torch.save(obj, path)
        r = run_probe("dump", path)
        check(r.returncode == 0, f"probe dump of torch-written {name}: {r.stderr.strip()}")
        check(r.stdout.strip() == canonical_dump(torch.load(path)), f"probe dump of torch-written {name} matches")
    # A file-like save uses the archive/ prefix; the probe accepts both.
    buffer = io.BytesIO()
    torch.save(cases["linear"], buffer)
    path = os.path.join(tmp, "buffer.pt")
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
    r = run_probe("dump", path)
    check(r.returncode == 0 and r.stdout.strip() == canonical_dump(cases["linear"]), "buffer-saved file")


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_refuses_code(tmp):
    marker = os.path.join(tmp, "pwned")
    path = os.path.join(tmp, "evil.pt")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"x": Evil(marker)}, protocol=2))
        z.writestr("archive/version", "3\n")
    r = run_probe("dump", path)
    check(r.returncode != 0, "evil pickle: non-zero exit")
    module = os.system.__module__  # "posix" on Linux
    check(f"refusing to load {module}.system: loading a checkpoint never executes code" in r.stderr,
          f"evil pickle: clear message (got {r.stderr.strip()!r})")
    check(not os.path.exists(marker), "evil pickle: nothing executed")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_cpp_writes_torch_reads(tmp)
        test_torch_writes_cpp_reads(tmp)
        test_refuses_code(tmp)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print(f"torch_pt_oracle_test: all {checks[0]} checks passed")


if __name__ == "__main__":
    main()
