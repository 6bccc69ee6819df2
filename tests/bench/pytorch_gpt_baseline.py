#!/usr/bin/python3
"""PyTorch baseline for tests/bench/pretrain_bench.sh (CPU) and gpu_train_bench.sh (CUDA): the GPT-2
model pretrain trains (upstream's GPTModelPipe at T = P = 1: pre-LN layers, fused QKV, causal
softmax, tanh GELU, tied word embeddings, padded vocabulary) with the same step as pretrain's
DeepSpeed path: M = G/b micro-batches of forward + backward (loss / M), global gradient-norm
clipping, AdamW with decoupled weight decay (no decay on biases and LayerNorm), zeroed gradients.
On CUDA the fast PyTorch recipe is available: --dtype bf16 (autocast over fp32 parameters, as
bf16 training keeps fp32 masters), --attention sdpa (F.scaled_dot_product_attention, flash
kernels), --compile (torch.compile of the model), fused AdamW.

Tokens are random (the arithmetic does not depend on them). Prints one line per step and a final
"RESULT" line with the mean step time of the steps after the warm-up ones.
Threads: torch.set_num_threads(--threads); OpenBLAS (torch's BLAS here) reads
OPENBLAS_NUM_THREADS, which the driver sets to the same number.
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F


class Layer(torch.nn.Module):
    def __init__(self, h, heads, attention_dropout, hidden_dropout, sdpa):
        super().__init__()
        self.heads = heads
        self.sdpa = sdpa
        self.ln1 = torch.nn.LayerNorm(h, eps=1e-5)
        self.qkv = torch.nn.Linear(h, 3 * h)
        self.dense = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h, eps=1e-5)
        self.fc1 = torch.nn.Linear(h, 4 * h)
        self.fc2 = torch.nn.Linear(4 * h, h)
        self.attention_dropout = attention_dropout
        self.hidden_dropout = hidden_dropout

    def forward(self, x, causal):  # x: [s, b, h] as Megatron
        s, b, h = x.shape
        hn = h // self.heads
        # Megatron's fused QKV layout: [s, b, np, 3·hn] split into q, k, v.
        qkv = self.qkv(self.ln1(x)).view(s, b, self.heads, 3 * hn)
        q, k, v = torch.split(qkv, hn, dim=-1)
        q = q.reshape(s, b * self.heads, hn).transpose(0, 1)  # [b·np, s, hn]
        k = k.reshape(s, b * self.heads, hn).transpose(0, 1)
        v = v.reshape(s, b * self.heads, hn).transpose(0, 1)
        if self.sdpa:  # torch >= 2.0: fused (flash) attention, no [s, s] scores in memory
            context = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attention_dropout,
                                                     is_causal=True)
        else:
            scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(hn))
            scores = scores.masked_fill(causal, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            probs = F.dropout(probs, self.attention_dropout, training=True)
            context = torch.bmm(probs, v)
        context = context.transpose(0, 1).reshape(s, b, h)
        x = x + F.dropout(self.dense(context), self.hidden_dropout, training=True)
        y = F.gelu(self.fc1(self.ln2(x)), approximate="tanh")
        return x + F.dropout(self.fc2(y), self.hidden_dropout, training=True)


class Gpt(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        h = args.hidden_size
        self.word = torch.nn.Parameter(torch.empty(args.padded_vocab, h).normal_(0, 0.02))
        self.position = torch.nn.Parameter(torch.empty(args.seq_length, h).normal_(0, 0.02))
        self.layers = torch.nn.ModuleList(
            Layer(h, args.heads, args.attention_dropout, args.hidden_dropout,
                  args.attention == "sdpa")
            for _ in range(args.layers))
        self.final_ln = torch.nn.LayerNorm(h, eps=1e-5)
        self.hidden_dropout = args.hidden_dropout
        s = args.seq_length
        self.register_buffer("causal", torch.ones(s, s, dtype=torch.bool).triu(1))

    def forward(self, tokens, labels, loss_mask):  # [b, s] each
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = F.embedding(tokens, self.word) + F.embedding(positions, self.position)
        x = F.dropout(x, self.hidden_dropout, training=True).transpose(0, 1).contiguous()
        for layer in self.layers:
            x = layer(x, self.causal)
        logits = F.linear(self.final_ln(x), self.word)  # [s, b, Vp], tied embeddings
        losses = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.t().reshape(-1),
                                 reduction="none")
        mask = loss_mask.t().reshape(-1)
        return (losses * mask).sum() / mask.sum()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--hidden-size", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--seq-length", type=int, required=True)
    p.add_argument("--micro-batch-size", type=int, required=True)
    p.add_argument("--global-batch-size", type=int, required=True)
    p.add_argument("--padded-vocab", type=int, default=50304)
    p.add_argument("--attention-dropout", type=float, default=0.1)
    p.add_argument("--hidden-dropout", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: torch.autocast over fp32 parameters")
    p.add_argument("--attention", choices=["explicit", "sdpa"], default="explicit")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--iters", type=int, default=6, help="steps in all")
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the mean")
    p.add_argument("--foreach", choices=["default", "on", "off"], default="on",
                   help="AdamW's multi-tensor implementation (on: like upstream's FusedAdam, and "
                   "faster here than torch 1.13's CPU default)")
    args = p.parse_args()
    if args.iters <= args.warmup:
        sys.exit("--iters must exceed --warmup")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    model = Gpt(args)
    decay = [q for n, q in model.named_parameters() if q.dim() > 1]
    no_decay = [q for n, q in model.named_parameters() if q.dim() <= 1]
    device = torch.device(args.device)
    model = model.to(device)
    cuda = device.type == "cuda"
    options = {"foreach": {"default": None, "on": True, "off": False}[args.foreach]}
    if cuda:
        options = {"fused": True}  # one kernel for every tensor, as DeepSpeed's FusedAdam
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.999), eps=1e-8, **options)
    step_model = torch.compile(model) if args.compile else model
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.dtype == "bf16")
    b, s = args.micro_batch_size, args.seq_length
    micro_batches = args.global_batch_size // b
    tokens = torch.randint(0, 50257, (micro_batches, b, s + 1), device=device)
    loss_mask = torch.ones(b, s, device=device)
    times = []
    for it in range(args.iters):
        start = time.perf_counter()
        for mb in range(micro_batches):
            with autocast:
                loss = step_model(tokens[mb, :, :-1], tokens[mb, :, 1:], loss_mask)
            (loss / micro_batches).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        print(f"step {it + 1}: {times[-1]:.4f} s, loss {loss.item():.4f}", flush=True)
    timed = times[args.warmup:]
    tokens_per_s = args.global_batch_size * s / statistics.mean(timed)
    print(f"RESULT mean_step_s={statistics.mean(timed):.6f} min_step_s={min(timed):.6f} "
          f"steps={len(timed)} threads={torch.get_num_threads()} tokens_per_s={tokens_per_s:.1f}",
          flush=True)


if __name__ == "__main__":
    main()
