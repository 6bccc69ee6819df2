#include "text/bpe_merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mds::text {
namespace {

// A merge table over real strings, kept both as a MergeTable over interned ids and as the
// Python-style dict that the literal reference below uses.
struct StringRules {
  std::vector<std::string> symbols;
  std::unordered_map<std::string, std::int32_t> ids;
  std::map<std::pair<std::string, std::string>, std::int32_t> ranks;
  MergeTable table;

  std::int32_t intern(const std::string& s) {
    const auto [it, added] = ids.try_emplace(s, static_cast<std::int32_t>(symbols.size()));
    if (added) symbols.push_back(s);
    return it->second;
  }
  void add(const std::string& left, const std::string& right, std::int32_t rank) {
    ranks[{left, right}] = rank;
    table.set(intern(left), intern(right), {rank, intern(left + right)});
  }
};

// gpt2_tokenization.py's bpe(), transcribed over strings.
std::vector<std::string> reference_bpe(const StringRules& rules, const std::string& word) {
  std::vector<std::string> parts;
  for (const char c : word) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    std::int32_t best = INT32_MAX;
    std::pair<std::string, std::string> bigram;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = rules.ranks.find({parts[i], parts[i + 1]});
      if (it != rules.ranks.end() && it->second < best) {
        best = it->second;
        bigram = it->first;
      }
    }
    if (best == INT32_MAX) break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < parts.size();) {
      if (i + 1 < parts.size() && parts[i] == bigram.first && parts[i + 1] == bigram.second) {
        merged.push_back(bigram.first + bigram.second);
        i += 2;
      } else {
        merged.push_back(parts[i]);
        i += 1;
      }
    }
    parts = std::move(merged);
  }
  return parts;
}

// Random rules over a small alphabet: random pairs of already-formed strings, ranks in a random
// order (so a rule may rank before the rules that form its parts, which no trainer produces),
// and some pairs repeated with a later rank.
StringRules random_rules(std::mt19937& rng, int alphabet, int count) {
  StringRules rules;
  std::vector<std::string> formed;
  for (int c = 0; c < alphabet; ++c) {
    formed.emplace_back(1, static_cast<char>('a' + c));
    rules.intern(formed.back());
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < count; ++i) {
    std::uniform_int_distribution<std::size_t> pick(0, formed.size() - 1);
    if (!pairs.empty() && rng() % 10 == 0) {
      pairs.push_back(pairs[rng() % pairs.size()]);  // a duplicate line
      continue;
    }
    // Prefer short parts so that rules apply often.
    std::string left = formed[std::min(pick(rng), pick(rng))];
    std::string right = formed[std::min(pick(rng), pick(rng))];
    formed.push_back(left + right);
    pairs.emplace_back(std::move(left), std::move(right));
  }
  std::vector<std::int32_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  if (rng() % 2 == 0) std::shuffle(order.begin(), order.end(), rng);
  // Lines are added in rank order, so a duplicate pair keeps the rank of its last line.
  std::vector<std::int32_t> line_of_rank(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) line_of_rank[order[i]] = static_cast<int>(i);
  for (std::size_t rank = 0; rank < pairs.size(); ++rank) {
    const auto& [left, right] = pairs[line_of_rank[rank]];
    rules.add(left, right, static_cast<std::int32_t>(rank));
  }
  return rules;
}

std::vector<std::int32_t> symbols_of(StringRules& rules, const std::string& word) {
  std::vector<std::int32_t> symbols;
  for (const char c : word) symbols.push_back(rules.intern(std::string(1, c)));
  return symbols;
}

std::vector<std::string> strings_of(const StringRules& rules,
                                    const std::vector<std::int32_t>& symbols) {
  std::vector<std::string> out;
  for (const std::int32_t s : symbols) out.push_back(rules.symbols[static_cast<std::size_t>(s)]);
  return out;
}

TEST(Gpt2BpeMerge, AaaMergesLeftToRight) {
  StringRules rules;
  rules.add("a", "a", 0);
  BpeScratch scratch;
  for (const std::string word : {"aaa", "aaaa", "aaaaa"}) {
    std::vector<std::int32_t> quadratic = symbols_of(rules, word);
    std::vector<std::int32_t> heap = quadratic;
    bpe_merge_quadratic(rules.table, quadratic, scratch);
    bpe_merge_heap(rules.table, heap, scratch);
    EXPECT_EQ(strings_of(rules, quadratic), reference_bpe(rules, word));
    EXPECT_EQ(strings_of(rules, heap), reference_bpe(rules, word));
  }
  EXPECT_EQ(reference_bpe(rules, "aaa"), (std::vector<std::string>{"aa", "a"}));
}

