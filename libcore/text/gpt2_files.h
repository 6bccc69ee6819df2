#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mds::text {

// One vocab.json entry: the key's code points (escapes decoded; a lone \uD800-style surrogate is
// kept, as Python's json does) and its id.
struct Gpt2VocabEntry {
  std::u32string token;
  std::int32_t id = 0;
};

// Parses vocab.json like Python's json.load, strictly: one object mapping strings to integers in
// [0, 2^31). Entries come in file order; a repeated key appears twice (the caller lets the last
// one win, like a Python dict). `path` only names the file in error messages.
std::vector<Gpt2VocabEntry> parse_gpt2_vocab(std::string_view json, const std::string& path);
std::vector<Gpt2VocabEntry> read_gpt2_vocab(const std::string& path);

// One line of merges.txt. A blank line still takes a rank but can never match (upstream's empty
// tuple), so it is kept with both symbols empty.
struct Gpt2MergeLine {
  std::u32string left;
  std::u32string right;
};

// Parses merges.txt exactly like upstream's
//   open(merges_file, encoding='utf-8').read().split('\n')[1:-1]
// followed by str.split() of each line: universal newlines (\r\n and a lone \r end lines too),
// the first line is dropped (header), and so is the text after the last '\n' (a final merge
// without a newline is lost). The rank of a line is its index in the result. A line with one or
// more than two symbols, which upstream would keep as a rule that never matches, is rejected as a
// damaged file.
std::vector<Gpt2MergeLine> parse_gpt2_merges(std::string_view text, const std::string& path);
std::vector<Gpt2MergeLine> read_gpt2_merges(const std::string& path);

}  // namespace mds::text
