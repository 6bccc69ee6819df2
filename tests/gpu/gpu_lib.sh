# Shared by the GPU scripts, sourced after e2e/lib.sh: skip (exit 77, which CTest reports as
# skipped, never as passed) when what a script needs is missing.

# gpu_tests with an empty filter is the device probe: it exits 77 without a CUDA device.
require_cuda_device() {
  local probe=0
  "$MDS_BIN/gpu_tests" --gtest_filter=-* > /dev/null 2>&1 || probe=$?
  if [ "$probe" = 77 ]; then
    echo "SKIPPED: no CUDA device"
    exit 77
  fi
  [ "$probe" = 0 ] || fail "gpu_tests as a device probe exited $probe"
}

# Several ranks: mpirun, with e2e/lib.sh's settings for it.
require_mpirun() {
  if ! command -v mpirun > /dev/null; then
    echo "SKIPPED: no mpirun (scripts/gpu-check.sh packs Open MPI's)"
    exit 77
  fi
  use_mpirun
}

# $WORK/wiki.txt (a WikiText slice) and $WORK/lambada.jsonl: `real` bundled LAMBADA passages cut
# to 12 words (mostly wrong) and 8 prompts completed with the host's greedy next token (mostly
# right), so that the count says something. The completions use the caller's `model` flags
# (the checkpoint's shape and --load).
make_inference_eval_files() {  # real
  local real=$1 i
  head -c 3000 "$MDS_DATA/eval/wikitext-2-test.txt" > "$WORK/wiki.txt"
  python3 - "$MDS_DATA/eval/lambada_test.jsonl" "$WORK" "$real" <<'PY'
import json, sys
real = int(sys.argv[3])
lines = [json.loads(line)["text"].split() for line in open(sys.argv[1])][:real + 8]
with open(f"{sys.argv[2]}/lambada-real.jsonl", "w") as out:
    for words in lines[:real]:
        out.write(json.dumps({"text": " ".join(words[-12:])}) + "\n")
for i, words in enumerate(lines[real:]):
    with open(f"{sys.argv[2]}/prompt-{i}.txt", "w") as prompt:  # no newline: the model sees none
        prompt.write(" ".join(words[-7:-1]))
PY
  for i in 0 1 2 3 4 5 6 7; do
    "$MDS_BIN/generate" "${model[@]}" --device cpu --greedy --out-seq-length 1 \
      --sample-input-file "$WORK/prompt-$i.txt" > "$WORK/completion-$i.txt" 2> /dev/null ||
      fail "greedy completion of prompt $i"
  done
  python3 - "$WORK" > "$WORK/lambada.jsonl" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
print((work / "lambada-real.jsonl").read_text(), end="")
for i in range(8):
    record = (work / f"completion-{i}.txt").read_text()
    completion = record[record.index("\n\nMegatron-LM:") + 14:-1]
    print(json.dumps({"text": (work / f"prompt-{i}.txt").read_text() + completion}))
PY
}
