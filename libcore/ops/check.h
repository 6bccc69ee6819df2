// Argument checks shared by the public ops: every op validates device, dtype and shape here, so a
// wrong call fails with the op's name and the tensor's role instead of corrupting memory in a loop.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "ops/device_context.h"
#include "tensor/device_memory.h"
#include "tensor/tensor.h"

namespace mds::ops::detail {

// ops/cuda/ exists only in builds with CUDA: the calls into it sit in `if constexpr (kCudaBuilt)`
// branches, which a build without CUDA discards (a discarded statement needs no definition of
// what it calls), and on_cuda() never answers true there (no CUDA context can exist).
using tensor::kCudaBuilt;

// A tensor argument with its role in the op, for messages ("x", "weight", ...).
struct Arg {
  const char* name;
  const tensor::Tensor& tensor;
};

// The device shared by all given tensors (undefined ones are skipped); fails when they differ.
tensor::DeviceKind common_device(const char* op, std::initializer_list<Arg> args);

// Where an op runs: true on the context's CUDA device, false on the host. The given tensors must
// all be on the context's device; otherwise one line names the op and the mismatch (two tensors
// on different devices, or tensors on cuda:0 with a host context, which is what the overloads
// without a context give device tensors).
bool on_cuda(const char* op, const DeviceContext& ctx, std::initializer_list<Arg> args);

// For the ops without a CUDA twin: fails with "ops::<op> runs on host tensors only" when the
// tensors live on a CUDA device (and when they are on different devices).
void require_cpu(const char* op, std::initializer_list<Arg> args);

// True for a tensor the caller passed (an optional argument left as tensor::Tensor{} is not).
inline bool given(const tensor::Tensor& t) {
  return t.raw() != nullptr || t.shape().rank() > 0;
}

void expect_dtype(const char* op, Arg arg, tensor::DType dtype);
void expect_shape(const char* op, Arg arg, const tensor::Shape& shape);
void expect_numel(const char* op, Arg arg, std::int64_t numel);
// The number of rows of a tensor whose last dimension must be `cols` (all leading dims flattened).
std::int64_t rows_with_last_dim(const char* op, Arg arg, std::int64_t cols);

}  // namespace mds::ops::detail
