"""Oracle test: torch.load reads the argparse.Namespace mds saves as a checkpoint's `args`
(checkpoints.md §1.2) into the objects upstream's own checkpoints hold.

megatron_args_probe validates a pretrain command line and writes {"args": Namespace, ...} with
libcore's .pt writer; torch.load (weights_only=False, as Megatron loads checkpoints) must give an
argparse.Namespace whose attributes have upstream's names, order, Python types and values:
params_dtype a torch dtype, position_embedding_type a megatron.enums.PositionEmbeddingType member
(a stand-in module with upstream's member values is put on sys.path), deepspeed_configuration the
JSON as a dict.

Environment: MDS_PYTHON (with torch) runs this script; MDS_TEST_TOOLS holds megatron_args_probe.
"""

import argparse
import enum
import json
import os
import subprocess
import sys
import tempfile

import torch

PROBE = os.path.join(os.environ.get("MDS_TEST_TOOLS", "build/tests/tools"), "megatron_args_probe")
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def equal(actual, expected, what):
    check(type(actual) is type(expected) and actual == expected,
          f"{what}: got {actual!r}, expected {expected!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        enums = os.path.join(tmp, "megatron")
        os.makedirs(enums)
        open(os.path.join(enums, "__init__.py"), "w").close()
        with open(os.path.join(enums, "enums.py"), "w") as f:
            f.write("import enum\n\nclass PositionEmbeddingType(enum.Enum):\n"
                    "    rotary = 1\n    absolute = 2\n    alibi = 3\n")
        sys.path.insert(0, tmp)
        from megatron.enums import PositionEmbeddingType

        ds_config = {"train_micro_batch_size_per_gpu": 4, "train_batch_size": 8,
                     "gradient_clipping": 1.0, "fp16": {"enabled": True, "loss_scale": 0,
                                                        "initial_scale_power": 12},
                     "zero_optimization": {"stage": 1}, "steps_per_print": 2000}
        config = os.path.join(tmp, "cfg.json")
        with open(config, "w") as f:
            json.dump(ds_config, f)
        out = os.path.join(tmp, "args.pt")
        flags = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
                 "--seq-length", "256", "--max-position-embeddings", "256",
                 "--micro-batch-size", "4", "--global-batch-size", "8", "--train-iters", "2000",
                 "--lr", "6e-4", "--min-lr", "6e-5", "--lr-decay-style", "cosine",
                 "--lr-warmup-iters", "100", "--weight-decay", "0.1", "--clip-grad", "1.0",
                 "--data-path", "1.0", "data/x_text_document", "--vocab-file", "vocab.json",
                 "--merge-file", "merges.txt", "--split", "969,30,1", "--eval-interval", "200",
                 "--eval-iters", "10", "--log-interval", "10", "--save", "ckpt",
                 "--save-interval", "500", "--load", "ckpt", "--fp16", "--zero-stage", "1",
                 "--deepspeed", "--deepspeed_config", config]
        result = subprocess.run([PROBE, out] + flags, capture_output=True, text=True)
        check(result.returncode == 0, f"probe failed: {result.stderr}")
        if result.returncode != 0:
            return
        check("note: --zero-stage" in result.stdout, f"zero-stage note missing: {result.stdout}")

        state = torch.load(out, weights_only=False)
        args = state["args"]
        check(type(args) is argparse.Namespace, f"args is {type(args)}")
        equal(state["checkpoint_version"], 3.0, "checkpoint_version")
        names = list(vars(args))
        equal(names[:6], ["num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                          "kv_channels", "max_position_embeddings"], "first attributes")
        equal(names[-3:], ["do_train", "do_valid", "do_test"], "last attributes")
        check(len(names) == len(set(names)), "attribute names repeat")
        equal(args.num_layers, 4, "num_layers")
        equal(args.ffn_hidden_size, 1024, "ffn_hidden_size")
        equal(args.lr, 6e-4, "lr")
        equal(args.min_lr, 6e-5, "min_lr")
        equal(args.lr_decay_style, "cosine", "lr_decay_style")
        equal(args.data_path, ["1.0", "data/x_text_document"], "data_path")
        equal(args.split, "969,30,1", "split")
        equal(args.pad_vocab_size_to, None, "pad_vocab_size_to")
        equal(args.zero_stage, 1, "zero_stage")
        equal(args.zero_reduce_bucket_size, 0.0, "zero_reduce_bucket_size")
        equal(args.initial_loss_scale, 4294967296, "initial_loss_scale")
        equal(args.no_save_optim, None, "no_save_optim")
        equal(args.fp16, True, "fp16")
        check(args.params_dtype is torch.float16, f"params_dtype {args.params_dtype!r}")
        check(args.position_embedding_type is PositionEmbeddingType.absolute,
              f"position_embedding_type {args.position_embedding_type!r}")
        equal(args.deepspeed_configuration, ds_config, "deepspeed_configuration")
        equal(args.padded_vocab_size, 50304, "padded_vocab_size")
        equal(args.consumed_train_samples, 80, "consumed_train_samples")
        equal(args.consumed_train_tokens, 80 * 256, "consumed_train_tokens")
        equal(args.iteration, 10, "iteration")
        equal(args.gigaflos_no_embeds, 0, "gigaflos_no_embeds")
        equal(args.retriever_report_topk_accuracies, [], "retriever_report_topk_accuracies")

        # torch.save of what torch loaded reloads to the same Namespace.
        again = os.path.join(tmp, "again.pt")
        torch.save(state, again)
        check(vars(torch.load(again, weights_only=False)["args"]) == vars(args),
              "torch.save round trip changed the Namespace")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("megatron_args_torch_test: ok")


if __name__ == "__main__":
    main()
