#include "ckpt/universal_merge.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace mds::ckpt {

namespace {

std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

// Fails unless `slice` has the same bits as `first` (NaNs included: both are copies of one value).
void check_same_as_rank0(const std::vector<float>& first, const std::vector<float>& slice,
                         std::size_t tp, const std::string& what) {
  if (std::memcmp(first.data(), slice.data(), first.size() * sizeof(float)) == 0) return;
  std::size_t differing = 0;
  double largest = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (std::memcmp(&first[i], &slice[i], sizeof(float)) == 0) continue;
    ++differing;
    largest = std::max(largest, std::abs(static_cast<double>(first[i]) - slice[i]));
  }
  base::fail(what, ": TP rank ", tp, "'s copy differs from TP rank 0's in ", differing, " of ",
             first.size(), " elements (largest difference ", largest,
             "); a parameter replicated over tensor-parallel ranks must be identical on each");
}

}  // namespace

std::optional<std::int64_t> tp_cat_dim(model::TpSplit split) {
  switch (split) {
    case model::TpSplit::kColumn:
    case model::TpSplit::kVocab:
      return 0;
    case model::TpSplit::kRow:
      return 1;
    case model::TpSplit::kReplicated:
      break;
  }
  return std::nullopt;
}

UniversalState merge_tp_slices(const std::vector<std::vector<float>>& slices,
                               const std::vector<std::int64_t>& local_shape, model::TpSplit split,
                               const std::string& what) {
  if (slices.empty()) base::fail(what, ": no tensor-parallel slices");
  const std::int64_t local_numel = product(local_shape);
  for (std::size_t tp = 0; tp < slices.size(); ++tp) {
    if (static_cast<std::int64_t>(slices[tp].size()) != local_numel) {
      base::fail(what, ": TP rank ", tp, " holds ", slices[tp].size(), " elements, expected ",
                 local_numel);
    }
  }
  UniversalState out;
  out.shape = local_shape;
  out.cat_dim = tp_cat_dim(split);
  if (!out.cat_dim) {
    for (std::size_t tp = 1; tp < slices.size(); ++tp) {
      check_same_as_rank0(slices[0], slices[tp], tp, what);
    }
    out.values = slices[0];
    return out;
  }
  const auto dim = static_cast<std::size_t>(*out.cat_dim);
  if (dim >= local_shape.size()) {
    base::fail(what, ": cannot concatenate a ", local_shape.size(), "-dimensional tensor on dim ",
               dim);
  }
  const auto tp_size = static_cast<std::int64_t>(slices.size());
  out.shape[dim] *= tp_size;
  // Row-major: `outer` blocks, each the slices' blocks of `chunk` elements side by side.
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= local_shape[d];
  const std::int64_t chunk = outer > 0 ? local_numel / outer : 0;
  out.values.reserve(static_cast<std::size_t>(local_numel * tp_size));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (const std::vector<float>& slice : slices) {
      const float* block = slice.data() + o * chunk;
      out.values.insert(out.values.end(), block, block + chunk);
    }
  }
  return out;
}

std::vector<float> vocab_padding_row(const UniversalState& table,
                                     std::int64_t original_vocab_size) {
  if (table.shape.size() != 2) base::fail("a vocabulary table must have two dimensions");
  const std::int64_t rows = table.shape[0];
  const auto width = static_cast<std::size_t>(table.shape[1]);
  if (rows <= original_vocab_size) return std::vector<float>(width, 0.0f);
  const auto last = table.values.begin() + static_cast<std::ptrdiff_t>((rows - 1) * table.shape[1]);
  return std::vector<float>(last, last + static_cast<std::ptrdiff_t>(width));
}

}  // namespace mds::ckpt
