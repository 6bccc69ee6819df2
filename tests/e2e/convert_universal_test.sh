#!/usr/bin/env bash
# convert-to-universal-checkpoint (issue 7) on checkpoints pretrain writes: the same tiny fp32
# model trained 4 steps at 1×1×1 and at T=2×P=2×D=2 ZeRO 1, P=2×D=2 ZeRO 2 and T=2 ZeRO 0, plus
# D=2 bf16 and T=2 fp16 (ZeRO 0) runs, each converted. torch (python3) checks every parameter
# folder and shape, v0.1's keys, fp32 masters equal to the layer files' weights (fp32 runs: exactly;
# 16-bit runs: after rounding), every state equal to an independent rebuild from the ZeRO files
# (checkpoints.md §2.4), each grid within 1e-5 of the 1×1×1 conversion, Adam's step recorded; bad
# input fails with one line and leaves nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretrain_lib.sh"
use_mpirun
make_shakespeare_dataset "$WORK/shakespeare"
convert="$MDS_BIN/convert-to-universal-checkpoint"

for stage in 0 1 2; do
  cat > "$WORK/z$stage.json" <<JSON
{ "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
  "zero_optimization": {"stage": $stage}, "communication_data_type": "fp32",
  "steps_per_print": 2000 }
JSON
done
write_ds_config "$WORK/bf16.json" bf16 0
write_ds_config "$WORK/fp16.json" fp16 0
sed -i 's/"train_batch_size": 4/"train_batch_size": 8/' "$WORK/bf16.json" "$WORK/fp16.json"
flags=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8
       --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1
       --seed 1234 --split 90,8,2 --eval-interval 100 --eval-iters 1 --log-interval 5
       --make-vocab-size-divisible-by 64 --attention-dropout 0.1 --hidden-dropout 0.1
       --data-path "$WORK/shakespeare_text_document" "${gpt2_flags[@]}" --deepspeed
       --train-iters 4 --save-interval 2)

# run NAME T P D CONFIG [extra pretrain flags]: trains, saves at steps 2 and 4, converts step 4.
run() {
  local name=$1 t=$2 p=$3 d=$4 config=$5; shift 5
  run_ranks "$name" $((t * p * d)) --deepspeed_config "$WORK/$config.json" \
    --tensor-model-parallel-size "$t" --pipeline-model-parallel-size "$p" \
    --save "$WORK/ckpt-$name" "$@"
  "$convert" --input_folder "$WORK/ckpt-$name/global_step4" \
    --output_folder "$WORK/univ-$name/global_step4_universal" --num_extract_workers 2 \
    > "$WORK/convert-$name.out" 2> "$WORK/convert-$name.err" ||
    { cat "$WORK/convert-$name.err"; fail "$name: convert-to-universal-checkpoint"; }
  [ ! -s "$WORK/convert-$name.out" ] || fail "$name: the converter printed to stdout"
}
run t1p1d1 1 1 1 z0
run t1p1d1z1 1 1 1 z1
run t2p2d2z1 2 2 2 z1
run t1p2d2z2 1 2 2 z2
run t2p1d1z0 2 1 1 z0
run t1p1d2bf16 1 1 2 bf16 --bf16
run t2p1d1fp16 2 1 1 fp16 --fp16
grep -q "T = 2 x P = 2 x D = 2, fp32-zero optimizer layout" "$WORK/convert-t2p2d2z1.err" ||
  fail "the converter names the grid and layout: $(cat "$WORK/convert-t2p2d2z1.err")"
grep -q "(the folder given)" "$WORK/convert-t2p2d2z1.err" || fail "says which folder it took"
pass "7 checkpoints converted (fp32 ZeRO 0/1/2, bf16, fp16; TP, PP, DP up to 2)"

