#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace mds::text {

// A per-encoder memo from pre-token bytes to their token ids. Open addressing with linear probing
// over 24-byte slots that hold the key's first 8 bytes, a hash tag and the first id, so the
// common case (a short word that is one token) never leaves the slot; longer keys and further
// ids live in one arena, so an entry costs no allocation.
//
// Memory is bounded at 64 MiB per encoder: at most kMaxSlots slots (48 MiB) plus a kArenaBytes
// arena (16 MiB). When either is full the cache is emptied and refills from the text that follows
// (the output never depends on the cache). The slot table starts small and the arena is allocated
// untouched, so an encoder that sees little text costs little resident memory.
class TokenCache {
 public:
  static constexpr std::size_t kMaxKeyBytes = 255;  // longer pre-tokens are not cached
  static constexpr std::size_t kMaxSlots = std::size_t{1} << 21;
  static constexpr std::size_t kArenaBytes = std::size_t{16} << 20;

  // A looked-up key: its canonical first 8 bytes (zero padded) and hash, computed once.
  struct Key {
    std::string_view bytes;
    std::uint64_t prefix;
    std::uint64_t hash;
  };
  static Key make_key(std::string_view bytes) {
    const char* p = bytes.data();
    const std::size_t n = bytes.size();
    std::uint64_t prefix;
    std::uint64_t h = (n + 1) * kMul1;
    if (n >= 8) {
      prefix = load64(p);
      // Whole words after the prefix, then the last 8 bytes (overlapping what came before).
      for (std::size_t i = 8; i + 8 < n; i += 8) h = (h ^ load64(p + i)) * kMul3;
      if (n > 8) h = (h ^ load64(p + n - 8)) * kMul3;
    } else if (n >= 4) {
      // Two overlapping 4-byte loads; the shared bytes are equal, so OR keeps them intact.
      prefix = load32(p) | (load32(p + n - 4) << (8 * (n - 4)));
    } else if (n > 0) {
      prefix = byte(p, 0) | (byte(p, n >> 1) << (8 * (n >> 1))) | (byte(p, n - 1) << (8 * (n - 1)));
    } else {
      prefix = 0;
    }
    h = (h ^ prefix) * kMul2;
    h ^= h >> 31;
    h *= kMul1;
    h ^= h >> 29;
    return {bytes, prefix, h};
  }

  // The cached ids of `key`; valid until the next insert. False if absent.
  bool find(const Key& key, std::span<const std::int32_t>& ids) const {
    if (slots_.empty()) return false;
    const auto tag = static_cast<std::uint32_t>(key.hash >> 32);
    for (std::size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key_size == 0) return false;
      if (slot.prefix == key.prefix && slot.tag == tag && slot.key_size == key.bytes.size() &&
          (key.bytes.size() <= 8 || tail_equal(slot, key.bytes))) {
        if (slot.id_count == 1) {
          ids = {&slot.first_id, 1};
        } else {
          ids = {reinterpret_cast<const std::int32_t*>(arena_.get() + slot.offset), slot.id_count};
        }
        return true;
      }
    }
  }

  // Caches `ids` (1 to kMaxKeyBytes of them) for a key of 1 to kMaxKeyBytes bytes not yet cached.
  void insert(const Key& key, std::span<const std::int32_t> ids);

  std::size_t size() const { return size_; }
  // How many times the cache was emptied because it was full.
  std::size_t resets() const { return resets_; }

 private:
  static constexpr std::uint64_t kMul1 = 0x9E3779B97F4A7C15ull;
  static constexpr std::uint64_t kMul2 = 0xBF58476D1CE4E5B9ull;
  static constexpr std::uint64_t kMul3 = 0x94D049BB133111EBull;
  static std::uint64_t load64(const char* p) {
    std::uint64_t value;
    std::memcpy(&value, p, 8);
    return value;
  }
  static std::uint64_t load32(const char* p) {
    std::uint32_t value;
    std::memcpy(&value, p, 4);
    return value;
  }
  static std::uint64_t byte(const char* p, std::size_t i) {
    return static_cast<unsigned char>(p[i]);
  }

  struct Slot {
    std::uint64_t prefix;    // first 8 key bytes, zero padded
    std::uint32_t offset;    // arena entry: the ids if more than one, then the key if > 8 bytes
    std::uint32_t tag;       // high half of the hash; its low bits are the home slot
    std::uint16_t key_size;  // 0 marks an empty slot
    std::uint16_t id_count;
    std::int32_t first_id;
  };
  static_assert(sizeof(Slot) == 24);

  bool tail_equal(const Slot& slot, std::string_view key) const {
    const std::byte* stored =
        arena_.get() + slot.offset + (slot.id_count > 1 ? slot.id_count * sizeof(std::int32_t) : 0);
    return std::memcmp(stored + 8, key.data() + 8, key.size() - 8) == 0;
  }
  void clear();
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::size_t resets_ = 0;
  std::unique_ptr<std::byte[]> arena_;
  std::size_t arena_used_ = 0;
};

// Appends the ids of `piece` to `ids`: the cached ones, or those `encode(piece, ids)` appends,
// which are then cached (a piece longer than kMaxKeyBytes, or one giving no ids, is not).
template <typename Encode>
void encode_through_cache(TokenCache& cache, std::string_view piece, std::vector<std::int32_t>& ids,
                          Encode&& encode) {
  if (piece.size() > TokenCache::kMaxKeyBytes) {
    encode(piece, ids);
    return;
  }
  const TokenCache::Key key = TokenCache::make_key(piece);
  std::span<const std::int32_t> cached;
  if (cache.find(key, cached)) {
    if (cached.size() == 1) {
      ids.push_back(cached[0]);
    } else {
      ids.insert(ids.end(), cached.begin(), cached.end());
    }
    return;
  }
  const std::size_t first = ids.size();
  encode(piece, ids);
  const std::size_t added = ids.size() - first;
  if (added > 0 && added <= TokenCache::kMaxKeyBytes) {
    cache.insert(key, std::span<const std::int32_t>(ids).subspan(first));
  }
}

}  // namespace mds::text
