#include "text/token_cache.h"

#include <algorithm>

namespace mds::text {
namespace {

constexpr std::size_t kInitialSlots = 4096;
}  // namespace

void TokenCache::insert(const Key& key, std::span<const std::int32_t> ids) {
  const std::size_t n = key.bytes.size();
  if (n == 0 || n > kMaxKeyBytes || ids.empty() || ids.size() > kMaxKeyBytes) return;
  const std::size_t id_bytes = ids.size() > 1 ? ids.size() * sizeof(std::int32_t) : 0;
  const std::size_t key_bytes = n > 8 ? n : 0;
  // Entries start 4-byte aligned so the ids can be read in place.
  const std::size_t entry_bytes = (id_bytes + key_bytes + 3) & ~std::size_t{3};
  if (entry_bytes > 0) {
    if (arena_ == nullptr) arena_.reset(new std::byte[kArenaBytes]);  // untouched until written
    if (arena_used_ + entry_bytes > kArenaBytes) clear();
  }
  if ((size_ + 1) * 2 > slots_.size()) {
    if (slots_.size() >= kMaxSlots) clear();
    if ((size_ + 1) * 2 > slots_.size()) grow();
  }
  std::size_t i = (key.hash >> 32) & mask_;
  while (slots_[i].key_size != 0) i = (i + 1) & mask_;
  std::byte* entry = arena_ != nullptr ? arena_.get() + arena_used_ : nullptr;
  if (id_bytes > 0) std::memcpy(entry, ids.data(), id_bytes);
  if (key_bytes > 0) std::memcpy(entry + id_bytes, key.bytes.data(), key_bytes);
  slots_[i] = {key.prefix,
               static_cast<std::uint32_t>(arena_used_),
               static_cast<std::uint32_t>(key.hash >> 32),
               static_cast<std::uint16_t>(n),
               static_cast<std::uint16_t>(ids.size()),
               ids[0]};
  arena_used_ += entry_bytes;
  ++size_;
}

void TokenCache::clear() {
  if (size_ > 0) ++resets_;
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
  arena_used_ = 0;
}

void TokenCache::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = old.empty() ? kInitialSlots : old.size() * 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (const Slot& slot : old) {
    if (slot.key_size == 0) continue;
    std::size_t i = slot.tag & mask_;
    while (slots_[i].key_size != 0) i = (i + 1) & mask_;
    slots_[i] = slot;
  }
}

}  // namespace mds::text
