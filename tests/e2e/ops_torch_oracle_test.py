"""Compares the CPU reference ops with PyTorch (Debian's python3-torch) on random fp32 inputs.

Each case writes raw float32/int64 inputs to a scratch folder, runs the ops_probe test tool (which
runs our forward and backward) and checks every output against PyTorch's forward and autograd
backward written as upstream Megatron-DeepSpeed computes it. The error measure is
max|ours - torch| / max|torch| per tensor, which must be <= 1e-5.

Environment: MDS_PYTHON runs this script (it must see torch); MDS_TEST_TOOLS is the folder holding
ops_probe.
"""

import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

TOLERANCE = 1e-5
PROBE = os.path.join(os.environ["MDS_TEST_TOOLS"], "ops_probe")
failures = []


def run_probe(folder, op, *numbers, **inputs):
    for name, value in inputs.items():
        array = value.detach().numpy() if isinstance(value, torch.Tensor) else value
        suffix = ".i64" if array.dtype == np.int64 else ".f32"
        array.astype(array.dtype if suffix == ".i64" else np.float32).tofile(
            os.path.join(folder, name + suffix))
    subprocess.run([PROBE, op, folder, *[str(n) for n in numbers]], check=True)


def ours(folder, name, shape):
    return torch.from_numpy(np.fromfile(os.path.join(folder, name + ".f32"), dtype=np.float32)
                            ).reshape(shape)


def check(case, name, got, want):
    scale = max(want.abs().max().item(), 1e-30)
    error = (got - want).abs().max().item() / scale
    status = "ok" if error <= TOLERANCE else "FAIL"
    print(f"{case:<28} {name:<10} rel err {error:.3e} {status}")
    if error > TOLERANCE:
        failures.append(f"{case} {name}: {error:.3e}")


def case_layernorm(folder, gen):
    rows, cols = 24, 96
    x = torch.randn(rows, cols, generator=gen) * 3 + 1
    w = torch.randn(cols, generator=gen)
    b = torch.randn(cols, generator=gen)
    dout = torch.randn(rows, cols, generator=gen)
    run_probe(folder, "layernorm", rows, cols, x=x, w=w, b=b, dout=dout)
    x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
    out = F.layer_norm(x, (cols,), w, b, eps=1e-5)
    out.backward(dout)
    check("layernorm", "out", ours(folder, "out", (rows, cols)), out.detach())
    check("layernorm", "dx", ours(folder, "dx", (rows, cols)), x.grad)
    check("layernorm", "dweight", ours(folder, "dw", (cols,)), w.grad)
    check("layernorm", "dbias", ours(folder, "db", (cols,)), b.grad)


def upstream_bias_gelu(z):
    # megatron/model/fused_bias_gelu.py: bias_gelu with the bias already added.
    return z * 0.5 * (1.0 + torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z)))


def upstream_bias_gelu_back(g, z):
    tanh_out = torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z))
    ff = 0.5 * z * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * z * z)) + 0.5 * (
        1 + tanh_out)
    return ff * g


def case_gelu(folder, gen):
    n = 4096
    x = torch.randn(n, generator=gen) * 3
    dout = torch.randn(n, generator=gen)
    run_probe(folder, "gelu", n, x=x, dout=dout)
    out, dx = ours(folder, "out", (n,)), ours(folder, "dx", (n,))
    check("gelu (upstream fused)", "out", out, upstream_bias_gelu(x))
    check("gelu (upstream fused)", "dx", dx, upstream_bias_gelu_back(dout, x))
    # PyTorch's own tanh GeLU differs from upstream's only in the rounding of sqrt(2/pi).
    xg = x.clone().requires_grad_()
    reference = F.gelu(xg, approximate="tanh")
    reference.backward(dout)
    check("gelu (torch tanh)", "out", out, reference.detach())
    check("gelu (torch tanh)", "dx", dx, xg.grad)


