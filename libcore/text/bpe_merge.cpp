#include "text/bpe_merge.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

namespace mds::text {
namespace {

constexpr std::int32_t kNoRank = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t kNone = -1;

std::int32_t rank_of(const MergeTable& merges, std::int32_t left, std::int32_t right) {
  const MergeTable::Rule* rule = merges.find(left, right);
  return rule != nullptr ? rule->rank : kNoRank;
}

}  // namespace

void MergeTable::set(std::int32_t left, std::int32_t right, Rule rule) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t key = pack(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) {
      slot.rule = rule;
      return;
    }
    if (slot.key == kEmpty) {
      slot = {key, rule};
      ++size_;
      return;
    }
  }
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  const std::size_t capacity = old.empty() ? 64 : old.size() * 2;
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& slot : old) {
    if (slot.key == kEmpty) continue;
    for (std::size_t i = slot_of(slot.key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = slot;
        break;
      }
    }
  }
}

void bpe_merge_quadratic(const MergeTable& merges, std::vector<std::int32_t>& symbols,
                         BpeScratch& scratch) {
  std::size_t n = symbols.size();
  if (n < 2) return;
  // ranks[i] is the rank of the pair (symbols[i], symbols[i + 1]); after a pass only pairs next
  // to a merged symbol are looked up again.
  std::vector<std::int32_t>& ranks = scratch.ranks;
  std::vector<std::int32_t>& source = scratch.source;
  ranks.resize(n);
  source.resize(n);
  for (std::size_t i = 0; i + 1 < n; ++i) ranks[i] = rank_of(merges, symbols[i], symbols[i + 1]);
  while (n > 1) {
    std::int32_t best = kNoRank;
    std::size_t best_at = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best) {
        best = ranks[i];
        best_at = i;
      }
    }
    if (best == kNoRank) break;
    const std::int32_t merged = merges.find(symbols[best_at], symbols[best_at + 1])->merged;
    // The one pass over the word: every occurrence of the best pair, left to right, no overlaps.
    std::size_t out = 0;
    for (std::size_t i = 0; i < n; ++out) {
      if (i + 1 < n && ranks[i] == best) {
        symbols[out] = merged;
        source[out] = kNone;
        i += 2;
      } else {
        symbols[out] = symbols[i];
        source[out] = static_cast<std::int32_t>(i);
        i += 1;
      }
    }
    for (std::size_t i = 0; i + 1 < out; ++i) {
      const bool unchanged = source[i] != kNone && source[i + 1] == source[i] + 1;
      ranks[i] = unchanged ? ranks[static_cast<std::size_t>(source[i])]
                           : rank_of(merges, symbols[i], symbols[i + 1]);
    }
    n = out;
  }
  symbols.resize(n);
}

void bpe_merge_heap(const MergeTable& merges, std::vector<std::int32_t>& symbols,
                    BpeScratch& scratch) {
  const std::size_t n = symbols.size();
  if (n < 2) return;
  std::vector<std::int32_t>& next = scratch.next;
  std::vector<std::int32_t>& prev = scratch.prev;
  std::vector<std::uint64_t>& heap = scratch.heap;
  std::vector<std::int32_t>& changed = scratch.changed;
  next.resize(n);
  prev.resize(n);
  heap.clear();
  // Entry = rank << 32 | left position: the smallest is the lowest rank, then the leftmost.
  auto entry = [](std::int32_t rank, std::int32_t position) {
    return (std::uint64_t{static_cast<std::uint32_t>(rank)} << 32) |
           static_cast<std::uint32_t>(position);
  };
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? static_cast<std::int32_t>(i + 1) : kNone;
    prev[i] = static_cast<std::int32_t>(i) - 1;
    if (i + 1 < n) {
      const std::int32_t rank = rank_of(merges, symbols[i], symbols[i + 1]);
      if (rank != kNoRank) heap.push_back(entry(rank, static_cast<std::int32_t>(i)));
    }
  }
  const auto later = std::greater<std::uint64_t>();
  std::make_heap(heap.begin(), heap.end(), later);
  // A dead node has symbol kNone. Entries are checked when popped: their pair may be gone.
  auto push_pair = [&](std::int32_t left) {
    if (left == kNone || next[left] == kNone) return;
    const std::int32_t rank = rank_of(merges, symbols[left], symbols[next[left]]);
    if (rank == kNoRank) return;
    heap.push_back(entry(rank, left));
    std::push_heap(heap.begin(), heap.end(), later);
  };
  while (!heap.empty()) {
    const std::uint32_t rank = static_cast<std::uint32_t>(heap.front() >> 32);
    changed.clear();
    while (!heap.empty() && static_cast<std::uint32_t>(heap.front() >> 32) == rank) {
      const auto left = static_cast<std::int32_t>(heap.front() & 0xFFFFFFFFu);
      std::pop_heap(heap.begin(), heap.end(), later);
      heap.pop_back();
      if (symbols[left] == kNone) continue;
      const std::int32_t right = next[left];
      if (right == kNone) continue;
      const MergeTable::Rule* rule = merges.find(symbols[left], symbols[right]);
      if (rule == nullptr || static_cast<std::uint32_t>(rule->rank) != rank) continue;
      symbols[left] = rule->merged;
      symbols[right] = kNone;
      next[left] = next[right];
      if (next[right] != kNone) prev[next[right]] = left;
      changed.push_back(left);
    }
    // Only now do the pairs around the merged symbols compete, as in upstream's next iteration.
    for (const std::int32_t node : changed) {
      push_pair(prev[node]);
      push_pair(node);
    }
  }
  std::size_t out = 0;
  for (std::int32_t node = 0; node != kNone; node = next[node]) symbols[out++] = symbols[node];
  symbols.resize(out);
}

}  // namespace mds::text
