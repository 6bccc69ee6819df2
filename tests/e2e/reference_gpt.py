"""An independent PyTorch reference of upstream's GPT-2 training core (GPTModelPipe at TP = PP = 1).

This module holds no test; gpt_reference_test.py and pretrain_reference_test.py import it.
Everything is written from the specs (training.md §1.1-§1.6, §4.3, §5.3-§5.5, data.md §1, §5.6-§5.11) with
plain torch operations and autograd, so it shares no code with the C++ model it checks:

* GptReference: the forward pass and loss of GPTModelPipe from a dict of tensors keyed by DeepSpeed
  engine names ("tied_modules.embed.word_embeddings.weight", "3.self_attention.dense.bias",
  "<L+4>.weight", ...); gradients come from torch.autograd.
* FusedAdamW, AnnealingLR, clip_grad_norm: the optimizer step, LR schedule and global-norm clipping
  of the DeepSpeed engine with apex FusedAdam.
* IndexedDataset, GptSamples: upstream's sample order from a .bin/.idx pair and the index-map cache
  files (doc_idx, sample_idx, shuffle_idx), which build_index_mappings re-derives with numpy.

The computation dtype is a parameter (torch.float32 or torch.float64); the weights are converted.
"""

import dataclasses
import math
import os
import struct
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

GELU_KINDS = ("tanh", "openai", "erf")


@dataclasses.dataclass
class GptDims:
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    padded_vocab_size: int
    max_position_embeddings: int = 0  # 0: equal to seq_length
    ffn_hidden_size: int = 0  # 0: 4h
    layernorm_epsilon: float = 1e-5
    apply_query_key_layer_scaling: bool = True
    apply_residual_connection_post_layernorm: bool = False
    embed_layernorm: bool = False  # BLOOM's LayerNorm over the word embeddings (eps 1e-5)
    alibi: bool = False  # --position-embedding-type alibi: no position table, a key bias instead
    gelu: str = "tanh"  # tanh (fused bias-GeLU), openai, erf

    def ffn(self):
        return self.ffn_hidden_size or 4 * self.hidden_size

    def max_positions(self):
        return self.max_position_embeddings or self.seq_length

    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


# ---------------------------------------------------------------------------------------------
# Parameter names and shapes (training.md §1.1, §2.2), in upstream registration order.

WORD = "tied_modules.embed.word_embeddings.weight"
POSITION = "tied_modules.embed.position_embeddings.weight"
EMBED_NORM = "tied_modules.embed.word_embeddings.norm"


def layer_spec(layer):
    """Spec index of transformer layer `layer` (0-based): its parameter-name prefix."""
    return layer + 3


