#!/usr/bin/env python3
"""The CPU GPT model against an independent PyTorch GPT-2 (reference_gpt.py).

For each tiny configuration the gpt_grad_probe test tool initializes the parameters, runs one
micro-batch forward and backward (dropout 0, loss scale 1) and writes its weights, batch, loss and
gradients; PyTorch loads them, recomputes the loss with autograd in float64 from the same weights
and batch, and every gradient tensor must agree: max|ours - ref| / max|ref| <= 1e-5 per tensor
(the loss and the per-token losses of forward_loss too). The worst tensor of each case is printed.

Environment: MDS_PYTHON runs this script (it must see torch); MDS_TEST_TOOLS holds gpt_grad_probe.
"""

import os
import pathlib
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_gpt  # noqa: E402

TOLERANCE = 1e-5
PROBE = pathlib.Path(os.environ["MDS_TEST_TOOLS"]) / "gpt_grad_probe"
REFERENCE_DTYPE = torch.float64

# (name, dims, micro batch, probe flags). L=3 gives layer-scaling coefficients 1, 1, 2. All but the
# first case perturb the initial weights (--perturb) so that biases are non-zero and LayerNorm
# weights not one, which the forward pass then has to use.
CASES = [
    ("L1 h16 n2 s8 b2 (init)",
     dict(num_layers=1, hidden_size=16, num_attention_heads=2, seq_length=8,
          padded_vocab_size=64), 2, []),
    ("L3 h24 n3 s12 b2",
     dict(num_layers=3, hidden_size=24, num_attention_heads=3, seq_length=12,
          padded_vocab_size=128), 2, ["--perturb"]),
    ("L3 no layer scaling",
     dict(num_layers=3, hidden_size=24, num_attention_heads=3, seq_length=12,
          padded_vocab_size=128, apply_query_key_layer_scaling=False), 2,
     ["--no-query-key-layer-scaling", "--perturb"]),
    ("L3 checkpoint activations",
     dict(num_layers=3, hidden_size=24, num_attention_heads=3, seq_length=12,
          padded_vocab_size=128), 2, ["--checkpoint-activations", "--perturb"]),
    ("L4 ckpt 2 layers, b1",
     dict(num_layers=4, hidden_size=32, num_attention_heads=4, seq_length=16,
          padded_vocab_size=96), 1,
     ["--checkpoint-activations", "--checkpoint-num-layers", "2", "--perturb"]),
    ("L2 gelu openai",
     dict(num_layers=2, hidden_size=16, num_attention_heads=4, seq_length=8,
          padded_vocab_size=64, gelu="openai"), 3, ["--gelu", "openai", "--perturb"]),
    ("L2 gelu erf",
     dict(num_layers=2, hidden_size=16, num_attention_heads=4, seq_length=8,
          padded_vocab_size=64, gelu="erf"), 3, ["--gelu", "erf", "--perturb"]),
    ("L2 post-LN residual",
     dict(num_layers=2, hidden_size=16, num_attention_heads=2, seq_length=8,
          padded_vocab_size=64, apply_residual_connection_post_layernorm=True), 2,
     ["--apply-residual-connection-post-layernorm", "--perturb"]),
    ("L2 embedding LayerNorm",
     dict(num_layers=2, hidden_size=16, num_attention_heads=2, seq_length=8,
          padded_vocab_size=64, embed_layernorm=True), 2, ["--embed-layernorm", "--perturb"]),
    # L3: the layer-scaling coefficients 1, 1, 2 divide the bias (beta = 1/coeff); 12 heads is
    # not a power of two, so the interleaved slopes are used too.
    ("L3 ALiBi, 12 heads",
     dict(num_layers=3, hidden_size=48, num_attention_heads=12, seq_length=12,
          padded_vocab_size=64, alibi=True), 2, ["--alibi", "--perturb"]),
    ("L2 ALiBi, BLOOM's flags",
     dict(num_layers=2, hidden_size=16, num_attention_heads=4, seq_length=8,
          padded_vocab_size=64, alibi=True, embed_layernorm=True), 2,
     ["--alibi", "--embed-layernorm", "--perturb"]),
]

failures = []


def rel_error(got, want):
    got, want = got.to(torch.float64), want.to(torch.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = max(want.abs().max().item(), 1e-30)
    return (got - want).abs().max().item() / scale


def run_probe(folder, dims, micro_batch, flags, seed):
    cmd = [str(PROBE), "--num-layers", dims["num_layers"], "--hidden-size", dims["hidden_size"],
           "--num-attention-heads", dims["num_attention_heads"], "--seq-length",
           dims["seq_length"], "--padded-vocab-size", dims["padded_vocab_size"],
           "--micro-batch-size", micro_batch, "--seed", seed, *flags, "--out", folder]
    subprocess.run([str(c) for c in cmd], check=True)


def check_case(name, dims_kwargs, micro_batch, flags, seed):
    with tempfile.TemporaryDirectory() as tmp:
        run_probe(tmp, dims_kwargs, micro_batch, flags, seed)
        weights = torch.load(os.path.join(tmp, "weights.pt"))
        grads = torch.load(os.path.join(tmp, "grads.pt"))
        batch = torch.load(os.path.join(tmp, "batch.pt"))
        token_losses = torch.load(os.path.join(tmp, "token_losses.pt"))["token_losses"]
        loss_lines = pathlib.Path(tmp, "loss.txt").read_text().split()
    dims = reference_gpt.GptDims(**dims_kwargs)
    expected_names = list(reference_gpt.parameter_shapes(dims).items())
    got_names = [(k, tuple(v.shape)) for k, v in weights.items()]
    if got_names != expected_names:
        failures.append(f"{name}: parameter names/shapes {got_names} != {expected_names}")
        return
    if list(grads.keys()) != list(weights.keys()):
        failures.append(f"{name}: grads.pt keys differ from weights.pt")
        return

    model = reference_gpt.GptReference(dims, REFERENCE_DTYPE)
    loss, ref_grads = model.loss_and_grads(weights, batch)
    with torch.no_grad():
        ref_tokens = model.token_losses(model.leaf_weights(weights), batch["tokens"],
                                        batch["labels"], batch["position_ids"])
    results = [("loss (forward_backward)", abs(float(loss_lines[0]) - loss) / abs(loss)),
               ("loss (forward_loss)", abs(float(loss_lines[1]) - loss) / abs(loss)),
               ("token_losses", rel_error(token_losses, ref_tokens))]
    results += [(key, rel_error(grads[key], ref_grads[key])) for key in ref_grads]
    # An all-zero reference gradient would make its comparison vacuous.
    for key, grad in ref_grads.items():
        if not grad.abs().max().item() > 0:
            failures.append(f"{name}: reference gradient of {key} is zero")
    worst = max(results, key=lambda item: item[1])
    bad = [(k, e) for k, e in results if not e <= TOLERANCE]
    print(f"{name:<28} loss {loss:.9g} ours {loss_lines[0]}  worst {worst[0]} rel err "
          f"{worst[1]:.3e} {'FAIL' if bad else 'ok'}")
    for key, error in bad:
        failures.append(f"{name}: {key} rel err {error:.3e}")


def main():
    if not PROBE.exists():
        sys.exit(f"missing {PROBE}")
    for index, (name, dims, micro_batch, flags) in enumerate(CASES):
        check_case(name, dims, micro_batch, flags, seed=1234 + index)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"all {len(CASES)} cases within {TOLERANCE:g} (reference in {REFERENCE_DTYPE})")


if __name__ == "__main__":
    main()
