#pragma once
// Private to libcore/io: vectorised searches shared by the line reader and the JSON parser. Both
// spend most of their time skipping ordinary text, so these loops set the throughput of the input
// side of preprocess.
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mds::io::scan {

namespace detail {

constexpr std::uint64_t kOnes = 0x0101010101010101ull;
constexpr std::uint64_t kHighs = 0x8080808080808080ull;

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}

// Nonzero when some byte of `word` equals `byte` (exact as a yes/no answer).
inline std::uint64_t has_byte(std::uint64_t word, unsigned char byte) {
  const std::uint64_t x = word ^ (kOnes * byte);
  return (x - kOnes) & ~x & kHighs;
}

// Nonzero when some byte of `word` is below `limit` (limit <= 128).
inline std::uint64_t has_less(std::uint64_t word, unsigned char limit) {
  return (word - kOnes * limit) & ~word & kHighs;
}

}  // namespace detail

// First '\n' or '\r' in [p, end), or `end`.
inline const unsigned char* find_newline(const unsigned char* p, const unsigned char* end) {
#if defined(__SSE2__)
  const __m128i lf = _mm_set1_epi8('\n');
  const __m128i cr = _mm_set1_epi8('\r');
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, lf), _mm_cmpeq_epi8(x, cr)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (end - p >= 8) {
    const std::uint64_t word = detail::load64(p);
    if ((detail::has_byte(word, '\n') | detail::has_byte(word, '\r')) != 0) break;
    p += 8;
  }
  while (p < end && *p != '\n' && *p != '\r') ++p;
  return p;
}

// First byte in [p, end) that ends a run of plain JSON string content: '"', '\\' or a control
// character below 0x20; `end` if none.
inline const unsigned char* find_string_special(const unsigned char* p, const unsigned char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i max_control = _mm_set1_epi8(0x1F);
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Unsigned x <= 0x1F exactly when min(x, 0x1F) == x.
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(x, max_control), x);
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)), control);
    const int mask = _mm_movemask_epi8(special);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (end - p >= 8) {
    const std::uint64_t word = detail::load64(p);
    if ((detail::has_byte(word, '"') | detail::has_byte(word, '\\') |
         detail::has_less(word, 0x20)) != 0) {
      break;
    }
    p += 8;
  }
  while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) ++p;
  return p;
}

}  // namespace mds::io::scan