def parameter_shapes(dims):
    """OrderedDict engine name -> full shape, in pre-order module registration order."""
    h, f = dims.hidden_size, dims.ffn()
    shapes = OrderedDict()
    shapes[WORD] = (dims.padded_vocab_size, h)
    if dims.embed_layernorm:
        shapes[EMBED_NORM + ".weight"] = (h,)
        shapes[EMBED_NORM + ".bias"] = (h,)
    if not dims.alibi:
        shapes[POSITION] = (dims.max_positions(), h)
    for layer in range(dims.num_layers):
        p = f"{layer_spec(layer)}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "input_layernorm.bias"] = (h,)
        shapes[p + "self_attention.query_key_value.weight"] = (3 * h, h)
        shapes[p + "self_attention.query_key_value.bias"] = (3 * h,)
        shapes[p + "self_attention.dense.weight"] = (h, h)
        shapes[p + "self_attention.dense.bias"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.bias"] = (h,)
        shapes[p + "mlp.dense_h_to_4h.weight"] = (f, h)
        shapes[p + "mlp.dense_h_to_4h.bias"] = (f,)
        shapes[p + "mlp.dense_4h_to_h.weight"] = (h, f)
        shapes[p + "mlp.dense_4h_to_h.bias"] = (h,)
    final = dims.num_layers + 4
    shapes[f"{final}.weight"] = (h,)
    shapes[f"{final}.bias"] = (h,)
    return shapes


def is_no_decay(name):
    """training.md §4.2: LayerNorm parameters and every bias are not weight-decayed."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "bias":
        return True
    module = name.rsplit(".", 1)[0]
    return (module.endswith("layernorm") or module == EMBED_NORM
            or module.split(".")[-1].isdigit())  # "<L+4>.weight"


# ---------------------------------------------------------------------------------------------
# The model (training.md §1.2-§1.6).


def alibi_slopes(n):
    """ALiBi's head slopes (training.md §1.4 step 5), in Python floats."""
    if math.log2(n).is_integer():
        first = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [first ** (k + 1) for k in range(n)]
    below = 2 ** math.floor(math.log2(n))
    return alibi_slopes(below) + alibi_slopes(2 * below)[::2][:n - below]


def alibi_bias(n, s):
    """[n, 1, s]: fp32(slope) * j in fp32, as upstream's tensor before any params-dtype cast."""
    slopes = torch.tensor(alibi_slopes(n), dtype=torch.float32)
    return (slopes[:, None] * torch.arange(s, dtype=torch.float32)[None, :]).unsqueeze(1)


class _FusedBiasGelu(torch.autograd.Function):
    """megatron/model/fused_bias_gelu.py: the tanh form with its hand-written derivative, whose
    result is returned as the gradient of both the GEMM output and the bias."""

    @staticmethod
    def forward(ctx, y, bias):
        ctx.save_for_backward(y, bias)
        x = bias + y
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):
        y, bias = ctx.saved_tensors
        x = bias + y
        t = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
        ff = 0.5 * x * ((1 - t * t) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + t)
        grad = ff * g
        # The bias gradient is reduced over tokens by autograd in upstream (broadcast add).
        return grad, grad.reshape(-1, grad.shape[-1]).sum(0)


def bias_gelu(y, bias, kind):
    if kind == "tanh":
        return _FusedBiasGelu.apply(y, bias)
    x = y + bias
    if kind == "openai":  # megatron/model/utils.py gelu_impl
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)))
    if kind == "erf":  # torch.nn.functional.gelu, the exact form
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    raise ValueError(f"unknown GeLU kind {kind}")


