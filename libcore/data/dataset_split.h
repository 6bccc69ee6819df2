#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mds::data {

// Sequence indices [begin, end) of one indexed dataset that a GPT dataset draws from.
struct DocumentRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool empty() const { return end <= begin; }
  std::int64_t size() const { return empty() ? 0 : end - begin; }
  bool operator==(const DocumentRange&) const = default;
};

// Python's float(text) for the plain decimal forms a flag carries (surrounding whitespace allowed,
// optional sign and exponent). Fails naming `what` on anything else, inf and nan included.
double parse_python_float(std::string_view text, std::string_view what);

// Python's round(x) for a float: to nearest, ties to even (round(0.5) == 0, round(1.5) == 2).
std::int64_t python_round(double value);

// --split (mode 1, data.md §5.3): the four boundaries [0, train_end, valid_end, num_documents].
// Upstream's quirks are kept: half-even rounding, and a rounding excess subtracted from every
// boundary after the first, not only the last. Negative weights are rejected (upstream would index
// the dataset with negative numbers).
std::array<std::int64_t, 4> split_boundaries(std::string_view split, std::int64_t num_documents);
// The same as train, valid and test ranges; an empty range means that split has no dataset.
std::array<DocumentRange, 3> split_document_ranges(std::string_view split,
                                                   std::int64_t num_documents);

// Mode 2 (data.md §5.4): "NAME: W1 S1:E1 PATH1, W2 S2:E2 PATH2, ...".
struct WeightedSplitPath {
  double weight = 0;
  double start = 0;  // fraction of the dataset's documents
  double end = 0;
  std::string prefix;
};
struct WeightedSplitGroup {
  std::string name;  // replaces train/valid/test in the index cache file names
  std::vector<WeightedSplitPath> paths;
};
// Parses one group; every malformed part fails with a message quoting it.
WeightedSplitGroup parse_weighted_split_group(std::string_view text);
// The --*-weighted-split-paths-path file: exactly one line of double-quoted groups,
// `"group1" "group2"\n`.
std::vector<std::string> parse_weighted_split_paths_file(std::string_view content,
                                                         const std::string& name);
// One of --(train|valid|test)-weighted-split-paths as upstream's parser resolves it: the strings
// given, else the ones its -path file holds (read and parsed; an unreadable file fails naming
// `flag`-path), else nullopt.
std::optional<std::vector<std::string>> weighted_split_groups(
    const std::optional<std::vector<std::string>>& groups, const std::optional<std::string>& file,
    const std::string& flag);
// [round(start × N), round(end × N)) with Python rounding; start and end must be ≤ 1.
DocumentRange split_by_range(double start, double end, std::int64_t num_documents);

}  // namespace mds::data