TEST(Gpt2BpeMerge, PairsCreatedDuringAPassWaitForTheNextOne) {
  // (ab,a) outranks (a,b) but only exists once (a,b) has merged. Upstream finishes the (a,b)
  // pass first: "abab" -> "ab ab", and (ab,a) never applies. Merging a new pair mid-pass would
  // give "aba b".
  StringRules rules;
  rules.add("ab", "a", 1);
  rules.add("a", "b", 5);
  rules.add("x", "x", 6);
  rules.add("xx", "y", 3);  // ranked before the rule that makes its left part
  BpeScratch scratch;
  for (const std::string word : {"abab", "ababab", "aabab", "abaab", "xxy", "xxxy", "xxyxxy"}) {
    std::vector<std::int32_t> quadratic = symbols_of(rules, word);
    std::vector<std::int32_t> heap = quadratic;
    bpe_merge_quadratic(rules.table, quadratic, scratch);
    bpe_merge_heap(rules.table, heap, scratch);
    EXPECT_EQ(strings_of(rules, quadratic), reference_bpe(rules, word)) << word;
    EXPECT_EQ(strings_of(rules, heap), reference_bpe(rules, word)) << word;
  }
  EXPECT_EQ(reference_bpe(rules, "abab"), (std::vector<std::string>{"ab", "ab"}));
}

TEST(Gpt2BpeMerge, RandomTablesAgreeWithReference) {
  std::mt19937 rng(20240601);
  BpeScratch scratch;
  int words = 0;
  for (int table = 0; table < 200; ++table) {
    const int alphabet = 2 + static_cast<int>(rng() % 4);
    StringRules rules = random_rules(rng, alphabet, 5 + static_cast<int>(rng() % 60));
    for (int w = 0; w < 40; ++w) {
      const std::size_t length = 1 + rng() % (w % 4 == 0 ? 200 : 24);
      std::string word;
      for (std::size_t i = 0; i < length; ++i) word += static_cast<char>('a' + rng() % alphabet);
      const std::vector<std::string> expected = reference_bpe(rules, word);
      std::vector<std::int32_t> quadratic = symbols_of(rules, word);
      std::vector<std::int32_t> heap = quadratic;
      std::vector<std::int32_t> chosen = quadratic;
      bpe_merge_quadratic(rules.table, quadratic, scratch);
      bpe_merge_heap(rules.table, heap, scratch);
      bpe_merge(rules.table, chosen, scratch);
      ASSERT_EQ(strings_of(rules, quadratic), expected) << "table " << table << " word " << word;
      ASSERT_EQ(strings_of(rules, heap), expected) << "table " << table << " word " << word;
      ASSERT_EQ(chosen, heap);
      ++words;
    }
  }
  EXPECT_EQ(words, 8000);
}

TEST(Gpt2BpeMerge, MergeTableReplacesLikeADict) {
  MergeTable table;
  EXPECT_EQ(table.find(1, 2), nullptr);
  for (std::int32_t i = 0; i < 10000; ++i) table.set(i, i + 1, {i, i + 100000});
  table.set(5, 6, {20000, 7});
  EXPECT_EQ(table.size(), 10000u);
  ASSERT_NE(table.find(5, 6), nullptr);
  EXPECT_EQ(table.find(5, 6)->rank, 20000);
  EXPECT_EQ(table.find(5, 6)->merged, 7);
  EXPECT_EQ(table.find(9999, 10000)->merged, 109999);
  EXPECT_EQ(table.find(6, 5), nullptr);
}

TEST(Gpt2BpeMerge, MegabyteWordIsFast) {
  // A doubling chain a -> aa -> aaaa ... plus noise rules: 1 MB of 'a' merges in O(n log n).
  StringRules rules;
  std::string s = "a";
  for (std::int32_t rank = 0; rank < 12; ++rank, s += s) rules.add(s, s, rank);
  rules.add("a", "b", 12);
  BpeScratch scratch;
  std::vector<std::int32_t> symbols(1 << 20, rules.intern("a"));
  const auto start = std::chrono::steady_clock::now();
  bpe_merge(rules.table, symbols, scratch);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
#ifdef NDEBUG
  EXPECT_LT(seconds, 5.0);
#else
  EXPECT_LT(seconds, 60.0);  // unoptimized sanitizer builds
#endif
  ASSERT_EQ(symbols.size(), (1u << 20) / 4096);
  EXPECT_EQ(rules.symbols[static_cast<std::size_t>(symbols[0])], std::string(4096, 'a'));
}

}  // namespace
}  // namespace mds::text
