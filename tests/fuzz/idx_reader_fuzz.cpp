// parse_index on arbitrary bytes: it must either fail with base::Error or return an index that
// satisfies the format's invariants, and writing that index back must reproduce the input's bytes
// (every field the reader accepts is one the writer would have produced).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/indexed_dataset.h"

namespace {

[[noreturn]] void invariant_broken(const char* what) {
  std::fprintf(stderr, "idx_reader_fuzz: invariant broken: %s\n", what);
  std::abort();
}

void check(bool condition, const char* what) {
  if (!condition) invariant_broken(what);
}

void check_invariants(const mds::io::DatasetIndex& index) {
  using mds::io::DatasetImpl;
  check(index.impl == DatasetImpl::kMmap || index.impl == DatasetImpl::kCached, "impl");
  check(index.pointers.size() == index.sizes.size(), "one pointer per sequence");
  check(!index.doc_idx.empty() && index.doc_idx.front() == 0, "doc_idx starts at 0");
  check(static_cast<std::uint64_t>(index.doc_idx.back()) == index.sizes.size(),
        "doc_idx ends at N");
  for (std::size_t k = 1; k < index.doc_idx.size(); ++k) {
    check(index.doc_idx[k - 1] <= index.doc_idx[k], "doc_idx non-decreasing");
  }
  const auto itemsize = static_cast<std::int64_t>(mds::io::dtype_size(index.dtype));
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < index.sizes.size(); ++i) {
    check(index.sizes[i] >= 0, "sizes non-negative");
    check(index.pointers[i] == expected, "pointers are the prefix sums of sizes");
    expected += index.sizes[i] * itemsize;
  }
  check(index.bin_bytes() == static_cast<std::uint64_t>(expected), "bin_bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mds::io::DatasetIndex index;
  try {
    index = mds::io::parse_index(bytes, "fuzz.idx", std::nullopt);
  } catch (const mds::base::Error&) {
    return 0;
  }
  check_invariants(index);

  const std::string written = mds::io::serialize_index(index);
  check(bytes.starts_with(written), "serialize(parse(x)) is a prefix of x");
  mds::io::DatasetIndex again;
  try {
    again = mds::io::parse_index(written, "again.idx", index.bin_bytes());
  } catch (const mds::base::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    invariant_broken("serialize(parse(x)) does not parse");
  }
  check(again.impl == index.impl && again.dtype == index.dtype, "header survives a round trip");
  check(again.sizes == index.sizes && again.pointers == index.pointers &&
            again.doc_idx == index.doc_idx,
        "arrays survive a round trip");

  // The bin-size check must accept exactly the described size.
  const std::uint64_t described = index.bin_bytes();
  for (const std::uint64_t wrong : {described + 1, described == 0 ? 1 : described - 1}) {
    bool rejected = false;
    try {
      mds::io::parse_index(bytes, "fuzz.idx", wrong);
    } catch (const mds::base::Error&) {
      rejected = true;
    }
    check(rejected, "a .bin of the wrong size is rejected");
  }
  return 0;
}
