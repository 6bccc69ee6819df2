#include "ckpt/reshard_tp.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace mds::ckpt {

void check_tp_replicas_equal(const model::ParamBuffer& rank0, const model::ParamBuffer& shard,
                             const std::function<std::string(const model::ParamSpec&)>& file_of) {
  if (rank0.dtype() != shard.dtype()) base::fail("check_tp_replicas_equal: dtypes differ");
  const model::ParamTable& table = shard.table();
  const std::size_t size = tensor::dtype_size(shard.dtype());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const model::ParamSpec& spec = table[i];
    if (spec.split != model::TpSplit::kReplicated || spec.tied_replica) continue;
    const tensor::Tensor mine = shard.view(i);
    const tensor::Tensor first = rank0.view(rank0.table().index_of(spec.layer, spec.name));
    if (first.numel() != mine.numel()) {
      base::fail("check_tp_replicas_equal: ", spec.engine_name(), " has another shape on rank 0");
    }
    std::int64_t differing = 0;
    const auto* a = static_cast<const unsigned char*>(first.raw());
    const auto* b = static_cast<const unsigned char*>(mine.raw());
    for (std::int64_t k = 0; k < mine.numel(); ++k) {
      const std::size_t at = static_cast<std::size_t>(k) * size;
      if (std::memcmp(a + at, b + at, size) != 0) ++differing;
    }
    if (differing > 0) {
      base::fail(file_of(spec), ": ", spec.name, " differs from TP rank 0's copy in ", differing,
                 " of ", mine.numel(),
                 " elements (a replicated parameter must be equal on every TP rank; train with "
                 "--sync-tp-duplicated-parameters, or average the copies first)");
    }
  }
}

void copy_resizing_vocabulary(const model::ParamBuffer& from, const model::ParamBuffer& to) {
  if (from.dtype() != tensor::DType::kFloat32 || to.dtype() != tensor::DType::kFloat32) {
    base::fail("copy_resizing_vocabulary: both buffers must be fp32");
  }
  const model::ParamTable& from_table = from.table();
  const model::ParamTable& to_table = to.table();
  if (from_table.size() != to_table.size()) {
    base::fail("copy_resizing_vocabulary: the models have ", from_table.size(), " and ",
               to_table.size(), " parameters");
  }
  for (std::size_t i = 0; i < to_table.size(); ++i) {
    const model::ParamSpec& spec = to_table[i];
    const std::size_t source = from_table.index_of(spec.layer, spec.name);
    const tensor::Shape& from_shape = from_table[source].local_shape;
    const bool vocabulary = spec.split == model::TpSplit::kVocab;
    const bool same_width =
        from_shape.rank() == spec.local_shape.rank() &&
        (vocabulary ? from_shape[1] == spec.local_shape[1] : from_shape == spec.local_shape);
    if (!same_width) {
      base::fail("copy_resizing_vocabulary: ", spec.engine_name(), " is ", from_shape.to_string(),
                 " in the source but ", spec.local_shape.to_string(), " in the target");
    }
    const std::span<float> in = from.view(source).host_span<float>();
    const std::span<float> out = to.view(i).host_span<float>();
    const std::size_t kept = std::min(in.size(), out.size());
    std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(kept), out.begin());
    std::fill(out.begin() + static_cast<std::ptrdiff_t>(kept), out.end(), 0.0f);
  }
}

}  // namespace mds::ckpt