def upstream_attention(qkv, s, b, np_, hn, coeff):
    """ParallelAttention.forward core (training.md §1.4), fp32, no dropout."""
    mixed = qkv.view(s, b, np_, 3 * hn)
    q, k, v = torch.split(mixed, hn, dim=3)
    q = q.reshape(s, b * np_, hn).transpose(0, 1)
    k = k.reshape(s, b * np_, hn).transpose(0, 1)
    norm_factor = math.sqrt(hn) * coeff
    scores = torch.baddbmm(torch.empty(b * np_, s, s), q, k.transpose(1, 2), beta=0.0,
                           alpha=1.0 / norm_factor).view(b, np_, s, s)
    z = scores * coeff
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    z = z.masked_fill(mask, torch.finfo(z.dtype).min)
    probs = torch.softmax(z, dim=-1)
    v = v.reshape(s, b * np_, hn).transpose(0, 1)
    ctx = torch.bmm(probs.view(b * np_, s, s), v).view(b, np_, s, hn)
    return ctx.permute(2, 0, 1, 3).reshape(s, b, np_ * hn)


def case_attention(folder, gen):
    b, np_, hn = 2, 3, 8
    # s = 150 runs the causal GEMMs in several row blocks (ops/cpu/attention.cpp).
    for s, coeff in ((12, 1), (12, 4), (150, 1)):
        qkv = torch.randn(s, b, np_ * 3 * hn, generator=gen)
        dctx = torch.randn(s, b, np_ * hn, generator=gen)
        run_probe(folder, "attention", s, b, np_, hn, coeff, qkv=qkv, dctx=dctx)
        qkv_g = qkv.clone().requires_grad_()
        ctx = upstream_attention(qkv_g, s, b, np_, hn, coeff)
        ctx.backward(dctx)
        name = f"attention s={s} coeff={coeff}"
        check(name, "ctx", ours(folder, "ctx", ctx.shape), ctx.detach())
        check(name, "dqkv", ours(folder, "dqkv", qkv.shape), qkv_g.grad)


def case_cross_entropy(folder, gen):
    n, v = 20, 300
    logits = torch.randn(n, v, generator=gen) * 4
    targets = torch.randint(0, v, (n,), generator=gen)
    dloss = torch.rand(n, generator=gen)
    run_probe(folder, "cross_entropy", n, v, logits=logits, targets=targets.numpy().astype(np.int64),
              dloss=dloss)
    lg = logits.clone().requires_grad_()
    loss = F.cross_entropy(lg, targets, reduction="none")
    loss.backward(dloss)
    check("cross_entropy", "loss", ours(folder, "loss", (n,)), loss.detach())
    check("cross_entropy", "dlogits", ours(folder, "dlogits", (n, v)), lg.grad)


def case_adamw(folder, gen):
    n, steps = 1000, 5
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.95, 1e-8, 0.1
    p = torch.randn(n, generator=gen)
    grads = [torch.randn(n, generator=gen) * 0.1 for _ in range(steps)]
    zeros = torch.zeros(n)
    run_probe(folder, "adamw", n, steps, lr, b1, b2, eps, wd, p=p, m=zeros, v=zeros,
              **{f"g{i}": g for i, g in enumerate(grads)})
    param = torch.nn.Parameter(p.clone())
    optimizer = torch.optim.AdamW([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    for g in grads:
        param.grad = g.clone()
        optimizer.step()
    state = optimizer.state[param]
    # torch.optim.AdamW decays before the Adam update, apex after: the same decoupled AdamW up to
    # rounding. (Comparing the parameter change instead would measure fp32 cancellation.)
    check("adamw (5 steps)", "param", ours(folder, "p", (n,)), param.detach())
    check("adamw (5 steps)", "exp_avg", ours(folder, "m", (n,)), state["exp_avg"])
    check("adamw (5 steps)", "exp_avg_sq", ours(folder, "v", (n,)), state["exp_avg_sq"])


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(20240611)
    with tempfile.TemporaryDirectory() as folder:
        for case in (case_layernorm, case_gelu, case_attention, case_cross_entropy, case_adamw):
            case(folder, gen)
    if failures:
        print("FAILED:", *failures, sep="\n  ")
        return 1
    print("all ops agree with PyTorch within", TOLERANCE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
