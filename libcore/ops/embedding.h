// Word and position embeddings (training.md §1.2). Ids are int64 of any shape [...]; tables are
// [rows, h], fp32 or the output's dtype (a 16-bit table is widened exactly as it is read: the
// lookup of its fp32 widening, bit for bit; embedding_forward's two tables share one dtype);
// outputs (and the backward's dout) [..., h] fp32, bf16 or fp16: a 16-bit output is the fp32 result
// rounded once (embedding_forward rounds the sum wte + wpe once), a 16-bit dout is widened
// exactly, and table gradients stay fp32. Each op takes the DeviceContext it runs with
// (ops/device_context.h) and has an overload without one for host tensors. Host ids are checked
// against the table; device ids are not read back (the caller checks them where they came from).
#pragma once
#include <cstdint>

#include "ops/device_context.h"
#include "tensor/tensor.h"

namespace mds::ops {

// out[t] = table[ids[t] − vocab_start] when this shard holds the id, else zeros (the vocab-parallel
// lookup before its TP all-reduce). Ids outside [0, vocab_size) fail; vocab_size < 0 means
// vocab_start + table rows (an unsharded table).
void embedding_lookup(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor ids,
                      tensor::Tensor table, std::int64_t vocab_start = 0,
                      std::int64_t vocab_size = -1);
// out[t] += table[ids[t]] (position embeddings, added after the word lookup / embed LayerNorm).
void embedding_lookup_add(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor ids,
                          tensor::Tensor table);
// dtable[ids[t] − vocab_start] += dout[t] for the ids this shard holds (scatter-add; the order of
// additions per row is token order, whatever the thread count or device).
void embedding_backward(const DeviceContext& ctx, tensor::Tensor dtable, tensor::Tensor dout,
                        tensor::Tensor ids, std::int64_t vocab_start = 0);

// Unsharded token + position embedding: out = wte[tokens] + wpe[positions].
void embedding_forward(const DeviceContext& ctx, tensor::Tensor out, tensor::Tensor tokens,
                       tensor::Tensor wte, tensor::Tensor positions, tensor::Tensor wpe);

// The same on host tensors.
void embedding_lookup(tensor::Tensor out, tensor::Tensor ids, tensor::Tensor table,
                      std::int64_t vocab_start = 0, std::int64_t vocab_size = -1);
void embedding_lookup_add(tensor::Tensor out, tensor::Tensor ids, tensor::Tensor table);
void embedding_backward(tensor::Tensor dtable, tensor::Tensor dout, tensor::Tensor ids,
                        std::int64_t vocab_start = 0);
void embedding_forward(tensor::Tensor out, tensor::Tensor tokens, tensor::Tensor wte,
                       tensor::Tensor positions, tensor::Tensor wpe);

}  // namespace mds::ops
