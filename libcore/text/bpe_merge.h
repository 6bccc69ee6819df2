#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mds::text {

// The merge rules of a byte-level BPE over interned symbol ids: (left, right) -> (rank, merged).
// Ranks are unique per rule (a rank is a line of merges.txt), so a rank identifies its pair.
class MergeTable {
 public:
  struct Rule {
    std::int32_t rank;
    std::int32_t merged;
  };

  // Adds or replaces the rule for (left, right); replacing keeps the new rank, like assigning to
  // a Python dict. Ids must be non-negative.
  void set(std::int32_t left, std::int32_t right, Rule rule);

  // The rule for (left, right), or nullptr.
  const Rule* find(std::int32_t left, std::int32_t right) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.rule;
      if (slot.key == kEmpty) return nullptr;
    }
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    Rule rule;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t pack(std::int32_t left, std::int32_t right) {
    return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
           static_cast<std::uint32_t>(right);
  }
  std::size_t slot_of(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void grow();

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

// Reusable buffers of the heap-based merge, so that encoding does not allocate per word.
struct BpeScratch {
  std::vector<std::int32_t> next;
  std::vector<std::int32_t> prev;
  std::vector<std::uint64_t> heap;
  std::vector<std::int32_t> changed;
  std::vector<std::int32_t> ranks;
  std::vector<std::int32_t> source;
};

// Upstream's loop (gpt2_tokenization.py `bpe`): repeatedly take the lowest-ranked adjacent pair
// and merge all its non-overlapping occurrences left to right in one pass. Quadratic in the
// word length: meant for short words and as the reference in tests.
void bpe_merge_quadratic(const MergeTable& merges, std::vector<std::int32_t>& symbols,
                         BpeScratch& scratch);

// The same result in O(n log n): a min-heap of (rank, left position) over a linked list. Pairs
// created while one rank is being merged are queued only after that rank's pass is complete, so
// any merge table (even one no BPE trainer would produce) gives upstream's result.
void bpe_merge_heap(const MergeTable& merges, std::vector<std::int32_t>& symbols,
                    BpeScratch& scratch);

// Words up to this many symbols use the quadratic loop, which is faster on short words (the
// crossover measured with the GPT-2 merges is near 20 bytes).
inline constexpr std::size_t kBpeHeapThreshold = 20;

inline void bpe_merge(const MergeTable& merges, std::vector<std::int32_t>& symbols,
                      BpeScratch& scratch) {
  if (symbols.size() <= kBpeHeapThreshold) {
    bpe_merge_quadratic(merges, symbols, scratch);
  } else {
    bpe_merge_heap(merges, symbols, scratch);
  }
}

}  // namespace mds::text
