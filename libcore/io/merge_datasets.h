#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mds::io {

struct MergeSummary {
  std::uint64_t datasets = 0;
  std::uint64_t documents = 0;
  std::uint64_t sequences = 0;
  std::uint64_t tokens = 0;
  std::uint64_t bin_bytes = 0;
};

// Called after each input dataset is appended: (index, prefix, sequences so far).
using MergeObserver = std::function<void(std::size_t, const std::string&, std::uint64_t)>;

// Concatenates datasets in the given order into "<output_prefix>.bin/.idx", byte-identical to
// upstream merge_preprocessed_data.py (data.md §3). All inputs must share one format and dtype;
// .bin payloads are copied by the kernel, never re-tokenized, and memory is proportional to the
// index only. Fails with a message naming the offending input.
MergeSummary merge_datasets(const std::vector<std::string>& prefixes,
                            const std::string& output_prefix, const MergeObserver& observer = {});

}  // namespace mds::io
