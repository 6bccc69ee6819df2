#include "ops/embedding.h"

#include "base/error.h"
#include "ops/activation_dtype.h"
#include "ops/check.h"
#include "ops/cpu/embedding.h"
#include "ops/cpu/widened.h"
#include "ops/cuda/backend.h"

namespace mds::ops {

using tensor::DType;
using tensor::Tensor;

namespace {

struct Table {
  std::int64_t rows;
  std::int64_t h;
  std::int64_t n;  // tokens
};

// Checks table [rows, h], ids [...] int64 and a per-token activation [..., h] of the ids' shape
// (fp32, bf16 or fp16). The table is a gradient (fp32) or a parameter (fp32 or the activation's
// dtype).
enum class TableRole { kParameter, kGradient };
Table check(const char* op, const Tensor& table, const char* table_name, TableRole role,
            const Tensor& ids, const Tensor& tokens_h, const char* tokens_h_name) {
  detail::activation_dtype(op, {tokens_h_name, tokens_h}, {});
  if (role == TableRole::kGradient) {
    detail::expect_dtype(op, {table_name, table}, DType::kFloat32);
  } else {
    detail::parameter_dtype(op, {tokens_h_name, tokens_h}, {table_name, table}, {});
  }
  detail::expect_dtype(op, {"ids", ids}, DType::kInt64);
  if (table.shape().rank() != 2) {
    base::fail("ops::", op, ": ", table_name, " must be [rows, h], got ",
               table.shape().to_string());
  }
  const Table t{table.dim(0), table.dim(1), ids.numel()};
  if (detail::rows_with_last_dim(op, {tokens_h_name, tokens_h}, t.h) != t.n) {
    base::fail("ops::", op, ": ", tokens_h_name, " ", tokens_h.shape().to_string(),
               " must be the ids' shape ", ids.shape().to_string(), " plus h = ", t.h);
  }
  return t;
}

void check_ids(const char* op, const Tensor& ids, std::int64_t limit) {
  const std::int64_t* p = ids.data<std::int64_t>();
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    if (p[i] < 0 || p[i] >= limit) {
      base::fail("ops::", op, ": id ", p[i], " at position ", i, " is outside [0, ", limit, ")");
    }
  }
}

}  // namespace

void embedding_lookup(const DeviceContext& ctx, Tensor out, Tensor ids, Tensor table,
                      std::int64_t vocab_start, std::int64_t vocab_size) {
  constexpr const char* kOp = "embedding_lookup";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"ids", ids}, {"table", table}});
  const Table t = check(kOp, table, "table", TableRole::kParameter, ids, out, "out");
  if (vocab_size < 0) vocab_size = vocab_start + t.rows;
  if (on_device) {
    // Device ids are not read on the host: their range is the caller's (GptModel checks the
    // micro-batch on the host before it copies it over).
    if constexpr (detail::kCudaBuilt) {
      cuda::embedding_lookup(ctx, out.raw(), ids.data<std::int64_t>(), table.raw(), out.dtype(),
                             table.dtype(), t.n, t.h, t.rows, vocab_start, false);
    }
    return;
  }
  check_ids(kOp, ids, vocab_size);
  const cpu::Fp32View vout(out, false);
  cpu::embedding_lookup(vout.data(), ids.data<std::int64_t>(), table.raw(), table.dtype(), t.n, t.h,
                        t.rows, vocab_start, false);
  vout.store();
}

void embedding_lookup_add(const DeviceContext& ctx, Tensor out, Tensor ids, Tensor table) {
  constexpr const char* kOp = "embedding_lookup_add";
  const bool on_device = detail::on_cuda(kOp, ctx, {{"out", out}, {"ids", ids}, {"table", table}});
  const Table t = check(kOp, table, "table", TableRole::kParameter, ids, out, "out");
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::embedding_lookup(ctx, out.raw(), ids.data<std::int64_t>(), table.raw(), out.dtype(),
                             table.dtype(), t.n, t.h, t.rows, 0, true);
    }
    return;
  }
  check_ids(kOp, ids, t.rows);
  const cpu::Fp32View vout(out);
  cpu::embedding_lookup(vout.data(), ids.data<std::int64_t>(), table.raw(), table.dtype(), t.n, t.h,
                        t.rows, 0, true);
  vout.store();
}

void embedding_backward(const DeviceContext& ctx, Tensor dtable, Tensor dout, Tensor ids,
                        std::int64_t vocab_start) {
  constexpr const char* kOp = "embedding_backward";
  const bool on_device =
      detail::on_cuda(kOp, ctx, {{"dtable", dtable}, {"dout", dout}, {"ids", ids}});
  const Table t = check(kOp, dtable, "dtable", TableRole::kGradient, ids, dout, "dout");
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::embedding_backward(ctx, dtable.data<float>(), dout.raw(), dout.dtype(),
                               ids.data<std::int64_t>(), t.n, t.h, t.rows, vocab_start);
    }
    return;
  }
  const cpu::Fp32View vdout(dout);
  cpu::embedding_backward(dtable.data<float>(), vdout.data(), ids.data<std::int64_t>(), t.n, t.h,
                          t.rows, vocab_start);
}

void embedding_forward(const DeviceContext& ctx, Tensor out, Tensor tokens, Tensor wte,
                       Tensor positions, Tensor wpe) {
  constexpr const char* kOp = "embedding_forward";
  const bool on_device = detail::on_cuda(
      kOp, ctx,
      {{"out", out}, {"tokens", tokens}, {"wte", wte}, {"positions", positions}, {"wpe", wpe}});
  const Table words = check(kOp, wte, "wte", TableRole::kParameter, tokens, out, "out");
  const Table places = check(kOp, wpe, "wpe", TableRole::kParameter, positions, out, "out");
  detail::parameter_dtype(kOp, {"out", out}, {"wte", wte}, {{"wpe", wpe}});
  if (on_device) {
    if constexpr (detail::kCudaBuilt) {
      cuda::embedding_forward(ctx, out.raw(), tokens.data<std::int64_t>(), wte.raw(),
                              positions.data<std::int64_t>(), wpe.raw(), out.dtype(), wte.dtype(),
                              words.n, words.h);
    }
    return;
  }
  check_ids(kOp, tokens, words.rows);
  check_ids(kOp, positions, places.rows);
  // Both lookups in fp32, one rounding of the sum for 16-bit out.
  const cpu::Fp32View vout(out, false);
  cpu::embedding_lookup(vout.data(), tokens.data<std::int64_t>(), wte.raw(), wte.dtype(), words.n,
                        words.h, words.rows, 0, false);
  cpu::embedding_lookup(vout.data(), positions.data<std::int64_t>(), wpe.raw(), wpe.dtype(),
                        places.n, places.h, places.rows, 0, true);
  vout.store();
}

void embedding_lookup(Tensor out, Tensor ids, Tensor table, std::int64_t vocab_start,
                      std::int64_t vocab_size) {
  embedding_lookup(DeviceContext{}, out, ids, table, vocab_start, vocab_size);
}

void embedding_lookup_add(Tensor out, Tensor ids, Tensor table) {
  embedding_lookup_add(DeviceContext{}, out, ids, table);
}

void embedding_backward(Tensor dtable, Tensor dout, Tensor ids, std::int64_t vocab_start) {
  embedding_backward(DeviceContext{}, dtable, dout, ids, vocab_start);
}

void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor positions, Tensor wpe) {
  embedding_forward(DeviceContext{}, out, tokens, wte, positions, wpe);
}

}  // namespace mds::ops