class GptReference:
    """GPTModelPipe's math at TP = PP = 1, dropout 0, from a dict of engine-name tensors."""

    def __init__(self, dims, dtype=torch.float64):
        self.dims = dims
        self.dtype = dtype

    def leaf_weights(self, weights):
        """Copies of `weights` in the computation dtype that require grad."""
        return OrderedDict((k, v.detach().to(self.dtype).clone().requires_grad_(True))
                           for k, v in weights.items())

    def _layernorm(self, x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps=self.dims.layernorm_epsilon)

    def _attention(self, a, w, p, layer):
        """a [s, b, h] -> attention output without its bias, and the bias (§1.4)."""
        d = self.dims
        s, b, h = a.shape
        n, hn = d.num_attention_heads, d.head_dim()
        qkv = a @ w[p + "self_attention.query_key_value.weight"].t() + \
            w[p + "self_attention.query_key_value.bias"]
        # Rows of the fused weight are [head][q, k, v][hn] (checkpoint_version 3.0).
        qkv = qkv.view(s, b, n, 3 * hn)
        q, k, v = torch.split(qkv, hn, dim=-1)
        q = q.reshape(s, b * n, hn).transpose(0, 1)  # [b*n, s, hn]
        k = k.reshape(s, b * n, hn).transpose(0, 1)
        v = v.reshape(s, b * n, hn).transpose(0, 1)
        norm_factor = math.sqrt(hn)
        coeff = None
        if d.apply_query_key_layer_scaling:
            coeff = max(1, layer)  # GPTModelPipe numbers layers from 0
            norm_factor *= coeff
        scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / norm_factor)
        scores = scores.view(b, n, s, s)
        if d.alibi:  # baddbmm(alibi, q, kᵀ, beta=1/coeff, alpha=1/norm_factor)
            beta = 1.0 / coeff if coeff is not None else 1.0
            scores = scores + beta * alibi_bias(n, s).to(scores.dtype)
        # FusedScaleMaskSoftmax's torch path (fp32 in, so no casts): scale, mask, softmax.
        if coeff is not None:
            scores = scores * coeff
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1).view(b * n, s, s)
        ctx = torch.bmm(probs, v).view(b, n, s, hn).permute(2, 0, 1, 3).reshape(s, b, h)
        return ctx @ w[p + "self_attention.dense.weight"].t(), w[p + "self_attention.dense.bias"]

    def _mlp(self, c, w, p):
        u = c @ w[p + "mlp.dense_h_to_4h.weight"].t()
        g = bias_gelu(u, w[p + "mlp.dense_h_to_4h.bias"], self.dims.gelu)
        return g @ w[p + "mlp.dense_4h_to_h.weight"].t(), w[p + "mlp.dense_4h_to_h.bias"]

    def _layer(self, x, w, layer):
        d = self.dims
        p = f"{layer_spec(layer)}."
        a = self._layernorm(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"])
        o, bo = self._attention(a, w, p, layer)
        y = (a if d.apply_residual_connection_post_layernorm else x) + (o + bo)
        c = self._layernorm(y, w[p + "post_attention_layernorm.weight"],
                            w[p + "post_attention_layernorm.bias"])
        m, bm = self._mlp(c, w, p)
        return (c if d.apply_residual_connection_post_layernorm else y) + (m + bm)

    def token_losses(self, w, tokens, labels, position_ids):
        """Per-token cross entropy [b, s] over all Vp (padded) columns."""
        d = self.dims
        x = w[WORD][tokens]  # [b, s, h]
        if d.embed_layernorm:  # training.md §1.2 step 4: LayerNorm's default eps, 1e-5
            x = F.layer_norm(x, (x.shape[-1],), w[EMBED_NORM + ".weight"],
                             w[EMBED_NORM + ".bias"], eps=1e-5)
        if not d.alibi:
            x = x + w[POSITION][position_ids]
        x = x.transpose(0, 1)  # [s, b, h]
        for layer in range(d.num_layers):
            x = self._layer(x, w, layer)
        x = x.transpose(0, 1)
        final = d.num_layers + 4
        x = self._layernorm(x, w[f"{final}.weight"], w[f"{final}.bias"])
        logits = x @ w[WORD].t()  # tied head, no bias
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               reduction="none").view(labels.shape)

    def loss(self, w, batch):
        """Masked token mean of one micro-batch (§1.6 step 4)."""
        losses = self.token_losses(w, batch["tokens"], batch["labels"], batch["position_ids"])
        mask = batch["loss_mask"].to(losses.dtype)
        return (losses * mask).sum() / mask.sum()

    def loss_and_grads(self, weights, batch):
        """(loss as float, OrderedDict name -> gradient in the computation dtype)."""
        w = self.leaf_weights(weights)
        loss = self.loss(w, batch)
        grads = torch.autograd.grad(loss, list(w.values()))
        return loss.item(), OrderedDict(zip(w.keys(), grads))


# ---------------------------------------------------------------------------------------------
# Optimizer pieces (training.md §4.3 item 6, §5.3-§5.5).


