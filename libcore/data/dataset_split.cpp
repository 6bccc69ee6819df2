#include "data/dataset_split.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/error.h"

namespace mds::data {
namespace {

// Python's str.strip() / str.split() whitespace for the ASCII range flags use.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view strip(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// str.split() without arguments: runs of whitespace separate, no empty fields.
std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

}  // namespace

double parse_python_float(std::string_view text, std::string_view what) {
  std::string_view number = strip(text);
  if (!number.empty() && number.front() == '+') number.remove_prefix(1);  // from_chars rejects '+'
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || error != std::errc() || end != number.data() + number.size() ||
      !std::isfinite(value)) {
    base::fail(what, ": '", text, "' is not a finite number");
  }
  return value;
}

std::int64_t python_round(double value) {
  // nearbyint rounds ties to even under the default rounding mode, as Python's round() does.
  return static_cast<std::int64_t>(std::nearbyint(value));
}

std::array<std::int64_t, 4> split_boundaries(std::string_view split, std::int64_t num_documents) {
  std::vector<std::string_view> pieces;
  if (split.find(',') != std::string_view::npos) {
    pieces = split_on(split, ',');
  } else if (split.find('/') != std::string_view::npos) {
    pieces = split_on(split, '/');
  } else {
    pieces = {split};
  }
  std::vector<double> weights;
  for (const std::string_view piece : pieces) {
    const double weight = parse_python_float(piece, base::cat("--split '", split, "'"));
    if (weight < 0) base::fail("--split '", split, "': weights must not be negative");
    weights.push_back(weight);
  }
  weights.resize(3, 0.0);  // pads short lists with 0 and drops weights after the third
  // Python's sum(): left to right from 0.
  const double total = ((0.0 + weights[0]) + weights[1]) + weights[2];
  if (!(total > 0.0)) base::fail("--split '", split, "': the weights must not sum to 0");
  std::array<std::int64_t, 4> bounds{0, 0, 0, 0};
  for (std::size_t k = 0; k < 3; ++k) {
    const double fraction = weights[k] / total;
    bounds[k + 1] = bounds[k] + python_round(fraction * static_cast<double>(num_documents));
  }
  // Upstream shifts every boundary by the rounding excess, so the train end can move too.
  const std::int64_t diff = bounds[3] - num_documents;
  for (std::size_t k = 1; k < 4; ++k) bounds[k] -= diff;
  return bounds;
}

std::array<DocumentRange, 3> split_document_ranges(std::string_view split,
                                                   std::int64_t num_documents) {
  const auto bounds = split_boundaries(split, num_documents);
  return {DocumentRange{bounds[0], bounds[1]}, DocumentRange{bounds[1], bounds[2]},
          DocumentRange{bounds[2], bounds[3]}};
}

WeightedSplitGroup parse_weighted_split_group(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    base::fail("weighted split paths '", text,
               "': expected 'NAME: WEIGHT START:END PATH, ...' (no ':' after the name)");
  }
  WeightedSplitGroup group;
  group.name = std::string(strip(text.substr(0, colon)));
  if (group.name.empty()) base::fail("weighted split paths '", text, "': the group name is empty");
  for (const std::string_view part : split_on(text.substr(colon + 1), ',')) {
    const auto fields = split_whitespace(part);
    if (fields.size() != 3) {
      base::fail("weighted split paths '", text, "': '", strip(part),
                 "' must have exactly 3 fields: WEIGHT START:END PATH");
    }
    const auto range = split_on(fields[1], ':');
    if (range.size() != 2) {
      base::fail("weighted split paths '", text, "': range '", fields[1], "' must be START:END");
    }
    WeightedSplitPath path;
    const std::string where = base::cat("weighted split paths '", text, "'");
    path.weight = parse_python_float(fields[0], where + " weight");
    path.start = parse_python_float(range[0], where + " range start");
    path.end = parse_python_float(range[1], where + " range end");
    if (!(path.start < path.end)) {
      base::fail(where, ": ", range[0], " is greater or equal to ", range[1]);
    }
    if (path.start < 0 || path.end > 1) {
      base::fail(where, ": range ", fields[1], " must lie within 0:1");
    }
    path.prefix = std::string(fields[2]);
    group.paths.push_back(std::move(path));
  }
  return group;
}

std::vector<std::string> parse_weighted_split_paths_file(std::string_view content,
                                                         const std::string& name) {
  std::string_view line = content;
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.find('\n') != std::string_view::npos) {
    base::fail(name, ": must contain exactly one line of double-quoted groups");
  }
  std::vector<std::string> groups;
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) break;
    if (line[i] != '"') base::fail(name, ": expected '\"' at column ", i + 1);
    const std::size_t end = line.find('"', i + 1);
    if (end == std::string_view::npos) base::fail(name, ": unterminated '\"' at column ", i + 1);
    groups.emplace_back(line.substr(i + 1, end - i - 1));
    i = end + 1;
  }
  if (groups.empty()) base::fail(name, ": no groups");
  return groups;
}

std::optional<std::vector<std::string>> weighted_split_groups(
    const std::optional<std::vector<std::string>>& groups, const std::optional<std::string>& file,
    const std::string& flag) {
  if (groups) return groups;
  if (!file) return std::nullopt;
  std::ifstream in(*file, std::ios::binary);
  if (!in) base::fail_errno(flag + "-path: cannot read " + *file);
  std::ostringstream content;
  content << in.rdbuf();
  return parse_weighted_split_paths_file(content.str(), *file);
}

DocumentRange split_by_range(double start, double end, std::int64_t num_documents) {
  if (start > 1 || end > 1) base::fail("split range ", start, ":", end, " must not exceed 1");
  const auto n = static_cast<double>(num_documents);
  return {python_round(start * n), python_round(end * n)};
}

}  // namespace mds::data
