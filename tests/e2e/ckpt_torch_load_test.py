"""Oracle test of the DeepSpeed pipeline checkpoints libcore/ckpt writes (checkpoints.md §2).

For each optimizer layout (fp32, fp16, fp16 + ZeRO 1, bf16) ckpt_probe writes the checkpoint of a
tiny GPT (L=2, h=16, n=2, F=64, Vp=64, 8 absolute positions; bf16 also with rotary positions).
torch.load(weights_only=False) must read every file, and
1. the folder holds exactly the files DeepSpeed writes; `latest` says "global_step12";
2. layer files are plain OrderedDicts (no _metadata) of unshared tensors with the keys, shapes and
   dtypes of §2.2;
3. mp_rank_00_model_states.pt has the keys of §2.3 in upstream order with the right values; its
   RNG states are those Python, numpy and torch produce for the seed;
4. optimizer groups follow training.md §4.2 (membership, order, hyperparameters, step), with
   param_shapes / param_slice_mappings naming the engine parameters in flat order;
5. full fp32 weights rebuilt from the optimizer state as §2.4's last paragraph says equal the
   layer files' weights (the probe's masters equal its 16-bit weights);
6. after torch.save re-writes every file (torch's own pickler, memo opcodes, getattr enums),
   ckpt_probe verify still loads them and finds every byte it wrote.

Environment: MDS_PYTHON (with torch) runs this script; MDS_TEST_TOOLS holds ckpt_probe.
"""

import argparse
import collections
import dataclasses
import enum
import os
import random
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

PROBE = os.path.join(os.environ.get("MDS_TEST_TOOLS", "build/tests/tools"), "ckpt_probe")
failures = []
checks = [0]


def check(condition, what):
    checks[0] += 1
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


# --- stand-ins for the DeepSpeed and Megatron classes the files name --------------------------


def module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    return sys.modules[name]


def install_stubs():
    fragments = module("deepspeed.utils.tensor_fragment")

    @dataclasses.dataclass
    class fragment_address:
        numel: int
        start: int

    fragment_address.__module__ = fragments.__name__
    fragment_address.__qualname__ = "fragment_address"
    fragments.fragment_address = fragment_address

    zero_config = module("deepspeed.runtime.zero.config")

    class ZeroStageEnum(int, enum.Enum):
        disabled = 0
        optimizer_states = 1
        gradients = 2
        weights = 3

    ZeroStageEnum.__module__ = zero_config.__name__
    ZeroStageEnum.__qualname__ = "ZeroStageEnum"
    zero_config.ZeroStageEnum = ZeroStageEnum

    scalers = module("deepspeed.runtime.fp16.loss_scaler")

    class LossScaler:
        pass

    class DynamicLossScaler:
        pass

    for cls in (LossScaler, DynamicLossScaler):
        cls.__module__ = scalers.__name__
        cls.__qualname__ = cls.__name__
        setattr(scalers, cls.__name__, cls)

    enums = module("megatron.enums")

    class PositionEmbeddingType(enum.Enum):
        rotary = 1
        absolute = 2
        alibi = 3

    PositionEmbeddingType.__module__ = enums.__name__
    PositionEmbeddingType.__qualname__ = "PositionEmbeddingType"
    enums.PositionEmbeddingType = PositionEmbeddingType


# --- what upstream would hold for the probe's model -------------------------------------------

L, H, F, VP, POS = 2, 16, 64, 64, 8
LAYER_KEYS = [
    ("input_layernorm.weight", [H]), ("input_layernorm.bias", [H]),
    ("self_attention.query_key_value.weight", [3 * H, H]),
    ("self_attention.query_key_value.bias", [3 * H]),
    ("self_attention.dense.weight", [H, H]), ("self_attention.dense.bias", [H]),
    ("post_attention_layernorm.weight", [H]), ("post_attention_layernorm.bias", [H]),
    ("mlp.dense_h_to_4h.weight", [F, H]), ("mlp.dense_h_to_4h.bias", [F]),
    ("mlp.dense_4h_to_h.weight", [H, F]), ("mlp.dense_4h_to_h.bias", [H]),
]
MP_KEYS = [
    "module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler", "data_sampler",
    "random_ltd", "sparse_tensor_module_names", "skipped_steps", "global_steps", "global_samples",
    "dp_world_size", "mp_world_size", "ds_config", "ds_version", "args", "checkpoint_version",
    "iteration", "tokens", "checkpoint_info", "random_rng_state", "np_rng_state",
    "torch_rng_state", "cuda_rng_state", "rng_tracker_states",
]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "fp16-zero1": torch.float16,
          "bf16": torch.bfloat16}