# deepspeed_to_deepspeed.py writes a bf16 run's ZeRO files without the "bf16_" prefix (DeepSpeed
# reads either naming): converted to the same universal files.
cp -r "$WORK/ckpt-t1p1d2bf16/global_step4" "$WORK/unprefixed"
for f in "$WORK"/unprefixed/bf16_zero_pp_rank_*; do mv "$f" "$WORK/unprefixed/$(basename "${f#*/bf16_}")"; done
ls "$WORK/unprefixed" | grep -q "^zero_pp_rank_1_mp_rank_00_optim_states.pt$" || fail "renaming the ZeRO files"
"$convert" --input_folder "$WORK/unprefixed" --output_folder "$WORK/univ-unprefixed/global_step4_universal" \
  > /dev/null 2> "$WORK/convert-unprefixed.err" ||
  { cat "$WORK/convert-unprefixed.err"; fail "converting a bf16 checkpoint with unprefixed ZeRO files"; }
diff -r "$WORK/univ-t1p1d2bf16/global_step4_universal/zero" \
  "$WORK/univ-unprefixed/global_step4_universal/zero" > /dev/null ||
  fail "the unprefixed bf16 ZeRO files converted to other universal files"
pass "a bf16 checkpoint whose ZeRO files lack the bf16_ prefix converts to the same files"

"$MDS_PYTHON" - "$WORK" "$REPO/tests/e2e" <<'PY' || fail "universal checkpoints"
import pathlib, re, sys, torch
work = pathlib.Path(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from ckpt_torch_load_test import install_stubs  # upstream classes the files name
install_stubs()
ROWS = re.compile(r"word_embeddings\.weight|query_key_value\.|dense_h_to_4h\.")
COLUMNS = re.compile(r"self_attention\.dense\.weight|dense_4h_to_h\.weight")
RUNS = {  # name: (T, P, D, weights dtype, partitioned)
    "t1p1d1": (1, 1, 1, torch.float32, False),
    "t1p1d1z1": (1, 1, 1, torch.float32, True),
    "t2p2d2z1": (2, 2, 2, torch.float32, True),
    "t1p2d2z2": (1, 2, 2, torch.float32, True),
    "t2p1d1z0": (2, 1, 1, torch.float32, False),
    "t1p1d2bf16": (1, 1, 2, torch.bfloat16, True),
    "t2p1d1fp16": (2, 1, 1, torch.float16, False),
}
STATES = ("fp32", "exp_avg", "exp_avg_sq")
load = lambda path: torch.load(path, map_location="cpu", weights_only=False)

def engine_name(layer, key):
    return f"tied_modules.embed.{key}" if layer == 1 else f"{layer}.{key}"

def merge_tp(name, parts):
    if ROWS.search(name):
        return torch.cat(parts, 0)
    if COLUMNS.search(name):
        return torch.cat(parts, 1)
    assert all(torch.equal(parts[0], p) for p in parts[1:]), name
    return parts[0]

def layer_weights(folder, t):
    shards = []
    for tp in range(t):
        shard = {}
        for path in folder.glob(f"layer_*-model_{tp:02d}-model_states.pt"):
            layer = int(path.name.split("_")[1].split("-")[0])
            shard.update({engine_name(layer, k): v for k, v in load(path).items()})
        shards.append(shard)
    return {name: merge_tp(name, [s[name] for s in shards]) for name in shards[0]}

def zero_rebuild(folder, t, p, d, prefix):
    """§2.4: per (pp, tp) concatenate the DP partitions of each group, cut by param_shapes."""
    shards = [dict() for _ in range(t)]
    for pp in range(p):
        for tp in range(t):
            mp = pp * t + tp
            shapes = load(folder / f"mp_rank_{mp:02d}_model_states.pt")["param_shapes"]
            files = [load(folder / f"{prefix}zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt")
                     ["optimizer_state_dict"] for dp in range(d)]
            for g, group in enumerate(shapes):
                numel = sum(s.numel() for s in group.values())
                flats = {
                    "fp32": torch.cat([f["single_partition_of_fp32_groups"][g] for f in files]),
                    "exp_avg": torch.cat([f["base_optimizer_state"]["state"][g]["exp_avg"] for f in files]),
                    "exp_avg_sq": torch.cat([f["base_optimizer_state"]["state"][g]["exp_avg_sq"] for f in files]),
                }
                at = 0
                for name, shape in group.items():
                    if not (pp > 0 and name.startswith("tied_modules.")):  # the last stage's replica
                        shards[tp][name] = {s: flats[s][:numel][at:at + shape.numel()].view(shape)
                                            for s in STATES}
                    at += shape.numel()
    return {name: {s: merge_tp(name, [sh[name][s] for sh in shards]) for s in STATES}
            for name in shards[0]}

reference_weights = layer_weights(work / "ckpt-t1p1d1" / "global_step4", 1)
expected_names = set(reference_weights)
assert len(expected_names) == 28, sorted(expected_names)  # 2 embedding + 2·12 layer + 2 final LN
converted = {}
steps = {}
for run, (t, p, d, dtype, partitioned) in RUNS.items():
    root = work / f"univ-{run}"
    out = root / "global_step4_universal"
    assert (root / "latest_universal").read_text() == "global_step4_universal", run
    assert sorted(f.name for f in root.iterdir()) == ["global_step4_universal", "latest_universal"]
    source = work / f"ckpt-{run}" / "global_step4"
    mp_files = sorted(f.name for f in out.glob("mp_rank_*"))
    assert mp_files == [f"mp_rank_{i:02d}_model_states.pt" for i in range(t * p)], (run, mp_files)
    for name in mp_files:
        assert (out / name).read_bytes() == (source / name).read_bytes(), (run, name)
    folders = {f.name for f in (out / "zero").iterdir() if f.is_dir()}
    assert folders == expected_names, (run, folders ^ expected_names)
    assert sorted(f.name for f in out.iterdir()) == mp_files + ["zero"], run
    states = {}
    for name in expected_names:
        files = sorted(f.name for f in (out / "zero" / name).iterdir())
        assert files == ["exp_avg.pt", "exp_avg_sq.pt", "fp32.pt"], (run, name, files)
        states[name] = {}
        for state in STATES:
            saved = load(out / "zero" / name / f"{state}.pt")
            x = saved["param"]
            assert x.dtype == torch.float32 and x.shape == reference_weights[name].shape, (
                run, name, state, x.shape)
            cat_dim = 1 if COLUMNS.search(name) else 0 if ROWS.search(name) else None
            assert saved.get("cat_dim") == cat_dim, (run, name, saved.get("cat_dim"))
            if "word_embeddings.weight" in name:  # 50257 tokens padded to 50304: the last row
                assert torch.equal(saved["vocab_divisibility_padding_tensor"], x[-1]), run
                assert list(saved) == ["cat_dim", "vocab_divisibility_padding_tensor", "param"]
            else:
                assert list(saved) == (["cat_dim", "param"] if cat_dim is not None else ["param"])
            states[name][state] = x
    converted[run] = states

    weights = layer_weights(source, t)
    if dtype == torch.float32:  # the masters are the weights
        bad = [n for n in expected_names if not torch.equal(states[n]["fp32"], weights[n])]
    else:  # the weights are the masters rounded
        bad = [n for n in expected_names if not torch.equal(states[n]["fp32"].to(dtype), weights[n])]
    assert not bad, (run, "fp32 masters differ from the layer files", bad)
    if partitioned:
        prefix = "bf16_" if dtype == torch.bfloat16 else ""
        rebuilt = zero_rebuild(source, t, p, d, prefix)
        assert rebuilt.keys() == expected_names, run
        bad = [(n, s) for n in expected_names for s in STATES
               if not torch.equal(rebuilt[n][s], states[n][s])]
        assert not bad, (run, "differs from the ZeRO files", bad)

    step = load(out / "zero" / "optimizer_state.pt")["param_groups"][0]["step"]
    holder = load(source / (f"{'bf16_' if dtype == torch.bfloat16 else ''}zero_pp_rank_0_mp_rank_00_optim_states.pt"
                            if partitioned else "mp_rank_00_model_states.pt"))
    groups = (holder["optimizer_state_dict"]["base_optimizer_state"] if partitioned else
              holder["optimizer"]["optimizer_state_dict"] if dtype == torch.float16 else
              holder["optimizer"])["param_groups"]
    # The ZeRO and 16-bit wrappers start with a dummy step; fp16 may skip overflowing steps.
    assert step == groups[0]["step"] and step in (3, 4, 5), (run, step)
    steps[run] = step

# The dummy first step of DeepSpeed's ZeRO and 16-bit optimizer wrappers puts Adam's bias
# correction one step ahead, so each run is compared with the 1×1×1 fp32 run of its step count.
reference = {steps["t1p1d1"]: "t1p1d1", steps["t1p1d1z1"]: "t1p1d1z1"}
assert len(reference) == 2, steps
# Differences are measured against each state's largest value over the whole model (a bias that
# is still near zero would make a per-tensor measure meaningless).
scale = {(r, s): max(converted[r][n][s].abs().max().item() for n in expected_names)
         for r in reference.values() for s in STATES}
worst = {}
for run, (t, p, d, dtype, _) in RUNS.items():
    # 16-bit runs compute in another precision: only a coarse bound against fp32 at 1×1×1.
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    for name in expected_names:
        for state in STATES:
            ref = converted[reference[steps[run]]][name][state]
            error = (converted[run][name][state] - ref).abs().max().item() / scale[
                reference[steps[run]], state]
            worst[run] = max(worst.get(run, (0.0,)), (error, name, state))
            assert error <= tolerance, (run, name, state, error)
print("largest difference from 1×1×1 relative to the state's largest value:",
      {run: f"{e:.1e} ({name} {state})" for run, (e, name, state) in worst.items()},
      "; Adam steps:", steps)
PY
pass "every parameter whole (28 folders × fp32/exp_avg/exp_avg_sq, v0.1 keys), equal to the layer files and the ZeRO files; grids within 1e-5 of 1×1×1"

# A checkpoint root is read through its `latest` (the step-4 tag here).
"$convert" --input_folder "$WORK/ckpt-t1p2d2z2" --output_folder "$WORK/univ-root/u" \
  2> "$WORK/convert-root.err" || { cat "$WORK/convert-root.err"; fail "convert a checkpoint root"; }
grep -q "global_step4 (the tag in .*/latest)" "$WORK/convert-root.err" || fail "names the tag it took"
expect_same_files "$WORK/univ-root/u/zero/4.mlp.dense_4h_to_h.weight/exp_avg.pt" \
  "$WORK/univ-t1p2d2z2/global_step4_universal/zero/4.mlp.dense_4h_to_h.weight/exp_avg.pt" \
  "the root's latest tag converts to the same files"

# Bad input: one error line, a non-zero exit, nothing left behind.
bad_input() {  # "expected text" input-folder
  local out="$WORK/univ-bad/global_step4_universal" err rc=0
  err="$("$convert" --input_folder "$2" --output_folder "$out" 2>&1 >/dev/null)" || rc=$?
  [ "$rc" -ne 0 ] || fail "expected failure for $2"
  # Progress lines may come first; the error is one line, the last.
  [ "$(grep -c "error:" <<<"$err")" -eq 1 ] || fail "expected one error line for $2: $err"
  grep -qF -- "$1" <<<"$(tail -n 1 <<<"$err" | grep "^convert-to-universal-checkpoint: error: ")" ||
    fail "the error line for $2 lacks '$1': $err"
  [ -z "$(ls -A "$WORK/univ-bad" 2>/dev/null)" ] || fail "output left behind: $(ls -A "$WORK/univ-bad")"
  pass "fails with '$1'"
}
grid="$WORK/ckpt-t2p2d2z1"
copy() { rm -rf "$WORK/bad"; cp -r "$grid/global_step4" "$WORK/bad"; }
copy; rm "$WORK/bad/zero_pp_rank_1_mp_rank_02_optim_states.pt"
bad_input "zero_pp_rank_1_mp_rank_02_optim_states.pt: missing from the checkpoint" "$WORK/bad"
copy; cp "$grid/global_step2/mp_rank_03_model_states.pt" "$WORK/bad/"
bad_input "mp_rank_03_model_states.pt: iteration 2 (global step 2), but" "$WORK/bad"
copy; cp "$grid/global_step2/zero_pp_rank_1_mp_rank_01_optim_states.pt" "$WORK/bad/"
bad_input "zero_pp_rank_1_mp_rank_01_optim_states.pt: Adam step 3, but" "$WORK/bad"  # ZeRO: 2 + 1
copy; truncate -s 3000 "$WORK/bad/zero_pp_rank_0_mp_rank_03_optim_states.pt"
bad_input "zero_pp_rank_0_mp_rank_03_optim_states.pt" "$WORK/bad"
copy; cp "$WORK/bad/zero_pp_rank_1_mp_rank_00_optim_states.pt" \
  "$WORK/bad/zero_pp_rank_2_mp_rank_00_optim_states.pt"
bad_input "zero_pp_rank_2_mp_rank_00_optim_states.pt: unexpected" "$WORK/bad"
# A file whose pickle asks for os.system is refused by name and runs nothing.
evil_pickle() {  # target-file
  "$MDS_PYTHON" - "$1" "$WORK/pwned" <<'PY'
import os, pickle, sys, zipfile
class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {sys.argv[2]}",))
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps({"module": Evil()}, protocol=2))
    z.writestr("archive/version", "3\n")
PY
}
for victim in zero_pp_rank_1_mp_rank_02_optim_states.pt mp_rank_00_model_states.pt; do
  copy; evil_pickle "$WORK/bad/$victim"
  bad_input "$victim:data.pkl: pickle offset 18: refusing to load posix.system: loading a checkpoint" \
    "$WORK/bad"
  [ ! -e "$WORK/pwned" ] || fail "the pickle in $victim ran code"
done
bad_input "no such folder" "$WORK/nowhere"
expect_failure "holds the input checkpoint" "$convert" --input_folder "$grid/global_step4" \
  --output_folder "$grid"
expect_failure "required" "$convert" --input_folder "$grid"
"$convert" --help > "$WORK/help.txt"
for flag in --input_folder --output_folder --num_extract_workers --num_merge_workers; do
  grep -q -- "$flag" "$WORK/help.txt" || fail "--help lacks $flag"
done
pass "--help lists every flag"
finish