class FusedAdamW:
    """apex FusedAdam with adam_w_mode=True, bias_correction=True (training.md §5.4): per element
    in the computation dtype; bias corrections in double, then rounded to the computation dtype as
    apex passes them to its kernel as float."""

    def __init__(self, params, lr=0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = params  # OrderedDict name -> tensor (updated in place)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.step_count = 0  # per group upstream; every group steps together
        self.exp_avg = OrderedDict((k, torch.zeros_like(v)) for k, v in params.items())
        self.exp_avg_sq = OrderedDict((k, torch.zeros_like(v)) for k, v in params.items())

    def step(self, grads):
        self.step_count += 1
        beta1, beta2 = self.betas
        dtype = next(iter(self.params.values())).dtype

        def as_scalar(value):
            return torch.tensor(value, dtype=torch.float64).to(dtype)

        bc1 = as_scalar(1.0 - beta1 ** self.step_count)
        bc2 = as_scalar(1.0 - beta2 ** self.step_count)
        b1, b2, eps, lr = (as_scalar(v) for v in (beta1, beta2, self.eps, self.lr))
        one = torch.ones((), dtype=dtype)
        with torch.no_grad():
            for name, p in self.params.items():
                g = grads[name].to(dtype)
                m, v = self.exp_avg[name], self.exp_avg_sq[name]
                m.copy_(b1 * m + (one - b1) * g)
                v.copy_(b2 * v + (one - b2) * g * g)
                wd = as_scalar(0.0 if is_no_decay(name) else self.weight_decay)
                update = (m / bc1) / (torch.sqrt(v / bc2) + eps) + wd * p
                p.copy_(p - lr * update)


def global_grad_norm(grads):
    """DeepSpeed's clip_grad_norm_ (fp32 engine): per-tensor 2-norms, squared and summed in double,
    the sum rounded to float32, then the root."""
    total = 0.0
    for g in grads.values():
        total += float(g.norm(2).item()) ** 2
    return float(np.float32(total)) ** 0.5


def clip_grads(grads, max_norm):
    """Scales `grads` in place by max_norm / (norm + 1e-6) when that is below 1; returns the
    pre-clip norm (what DeepSpeed reports)."""
    norm = global_grad_norm(grads)
    coeff = max_norm / (norm + 1e-6)
    if max_norm > 0 and coeff < 1:
        for g in grads.values():
            g.mul_(coeff)
    return norm


class AnnealingLR:
    """megatron/learning_rates.py with steps counted in samples (training.md §5.5)."""

    def __init__(self, max_lr, min_lr, warmup_steps, decay_steps, decay_style="linear"):
        assert 0.0 <= min_lr <= max_lr and decay_steps > 0 and warmup_steps < decay_steps
        self.max_lr, self.min_lr = max_lr, min_lr
        self.warmup_steps, self.decay_steps = warmup_steps, decay_steps
        self.decay_style = decay_style
        self.num_steps = 0

    def lr(self, num_steps=None):
        n = self.num_steps if num_steps is None else num_steps
        if self.warmup_steps > 0 and n <= self.warmup_steps:
            return self.max_lr * float(n) / float(self.warmup_steps)
        if self.decay_style == "constant":
            return self.max_lr
        if n > self.decay_steps:
            return self.min_lr
        ratio = float(n - self.warmup_steps) / float(self.decay_steps - self.warmup_steps)
        if self.decay_style == "linear":
            coeff = 1.0 - ratio
        elif self.decay_style == "cosine":
            coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
        else:
            raise ValueError(f"decay style {self.decay_style}")
        return self.min_lr + coeff * (self.max_lr - self.min_lr)

    def step(self, increment):
        self.num_steps += increment
        return self.lr()


def deepspeed_dummy_step(adam, lr0):
    """training.md §4.3 item 6: the fp16/bf16/ZeRO wrappers run one Adam step with zero gradients at
    construction (step becomes 1, p <- p - lr0·wd·p). Plain fp32 DeepSpeed hands the client
    optimizer over unwrapped and runs no such step."""
    saved = adam.lr
    adam.lr = lr0
    adam.step(OrderedDict((k, torch.zeros_like(v)) for k, v in adam.params.items()))
    adam.lr = saved


# ---------------------------------------------------------------------------------------------
# Data (data.md §1.3, §5.6-§5.11).

_IDX_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
               7: np.float64, 8: np.uint16}


