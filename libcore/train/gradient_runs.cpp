#include "train/gradient_runs.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace mds::train {

GradientRuns::GradientRuns(const model::ParamTable& table)
    : table_(&table), piece_of_param_(table.size()), params_(table.size()) {
  std::iota(params_.begin(), params_.end(), std::size_t{0});
  std::stable_sort(params_.begin(), params_.end(),
                   [&](std::size_t a, std::size_t b) { return table[a].offset < table[b].offset; });
  for (std::size_t k = 0; k < params_.size(); ++k) {
    piece_of_param_[params_[k]] = k;
    begins_.push_back(k == 0 ? 0 : table[params_[k]].offset);
    ends_.push_back(k + 1 < params_.size() ? table[params_[k + 1]].offset : table.buffer_numel());
  }
  ready_.assign(params_.size(), false);
  started_.assign(params_.size(), false);
  held_.assign(params_.size(), false);
}

std::size_t GradientRuns::piece_of(std::size_t param) const {
  if (param >= piece_of_param_.size()) {
    base::fail("gradient runs: parameter ", param, " is not in the table");
  }
  return piece_of_param_[param];
}

GradientRuns::Run GradientRuns::run(std::size_t first, std::size_t end) const {
  return {first, end, begins_[first], ends_[end - 1] - begins_[first]};
}

bool GradientRuns::all_started() const {
  return std::find(started_.begin(), started_.end(), false) == started_.end();
}

void GradientRuns::reset() {
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(started_.begin(), started_.end(), false);
}

GradientRuns::Run GradientRuns::take(std::size_t first, std::size_t end) {
  std::fill(started_.begin() + static_cast<std::ptrdiff_t>(first),
            started_.begin() + static_cast<std::ptrdiff_t>(end), true);
  return run(first, end);
}

std::vector<GradientRuns::Run> GradientRuns::ready(std::span<const std::size_t> params,
                                                   std::int64_t bucket_numel) {
  for (const std::size_t param : params) {
    const std::size_t piece = piece_of(param);
    if (ready_[piece]) {
      base::fail("the gradient of ", spec(piece).engine_name(),
                 " was reported final twice in one backward");
    }
    ready_[piece] = true;
  }
  std::vector<Run> runs;
  for (const std::size_t param : params) {
    const std::size_t piece = piece_of_param_[param];
    if (!waiting(piece)) continue;
    std::size_t first = piece, end = piece + 1;
    while (first > 0 && waiting(first - 1)) --first;
    while (end < size() && waiting(end)) ++end;
    if (ends_[end - 1] - begins_[first] >= bucket_numel) runs.push_back(take(first, end));
  }
  return runs;
}

std::vector<GradientRuns::Run> GradientRuns::rest() {
  std::vector<Run> runs;
  std::size_t first = 0;
  while (first < size()) {
    if (started_[first] || held_[first]) {
      ++first;
      continue;
    }
    std::size_t end = first + 1;
    while (end < size() && !started_[end] && !held_[end]) ++end;
    runs.push_back(take(first, end));
    first = end;
  }
  return runs;
}

}  // namespace mds::train