def layer_files(rotary):
    """spec index -> ordered [(key, shape)] of §2.2."""
    embedding = [("word_embeddings.weight", [VP, H])]
    if not rotary:
        embedding.append(("position_embeddings.weight", [POS, H]))
    layer = list(LAYER_KEYS)
    if rotary:
        layer.insert(6, ("self_attention.rotary_emb.inv_freq", [H // 2 // 2]))
    files = {1: embedding}
    for i in range(L):
        files[i + 3] = layer
    files[L + 4] = [("weight", [H]), ("bias", [H])]
    return files


def engine_name(spec, key):
    return f"tied_modules.embed.{key}" if spec == 1 else f"{spec}.{key}"


def expected_groups(rotary):
    """training.md §4.2 from the module tree: pre-order, LayerNorm params and biases undecayed,
    the decay list split at len // 2, empty groups dropped."""
    modules = [("embed", False, ["word_embeddings.weight"])]
    if not rotary:
        modules.append(("embed", False, ["position_embeddings.weight"]))
    for i in range(L):
        s = i + 3
        for prefix, is_norm in [("input_layernorm", True), ("self_attention.query_key_value", False),
                                ("self_attention.dense", False), ("post_attention_layernorm", True),
                                ("mlp.dense_h_to_4h", False), ("mlp.dense_4h_to_h", False)]:
            modules.append((s, is_norm, [f"{prefix}.weight", f"{prefix}.bias"]))
    modules.append((L + 4, True, ["weight", "bias"]))
    decay, no_decay = [], []
    for owner, is_norm, keys in modules:
        for key in keys:
            name = f"tied_modules.embed.{key}" if owner == "embed" else f"{owner}.{key}"
            (no_decay if is_norm or key.endswith("bias") else decay).append(name)
    half = len(decay) // 2
    return [g for g in (decay[:half], decay[half:], no_decay) if g]


def shapes_by_engine_name(rotary):
    return {engine_name(spec, key): shape for spec, keys in layer_files(rotary).items()
            for key, shape in keys if "inv_freq" not in key}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# --- checks -------------------------------------------------------------------------------------


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def check_layer_files(folder, layout, rotary, tag):
    weights = {}
    for spec, keys in layer_files(rotary).items():
        name = f"layer_{spec:02d}-model_00-model_states.pt"
        sd = load(os.path.join(folder, name))
        check(type(sd) is collections.OrderedDict, f"{tag} {name}: an OrderedDict")
        check(not hasattr(sd, "_metadata"), f"{tag} {name}: no _metadata")
        check(list(sd.keys()) == [k for k, _ in keys], f"{tag} {name}: keys {list(sd.keys())}")
        for key, shape in keys:
            t = sd.get(key)
            if t is None:
                continue
            check(list(t.shape) == shape, f"{tag} {name}:{key} shape {list(t.shape)} != {shape}")
            check(t.dtype == DTYPES[layout], f"{tag} {name}:{key} dtype {t.dtype}")
            check(t.storage().size() == t.numel(), f"{tag} {name}:{key} is a clone")
            check(not t.requires_grad, f"{tag} {name}:{key} requires_grad off")
            if "inv_freq" in key:
                want = 1.0 / (10000 ** (torch.arange(0, H // 2, 2).float() / (H // 2)))
                check(torch.equal(t, want.to(t.dtype)), f"{tag} {name}: inv_freq values")
            else:
                weights[engine_name(spec, key)] = t
    return weights


def check_rng(sd, tag):
    random.seed(42)
    check(sd["random_rng_state"] == random.getstate(), f"{tag}: random_rng_state = random.seed(42)")
    random.setstate(sd["random_rng_state"])
    np.random.seed(42)
    want = np.random.get_state()
    got = sd["np_rng_state"]
    check(got[0] == "MT19937" and np.array_equal(got[1], want[1]) and got[1].dtype == np.uint32
          and tuple(got[2:]) == tuple(want[2:]), f"{tag}: np_rng_state = np.random.seed(42)")
    np.random.set_state(got)
    torch.manual_seed(42)
    check(torch.equal(sd["torch_rng_state"], torch.get_rng_state()),
          f"{tag}: torch_rng_state = torch.manual_seed(42)")
    torch.set_rng_state(sd["torch_rng_state"])
    cuda = sd["cuda_rng_state"]
    check(cuda.dtype == torch.uint8 and list(cuda.shape) == [16]
          and int.from_bytes(cuda.numpy().tobytes()[:8], "little") == 42, f"{tag}: cuda_rng_state")
    tracker = sd["rng_tracker_states"]
    check(list(tracker) == ["model-parallel-rng"]
          and int.from_bytes(tracker["model-parallel-rng"].numpy().tobytes()[:8], "little")
          == 42 + 2718, f"{tag}: rng_tracker_states")


def check_adam_groups(param_groups, groups, tag, ids):
    check(len(param_groups) == len(groups), f"{tag}: {len(param_groups)} param groups")
    for g, group in enumerate(param_groups):
        decay = g < len(groups) - 1
        keys = (["lr", "bias_correction", "betas", "eps", "weight_decay", "step", "params"] if decay
                else ["weight_decay", "lr", "bias_correction", "betas", "eps", "step", "params"])
        check(list(group.keys()) == keys, f"{tag}: group {g} keys {list(group.keys())}")
        check(group["betas"] == (0.9, 0.95) and type(group["betas"]) is tuple, f"{tag}: betas")
        check(group["lr"] == 3e-4 and group["eps"] == 1e-8 and group["bias_correction"] is True
              and group["step"] == 13, f"{tag}: group {g} hyperparameters")
        check(group["weight_decay"] == (0.1 if decay else 0.0), f"{tag}: group {g} weight_decay")
        check(group["params"] == ids[g], f"{tag}: group {g} params {group['params']}")


def check_moments(state, sizes, tag):
    check(sorted(state.keys()) == list(range(len(sizes))), f"{tag}: state keys {list(state)}")
    for k, size in enumerate(sizes):
        entry = state.get(k, {})
        check(list(entry.keys()) == ["exp_avg", "exp_avg_sq"], f"{tag}: state[{k}] keys")
        for key in ("exp_avg", "exp_avg_sq"):
            t = entry.get(key)
            check(t is not None and t.dtype == torch.float32 and list(t.shape) == size,
                  f"{tag}: state[{k}].{key} {None if t is None else list(t.shape)} != {size}")


def cut(flat, names, shapes):
    out, at = {}, 0
    for name in names:
        n = numel(shapes[name])
        out[name] = flat[at:at + n].view(shapes[name])
        at += n
    return out, at


def check_rebuilt(masters, weights, tag):
    check(set(masters) == set(weights), f"{tag}: rebuilt names {sorted(set(masters) ^ set(weights))}")
    for name, w in weights.items():
        m = masters.get(name)
        check(m is not None and m.dtype == torch.float32 and torch.equal(m, w.float()),
              f"{tag}: rebuilt fp32 {name} equals the layer file's weight")


def check_model_states(folder, layout, rotary, weights, tag):
    sd = load(os.path.join(folder, "mp_rank_00_model_states.pt"))
    check(list(sd.keys()) == MP_KEYS, f"{tag}: mp_rank keys {list(sd.keys())}")
    groups = expected_groups(rotary)
    shapes = shapes_by_engine_name(rotary)
    check(sd["module"] is None and sd["data_sampler"] is None and sd["random_ltd"] is None,
          f"{tag}: module/data_sampler/random_ltd None")
    want_buffers = ([f"{i + 3}.self_attention.rotary_emb.inv_freq" for i in range(L)] if rotary
                    else [])
    check(sd["buffer_names"] == want_buffers, f"{tag}: buffer_names {sd['buffer_names']}")
    check(sd["sparse_tensor_module_names"] == set(), f"{tag}: sparse_tensor_module_names")
    check((sd["skipped_steps"], sd["global_steps"], sd["global_samples"]) == (0, 12, 96),
          f"{tag}: step counters")
    check(sd["dp_world_size"] == 1 and sd["mp_world_size"] == 1, f"{tag}: world sizes")
    check(sd["ds_version"] == "0.8.3", f"{tag}: ds_version")
    check(sd["ds_config"] == {"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8,
                              "gradient_clipping": 1.0, "zero_optimization": {"stage": 0},
                              "bf16": {"enabled": False}, "steps_per_print": 2000},
          f"{tag}: ds_config {sd['ds_config']}")
    check(sd["lr_scheduler"] == {"max_lr": 6e-4, "warmup_steps": 16.0, "num_steps": 96,
                                 "warmup_tokens": 0, "num_tokens": 768, "decay_style": "cosine",
                                 "decay_steps": 800, "min_lr": 6e-5}, f"{tag}: lr_scheduler")
    args = sd["args"]
    check(isinstance(args, argparse.Namespace), f"{tag}: args is a Namespace")
    check((args.iteration, args.consumed_train_samples, args.consumed_valid_samples,
           args.consumed_train_tokens, args.num_layers) == (12, 96, 16, 768, 2), f"{tag}: args")
    check(args.params_dtype is torch.bfloat16 and args.position_embedding_type.value == 2,
          f"{tag}: args dtype and enum")
    check(sd["checkpoint_version"] == 3.0 and type(sd["checkpoint_version"]) is float,
          f"{tag}: checkpoint_version")
    check(sd["iteration"] == 12 and sd["tokens"] == 768, f"{tag}: iteration and tokens")
    check(sd["checkpoint_info"] == {"padded_vocab_size": 64, "original_vocab_size": 50},
          f"{tag}: checkpoint_info")
    check_rng(sd, tag)

    if layout in ("fp16-zero1", "bf16"):
        ps = sd["param_shapes"]
        check(sd["optimizer"] is None, f"{tag}: optimizer None for ZeRO/bf16")
        check(isinstance(ps, list) and [list(d) for d in ps] == groups,
              f"{tag}: param_shapes names/order")
        for d in ps:
            check(type(d) is collections.OrderedDict, f"{tag}: param_shapes entries OrderedDict")
            for name, size in d.items():
                check(type(size) is torch.Size and list(size) == shapes[name],
                      f"{tag}: param_shapes {name}")
        return ps
    check(sd["param_shapes"] is None, f"{tag}: param_shapes None without ZeRO/bf16")
    opt = sd["optimizer"]
    if layout == "fp32":
        check(list(opt.keys()) == ["state", "param_groups"], f"{tag}: optimizer keys")
        ids, k = [], 0
        for g in groups:
            ids.append(list(range(k, k + len(g))))
            k += len(g)
        check_adam_groups(opt["param_groups"], groups, tag, ids)
        order = [name for g in groups for name in g]
        check_moments(opt["state"], [shapes[n] for n in order], tag)
        return None
    # fp16, ZeRO 0: FP16_Optimizer (§2.6)
    check(list(opt.keys()) == ["dynamic_loss_scale", "cur_scale", "cur_iter", "last_overflow_iter",
                               "scale_factor", "scale_window", "optimizer_state_dict",
                               "fp32_groups_flat", "clip_grad"], f"{tag}: FP16_Optimizer keys")
    check((opt["dynamic_loss_scale"], opt["cur_scale"], opt["cur_iter"], opt["last_overflow_iter"],
           opt["scale_window"], opt["clip_grad"]) == (True, 32768.0, 12, 3, 1000, 1.0),
          f"{tag}: FP16_Optimizer scalars")
    base = opt["optimizer_state_dict"]
    check_adam_groups(base["param_groups"], groups, tag, [[g] for g in range(len(groups))])
    sizes = [sum(numel(shapes[n]) for n in g) for g in groups]
    check_moments(base["state"], [[n] for n in sizes], tag)
    masters = {}
    for g, flat in enumerate(opt["fp32_groups_flat"]):
        check(flat.requires_grad and list(flat.shape) == [sizes[g]], f"{tag}: fp32_groups_flat[{g}]")
        part, _ = cut(flat.detach(), groups[g], shapes)
        masters.update(part)
    check_rebuilt(masters, weights, tag)
    return None


def check_zero_file(folder, layout, rotary, weights, param_shapes, tag):
    name = ("bf16_" if layout == "bf16" else "") + "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    sd = load(os.path.join(folder, name))
    check(list(sd.keys()) == ["optimizer_state_dict", "ds_config", "ds_version"], f"{tag}: outer keys")
    osd = sd["optimizer_state_dict"]
    groups = expected_groups(rotary)
    shapes = shapes_by_engine_name(rotary)
    sizes = [sum(numel(shapes[n]) for n in g) for g in groups]
    aligned = [(n + 1) // 2 * 2 for n in sizes]
    if layout == "bf16":
        keys = ["clip_grad", "base_optimizer_state", "single_partition_of_fp32_groups",
                "group_paddings", "partition_count", "ds_version", "param_slice_mappings"]
    else:
        keys = ["loss_scaler", "dynamic_loss_scale", "overflow", "clip_grad", "base_optimizer_state",
                "single_partition_of_fp32_groups", "zero_stage", "group_paddings",
                "partition_count", "ds_version", "param_slice_mappings"]
        scaler = osd["loss_scaler"]
        check(type(scaler).__name__ == "DynamicLossScaler", f"{tag}: DynamicLossScaler")
        check(list(vars(scaler)) == ["cur_scale", "dynamic", "cur_iter", "last_overflow_iter",
                                     "scale_factor", "scale_window", "min_scale", "delayed_shift",
                                     "cur_hysteresis", "consecutive_hysteresis",
                                     "raise_error_at_min_scale", "dtype"], f"{tag}: scaler fields")
        check((scaler.cur_scale, scaler.cur_iter, scaler.cur_hysteresis, scaler.dtype)
              == (32768.0, 12, 2, torch.float16), f"{tag}: scaler values")
        check(osd["dynamic_loss_scale"] is True and osd["overflow"] is False, f"{tag}: flags")
        check(osd["zero_stage"] == 1 and type(osd["zero_stage"]).__name__ == "ZeroStageEnum",
              f"{tag}: zero_stage")
    check(list(osd.keys()) == keys, f"{tag}: wrapper keys {list(osd.keys())}")
    check(osd["clip_grad"] == 1.0 and osd["ds_version"] == "0.8.3", f"{tag}: clip_grad/version")
    check(osd["group_paddings"] == [a - n for a, n in zip(aligned, sizes)], f"{tag}: group_paddings")
    check(osd["partition_count"] == [1] * len(groups), f"{tag}: partition_count")
    base = osd["base_optimizer_state"]
    check_adam_groups(base["param_groups"], groups, tag, [[g] for g in range(len(groups))])
    check_moments(base["state"], [[a] for a in aligned], tag)
    for g, mapping in enumerate(osd["param_slice_mappings"]):
        check(type(mapping) is collections.OrderedDict and list(mapping) == groups[g],
              f"{tag}: param_slice_mappings[{g}] names")
        start = 0
        for pname, address in mapping.items():
            check(type(address).__name__ == "fragment_address"
                  and (address.numel, address.start) == (numel(shapes[pname]), start),
                  f"{tag}: fragment of {pname}")
            start += numel(shapes[pname])
    # §2.4 last paragraph: concatenate the ranks' partitions (D = 1), drop bf16's padding, cut.
    masters = {}
    for g, part in enumerate(osd["single_partition_of_fp32_groups"]):
        want = sizes[g] if layout == "fp16-zero1" else aligned[g]
        check(part.requires_grad and list(part.shape) == [want], f"{tag}: partition {g} shape")
        flat = part.detach()
        if layout == "bf16" and osd["group_paddings"][g]:
            flat = flat[:-osd["group_paddings"][g]]
        pieces, used = cut(flat, list(param_shapes[g]), {k: list(v) for k, v in param_shapes[g].items()})
        check(used == flat.numel(), f"{tag}: partition {g} fully used")
        masters.update(pieces)
    check_rebuilt(masters, weights, tag)


def resave_everything(root):
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(".pt"):
                path = os.path.join(dirpath, name)
                torch.save(load(path), path)


def run_layout(tmp, layout, rotary=False):
    tag = layout + (" rotary" if rotary else "")
    out = os.path.join(tmp, tag.replace(" ", "-"))
    extra = ["rotary"] if rotary else []
    result = subprocess.run([PROBE, "write", out, layout] + extra, capture_output=True, text=True)
    check(result.returncode == 0, f"{tag}: probe write: {result.stderr.strip()}")
    if result.returncode != 0:
        return
    with open(os.path.join(out, "latest")) as f:
        check(f.read() == "global_step12", f"{tag}: latest")
    folder = os.path.join(out, "global_step12")
    want = sorted([f"layer_{s:02d}-model_00-model_states.pt" for s in layer_files(rotary)]
                  + ["mp_rank_00_model_states.pt"]
                  + ({"fp16-zero1": ["zero_pp_rank_0_mp_rank_00_optim_states.pt"],
                      "bf16": ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"]}.get(layout, [])))
    check(sorted(os.listdir(folder)) == want, f"{tag}: files {sorted(os.listdir(folder))}")
    check(sorted(os.listdir(out)) == ["global_step12", "latest"], f"{tag}: no temporaries")
    weights = check_layer_files(folder, layout, rotary, tag)
    param_shapes = check_model_states(folder, layout, rotary, weights, tag)
    if param_shapes is not None:
        check_zero_file(folder, layout, rotary, weights, param_shapes, tag)

    resave_everything(out)
    result = subprocess.run([PROBE, "verify", out, layout] + extra, capture_output=True, text=True)
    check(result.returncode == 0 and result.stdout.strip() == "ok",
          f"{tag}: probe verify after torch.save: {result.stderr.strip()}")


def main():
    install_stubs()
    with tempfile.TemporaryDirectory() as tmp:
        for layout in ("fp32", "fp16", "fp16-zero1", "bf16"):
            run_layout(tmp, layout)
        run_layout(tmp, "bf16", rotary=True)
    print(f"{checks[0]} checks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