class IndexedDataset:
    """Reader of the MMIDIDX .idx/.bin pair (data.md §1.3)."""

    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            data = f.read()
        if data[:9] != b"MMIDIDX\x00\x00":
            raise ValueError(f"{prefix}.idx: not an MMIDIDX index")
        version, code, count, doc_count = struct.unpack_from("<QBQQ", data, 9)
        if version != 1:
            raise ValueError(f"{prefix}.idx: version {version}")
        self.dtype = _IDX_DTYPES[code]
        offset = 34
        self.sizes = np.frombuffer(data, dtype="<i4", count=count, offset=offset)
        offset += 4 * count
        self.pointers = np.frombuffer(data, dtype="<i8", count=count, offset=offset)
        offset += 8 * count
        self.doc_idx = np.frombuffer(data, dtype="<i8", count=doc_count, offset=offset)
        self.bin = np.memmap(prefix + ".bin", dtype=self.dtype, mode="r")

    def __len__(self):
        return len(self.sizes)

    def get(self, index, offset=0, length=None):
        start = self.pointers[index] // np.dtype(self.dtype).itemsize + offset
        if length is None:
            length = self.sizes[index] - offset
        return np.asarray(self.bin[start:start + length])


def split_ranges(split, count):
    """data.md §5.3: the [start, end) document range of train, valid, test."""
    text = split
    parts = text.split(",") if "," in text else text.split("/") if "/" in text else [text]
    fractions = [float(p) for p in parts][:3]
    fractions += [0.0] * (3 - len(fractions))
    total = 0.0
    for value in fractions:
        total += value
    fractions = [value / total for value in fractions]
    idx = [0]
    for value in fractions:
        idx.append(idx[-1] + int(round(value * float(count))))
    diff = idx[-1] - count
    idx = [idx[0]] + [i - diff for i in idx[1:]]
    return [(idx[i], idx[i + 1]) for i in range(3)]


def build_index_mappings(documents, sizes, num_samples, seq_length, seed):
    """data.md §5.6: (doc_idx int32, sample_idx int32 [T+1, 2], shuffle_idx) as upstream builds
    them, with numpy's RandomState."""
    tokens_per_epoch = int(np.sum(sizes[documents], dtype=np.int64))
    epochs = 1
    while (epochs * tokens_per_epoch - 1) // seq_length < num_samples:
        epochs += 1
    rng = np.random.RandomState(seed=seed)
    separate = False
    if epochs > 1:
        m = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
        last = num_samples - m
        per_epoch = (tokens_per_epoch - 1) // seq_length
        assert 0 <= last <= per_epoch
        separate = last < int(0.95 * per_epoch)

    def shuffled_docs(n):
        doc_idx = np.mgrid[0:n, 0:len(documents)][1]
        doc_idx[:] = documents
        doc_idx = doc_idx.reshape(-1).astype(np.int32)
        rng.shuffle(doc_idx)
        return doc_idx

    if separate:
        doc_idx = np.concatenate([shuffled_docs(epochs - 1), shuffled_docs(1)])
    else:
        doc_idx = shuffled_docs(epochs)
    total = (epochs * tokens_per_epoch - 1) // seq_length
    sample_idx = np.zeros((total + 1, 2), dtype=np.int32)
    di, off = 0, 0
    for s in range(1, total + 1):
        need = seq_length + 1
        while need != 0:
            length = int(sizes[doc_idx[di]]) - off
            need -= length
            if need <= 0:
                off += need + length - 1
                need = 0
            else:
                di += 1
                off = 0
        sample_idx[s] = (di, off)
    first = ((epochs - 1) * tokens_per_epoch - 1) // seq_length if separate else total
    shuffle_dtype = np.uint32 if total < np.iinfo(np.uint32).max - 1 else np.int64
    head = np.arange(0, first, dtype=shuffle_dtype)
    rng.shuffle(head)
    if separate:
        tail = np.arange(first, total, dtype=shuffle_dtype)
        rng.shuffle(tail)
        head = np.concatenate([head, tail])
    return doc_idx, sample_idx, head


def index_map_prefix(data_prefix, name, num_samples, seq_length, seed):
    return f"{data_prefix}_{name}_indexmap_{num_samples}ns_{seq_length}sl_{seed}s"


