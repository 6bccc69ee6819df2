#!/usr/bin/env python3
"""TensorBoard event files: tensorboard_probe writes one through train/metrics_log (upstream's tags)
and prints what it wrote; this test reads the file with its own TFRecord + protobuf reader (both
CRC-32C masks checked on every record), checks the Event structure torch's SummaryWriter produces
(file_version first, new-style DT_FLOAT tensors with plugin "scalars", text summaries) and compares
every tag, step and value. The tags of one training iteration are also checked against the list
read off megatron/training.py here, independently of the C++ code. If the tensorboard package is
importable, its own EventAccumulator must read the same scalars."""
import json
import math
import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile
import time

TOOLS = pathlib.Path(os.environ["MDS_TEST_TOOLS"])


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(blob):
    records, at = [], 0
    while at < len(blob):
        check(at + 12 <= len(blob), f"torn record header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        check(header_crc == masked(header), f"length CRC at byte {at}")
        check(at + 16 + length <= len(blob), f"torn record at byte {at}")
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        check(data_crc == masked(data), f"data CRC at byte {at}")
        records.append(data)
        at += 16 + length
    return records


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(message):
    """{field number: [(wire type, raw value)]} of one protobuf message."""
    out, at = {}, 0
    while at < len(message):
        key, at = varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(message, at)
        elif wire == 1:
            value, at = message[at:at + 8], at + 8
        elif wire == 2:
            length, at = varint(message, at)
            value, at = message[at:at + length], at + length
        elif wire == 5:
            value, at = message[at:at + 4], at + 4
        else:
            raise AssertionError(f"wire type {wire}")
        check(at <= len(message), "field runs past its message")
        out.setdefault(number, []).append((wire, value))
    return out


def one(message_fields, number, wire, default=None):
    values = message_fields.get(number, [])
    check(len(values) <= 1, f"field {number} repeated")
    if not values:
        return default
    check(values[0][0] == wire, f"field {number} has wire type {values[0][0]}, not {wire}")
    return values[0][1]


def signed64(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_event(data, simple_style):
    event = fields(data)
    wall = struct.unpack("<d", one(event, 1, 1, b"\0" * 8))[0]
    step = signed64(one(event, 2, 0, 0))
    version = one(event, 3, 2)
    if version is not None:
        return {"kind": "version", "version": version.decode(), "wall": wall, "step": step}
    summary = fields(one(event, 5, 2))
    check(list(summary) == [1] and len(summary[1]) == 1, "one Summary.Value per event")
    value = fields(summary[1][0][1])
    tag = one(value, 1, 2, b"").decode("utf-8")
    metadata = one(value, 9, 2)
    plugin = None
    if metadata is not None:
        plugin_data = fields(one(fields(metadata), 1, 2))
        plugin = one(plugin_data, 1, 2).decode()
        check(2 not in plugin_data, "plugin content is empty in torch's summaries")
    tensor = one(value, 8, 2)
    if plugin == "text":
        t = fields(tensor)
        check(one(t, 1, 0) == 7, "text tensor dtype DT_STRING")
        dims = fields(one(fields(one(t, 2, 2)), 2, 2))
        check(one(dims, 1, 0) == 1, "text tensor shape [1]")
        check(tag.endswith("/text_summary"), f"text tag {tag}")
        return {"kind": "text", "tag": tag[:-len("/text_summary")],
                "text": one(t, 8, 2).decode("utf-8"), "wall": wall, "step": step}
    if simple_style:
        check(tensor is None and metadata is None, f"{tag}: simple-value event carries a tensor")
        packed = one(value, 2, 5)
        check(packed is not None, f"{tag}: no simple_value (a oneof member, written even if 0)")
        number = struct.unpack("<f", packed)[0]
    else:
        check(2 not in value, f"{tag}: new-style event carries simple_value")
        check(plugin == "scalars", f"{tag}: plugin {plugin}")
        t = fields(tensor)
        check(one(t, 1, 0) == 1, f"{tag}: dtype DT_FLOAT")
        check(2 not in t, f"{tag}: a scalar has no shape")
        packed = one(t, 5, 2)
        check(len(packed) == 4, f"{tag}: one packed float")
        number = struct.unpack("<f", packed)[0]
    return {"kind": "scalar", "tag": tag, "value": number, "wall": wall, "step": step}


def as_float32(value):
    if value in ("nan", "inf", "-inf"):
        return float(value)
    if abs(value) > 3.4028234663852886e38:
        return math.copysign(math.inf, value)
    return struct.unpack("<f", struct.pack("<f", value))[0]


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def upstream_train_tags():
    """training_log's add_scalar calls, in order, with --log-batch-size-to-tensorboard, fp16,
    a grad norm and DeepSpeed's num_zeros 0 (megatron/training.py)."""
    tags = ["steps-vs-samples/y=steps,x=samples", "steps-vs-samples/y=samples,x=steps",
            "steps-vs-tokens/y=steps,x=tokens", "steps-vs-tokens/y=tokens,x=steps"]
    tags += ["learning-rate/learning-rate" + s for s in ("", " vs samples", " vs tokens")]
    tags += ["batch-size/batch-size", "batch-size/batch-size vs samples"]
    tags += ["lm-loss-training/lm loss" + s
             for s in ("", " vs samples", " vs tokens", " vs gigaflos (without embeddings)")]
    for name in ("loss-scale/loss-scale", "grad-norm/grad-norm", "num-zeros/num-zeros"):
        tags += [name + s for s in ("", " vs samples", " vs tokens")]
    return tags


def run_probe(log_dir, simple_style):
    start = time.time()
    args = [str(TOOLS / "tensorboard_probe"), str(log_dir)] + (["--simple-value"] if simple_style else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    end = time.time()
    lines = [json.loads(line) for line in out.splitlines()]
    check(lines[-1]["kind"] == "file", "the probe names its file last")
    path = pathlib.Path(lines[-1]["path"])
    written = lines[:-1]

    check(path.parent == log_dir, f"event file {path} outside {log_dir}")
    match = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)", path.name)
    check(match is not None, f"event file name {path.name}")
    check(int(start) - 1 <= int(match.group(1)) <= end + 1, f"file time {match.group(1)}")

    events = [decode_event(r, simple_style) for r in read_records(path.read_bytes())]
    check(events[0]["kind"] == "version" and events[0]["version"] == "brain.Event:2",
          f"first event {events[0]}")
    check(events[0]["step"] == 0, "file_version event has no step")
    for event in events:
        check(start - 1 <= event["wall"] <= end + 1, f"wall time {event['wall']} not in the run")
    walls = [e["wall"] for e in events]
    check(walls == sorted(walls), "wall times go back")
    events = events[1:]
    check(len(events) == len(written), f"{len(events)} events in the file, {len(written)} written")
    for got, want in zip(events, written):
        check(got["kind"] == want["kind"] and got["tag"] == want["tag"] and
              got["step"] == want["step"], f"event {got} != written {want}")
        if want["kind"] == "scalar":
            check(same(got["value"], as_float32(want["value"])),
                  f"{want['tag']}@{want['step']}: {got['value']} != {want['value']}")
        else:
            check(got["text"] == want["text"], f"text {got} != {want}")

    # One training iteration's tags, as upstream writes them.
    first_train = [e["tag"] for e in events if e["kind"] == "scalar"][2:2 + len(upstream_train_tags())]
    check(first_train == upstream_train_tags(), f"training tags {first_train}")
    tags = {e["tag"] for e in events}
    for tag in ("lm-loss-validation/valid/lm loss validation",
                "lm-loss-validation/valid/lm loss validation ppl vs gigaflos (without embeddings)",
                "lm-loss-validation/test/lm loss validation vs tokens",
                "iteration-time/TFLOPs per gpu (estimated)", "iteration-time/world_size"):
        check(tag in tags, f"missing {tag}")
    test_steps = {e["step"] for e in events if e["tag"] == "lm-loss-validation/test/lm loss validation"}
    check(test_steps == {0}, f"test evaluation steps {test_steps} (upstream passes iteration 0)")
    return path, events


def check_with_tensorboard(path, events):
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        print("note: tensorboard is not installed; its reader was not tried")
        return
    acc = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.SCALARS: 0,
                                                                      event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in {e["tag"] for e in events if e["kind"] == "scalar"}:
        mine = [(e["step"], e["value"]) for e in events if e["tag"] == tag]
        if tag in tags.get("scalars", []):
            theirs = [(s.step, s.value) for s in acc.Scalars(tag)]
        else:
            import tensorboard.util.tensor_util as tensor_util
            theirs = [(t.step, float(tensor_util.make_ndarray(t.tensor_proto))) for t in acc.Tensors(tag)]
        check(len(theirs) == len(mine) and all(a[0] == b[0] and same(a[1], b[1])
                                               for a, b in zip(mine, theirs)),
              f"tensorboard reads {tag} as {theirs}, we wrote {mine}")
    print("ok: tensorboard's EventAccumulator reads the same scalars")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for simple_style in (False, True):
            log_dir = pathlib.Path(tmp) / ("simple" if simple_style else "tensor") / "runs"
            path, events = run_probe(log_dir, simple_style)
            check_with_tensorboard(path, events)
    print("ok: event files decode to exactly the scalars and texts written, with upstream's tags")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        sys.exit(1)
