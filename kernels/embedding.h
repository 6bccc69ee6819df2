// CUDA twins of ops/cpu/embedding.h: device pointers, work queued on `stream`. Tables are
// [rows, h] fp32 holding ids [vocab_start, vocab_start + rows) (a vocab-parallel shard, or the
// whole table with vocab_start = 0); ids are int64 device arrays of n tokens.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace mds::kernels {

// out[t] = table[ids[t] − vocab_start] when this shard holds the id; otherwise zeros, or out[t]
// left untouched when add. With add, out[t] += the row. Bit-identical to the CPU.
void embedding_lookup(float* out, const std::int64_t* ids, const float* table, std::int64_t n,
                      std::int64_t h, std::int64_t rows, std::int64_t vocab_start, bool add,
                      cudaStream_t stream);

// Unsharded token + position embedding in one pass: out[t] = wte[tokens[t]] + wpe[positions[t]]
// (ops::embedding_forward, bit for bit). Ids must be inside their tables (not checked here: the
// ops:: layer checks them on the host).
void embedding_forward(float* out, const std::int64_t* tokens, const float* wte,
                       const std::int64_t* positions, const float* wpe, std::int64_t n,
                       std::int64_t h, cudaStream_t stream);

// The lookups with out of `dtype` (kFloat32, kBFloat16 or kFloat16): the fp32 table values (and
// with add, the widened out plus the row, in fp32) rounded once to dtype on store.
void embedding_lookup(void* out, const std::int64_t* ids, const float* table, tensor::DType dtype,
                      std::int64_t n, std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                      bool add, cudaStream_t stream);
void embedding_forward(void* out, const std::int64_t* tokens, const float* wte,
                       const std::int64_t* positions, const float* wpe, tensor::DType dtype,
                       std::int64_t n, std::int64_t h, cudaStream_t stream);
// The same with tables of `table_dtype`: kFloat32, or out's `dtype` (a 16-bit model's parameters,
// widened exactly on load: the results are those of their fp32 widening, bit for bit).
void embedding_lookup(void* out, const std::int64_t* ids, const void* table, tensor::DType dtype,
                      tensor::DType table_dtype, std::int64_t n, std::int64_t h, std::int64_t rows,
                      std::int64_t vocab_start, bool add, cudaStream_t stream);
void embedding_forward(void* out, const std::int64_t* tokens, const void* wte,
                       const std::int64_t* positions, const void* wpe, tensor::DType dtype,
                       tensor::DType table_dtype, std::int64_t n, std::int64_t h,
                       cudaStream_t stream);

// dtable[ids[t] − vocab_start] += dout[t] for the ids this shard holds. Deterministic and
// bit-identical to the CPU: tokens are stably sorted by id (CUB radix sort), then one thread per
// (row, column) adds that row's tokens in token order, the CPU's order of additions. No atomics.
// n must be below 2^31 and rows below 2^31 − 1.
//
// Workspace: embedding_backward_workspace_bytes(n, rows) bytes of device memory (the keys, token
// indices and CUB's scratch), free again once the call's work has run.
std::size_t embedding_backward_workspace_bytes(std::int64_t n, std::int64_t rows);
void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                        void* workspace, std::size_t workspace_bytes, cudaStream_t stream);
// The same with dout of `dout_dtype` (kFloat32, kBFloat16 or kFloat16), widened exactly on load;
// dtable stays fp32.
void embedding_backward(float* dtable, const void* dout, tensor::DType dout_dtype,
                        const std::int64_t* ids, std::int64_t n, std::int64_t h, std::int64_t rows,
                        std::int64_t vocab_start, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream);
// The same with its workspace allocated and freed on the stream (cudaMallocAsync/cudaFreeAsync).
void embedding_backward(float* dtable, const float* dout, const std::int64_t* ids, std::int64_t n,
                        std::int64_t h, std::int64_t rows, std::int64_t vocab_start,
                        cudaStream_t stream);

}  // namespace mds::kernels
