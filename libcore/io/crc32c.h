// CRC-32C (Castagnoli), the checksum of TFRecord files (TensorBoard event files).
#pragma once
#include <cstdint>
#include <string_view>

namespace mds::io {

// CRC-32C of `bytes` (reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF):
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view bytes);

// TFRecord's masked form, ((crc >> 15) | (crc << 17)) + 0xA282EAD8: a CRC stored next to the data
// it covers would otherwise be easy to match by accident when data holds CRCs itself.
std::uint32_t masked_crc32c(std::string_view bytes);

}  // namespace mds::io
