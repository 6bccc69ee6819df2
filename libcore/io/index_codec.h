#pragma once
// Internal to libcore/io: the byte layouts of MMIDIDX and TNTIDX index files (data.md §1.3, §1.4).
#include <cstddef>
#include <functional>
#include <string_view>

#include "io/indexed_dataset.h"

namespace mds::io::detail {

inline constexpr std::string_view kMmapMagic{"MMIDIDX\0\0", 9};
inline constexpr std::string_view kLegacyMagic{"TNTIDX\0\0", 8};
inline constexpr std::size_t kMmapHeaderSize = 34;
inline constexpr std::size_t kLegacyHeaderSize = 56;

// Streams the serialized index to `sink` in pieces, so a builder can write an index of hundreds of
// millions of sequences without holding a second copy of it as one string.
using ByteSink = std::function<void(const void* data, std::size_t size)>;
void write_index(const DatasetIndex& index, const ByteSink& sink);

}  // namespace mds::io::detail
