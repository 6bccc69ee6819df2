// The safetensors reader on arbitrary bytes: it either fails with base::Error or accepts a file
// whose every tensor lies inside the data buffer with the bytes its dtype and shape need.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = mds::io::SafetensorsFile::from_bytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    for (const auto& entry : file.entries()) {
      const std::string_view bytes = file.bytes(entry);  // ASan catches reads past the end
      if (bytes.size() !=
          static_cast<std::size_t>(entry.numel()) * mds::tensor::dtype_size(entry.dtype)) {
        std::fprintf(stderr, "safetensors_reader_fuzz: tensor size invariant broken\n");
        std::abort();
      }
      volatile char sink = bytes.empty() ? 0 : bytes.back();
      (void)sink;
    }
  } catch (const mds::base::Error&) {
  }
  return 0;
}