class GptSamples:
    """GPTDataset samples (data.md §5.7) from the cached index-map .npy files beside the data."""

    def __init__(self, data_prefix, name, num_samples, seq_length, seed):
        self.data = IndexedDataset(data_prefix)
        self.seq_length = seq_length
        stem = index_map_prefix(data_prefix, name, num_samples, seq_length, seed)
        self.paths = {k: f"{stem}_{k}.npy" for k in ("doc_idx", "sample_idx", "shuffle_idx")}
        for path in self.paths.values():
            if not os.path.exists(path):
                raise FileNotFoundError(f"index-map cache {path} is missing")
        self.doc_idx = np.load(self.paths["doc_idx"], allow_pickle=False)
        self.sample_idx = np.load(self.paths["sample_idx"], allow_pickle=False)
        self.shuffle_idx = np.load(self.paths["shuffle_idx"], allow_pickle=False)

    def __len__(self):
        return len(self.shuffle_idx)

    def __getitem__(self, i):
        j = int(self.shuffle_idx[i])
        d0, o0 = (int(v) for v in self.sample_idx[j])
        d1, o1 = (int(v) for v in self.sample_idx[j + 1])
        if d0 == d1:
            text = self.data.get(int(self.doc_idx[d0]), offset=o0, length=o1 - o0 + 1)
        else:
            parts = [self.data.get(int(self.doc_idx[d0]), offset=o0)]
            parts += [self.data.get(int(self.doc_idx[d])) for d in range(d0 + 1, d1)]
            parts.append(self.data.get(int(self.doc_idx[d1]), length=o1 + 1))
            text = np.concatenate(parts)
        assert len(text) == self.seq_length + 1
        return text.astype(np.int64)


def micro_batch(texts):
    """get_batch_pipe without reset/eod flags (training.md §1.1, data.md §5.11)."""
    text = torch.from_numpy(np.stack(texts))
    tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
    b, s = tokens.shape
    positions = torch.arange(s, dtype=torch.int64).unsqueeze(0).expand(b, s).contiguous()
    return {"tokens": tokens, "labels": labels,
            "loss_mask": torch.ones(b, s, dtype=torch.float32), "position_ids": positions}


# ---------------------------------------------------------------------------------------------
# Training (training.md §3.6, §5.7) on one rank: M micro-batches per step, fp32 DeepSpeed engine.


class ReferenceTrainer:
    def __init__(self, dims, weights, *, lr, min_lr, warmup_samples, decay_samples, decay_style,
                 weight_decay, clip, betas=(0.9, 0.999), eps=1e-8, dummy_step=False,
                 dtype=torch.float64):
        self.model = GptReference(dims, dtype)
        self.params = OrderedDict((k, v.detach().to(dtype).clone()) for k, v in weights.items())
        self.scheduler = AnnealingLR(lr, min_lr, warmup_samples, decay_samples, decay_style)
        self.adam = FusedAdamW(self.params, lr=self.scheduler.lr(), betas=betas, eps=eps,
                               weight_decay=weight_decay)
        self.clip = clip
        if dummy_step:
            deepspeed_dummy_step(self.adam, self.scheduler.lr())

    def train_step(self, micro_batches):
        """One optimizer step; returns (mean micro-batch loss, pre-clip grad norm, lr used, lr
        after the scheduler step)."""
        count = len(micro_batches)
        total = None
        losses = []
        for batch in micro_batches:
            loss, grads = self.model.loss_and_grads(self.params, batch)
            losses.append(loss)
            scaled = OrderedDict((k, g / count if count > 1 else g) for k, g in grads.items())
            total = scaled if total is None else OrderedDict(
                (k, total[k] + scaled[k]) for k in total)
        norm = clip_grads(total, self.clip)
        used = self.adam.lr
        self.adam.step(total)
        global_batch = count * micro_batches[0]["tokens"].shape[0]
        self.adam.lr = self.scheduler.step(global_batch)
        return sum(losses) / count, norm, used, self.adam.lr
