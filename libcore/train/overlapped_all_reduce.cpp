#include "train/overlapped_all_reduce.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "base/error.h"
#include "ops/elementwise.h"
#include "train/collective_staging.h"
#include "train/grad_accumulation.h"

namespace mds::train {
namespace {

// `numel` elements of `dtype` over the memory of `like`'s element `offset` onwards (which holds
// at least as many bytes: the dtype is no wider than like's).
tensor::Tensor reinterpret(const tensor::Tensor& like, std::int64_t offset, tensor::DType dtype,
                           std::int64_t numel) {
  auto* bytes = static_cast<std::byte*>(like.raw()) +
                static_cast<std::size_t>(offset) * tensor::dtype_size(like.dtype());
  return tensor::Tensor(bytes, dtype, tensor::Shape{numel}, like.device());
}

}  // namespace

OverlappedAllReduce::OverlappedAllReduce(const model::ParamTable& table, std::int64_t bucket_numel,
                                         std::int64_t chunk_numel)
    : piece_of_param_(table.size()), bucket_numel_(bucket_numel), chunk_numel_(chunk_numel) {
  if (bucket_numel < 1 || chunk_numel < 1) {
    base::fail("OverlappedAllReduce: bucket and chunk must hold at least one element, got ",
               bucket_numel, " and ", chunk_numel);
  }
  std::vector<std::size_t> by_offset(table.size());
  std::iota(by_offset.begin(), by_offset.end(), std::size_t{0});
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [&](std::size_t a, std::size_t b) { return table[a].offset < table[b].offset; });
  for (std::size_t k = 0; k < by_offset.size(); ++k) {
    const std::int64_t begin = k == 0 ? 0 : table[by_offset[k]].offset;
    const std::int64_t end =
        k + 1 < by_offset.size() ? table[by_offset[k + 1]].offset : table.buffer_numel();
    piece_of_param_[by_offset[k]] = pieces_.size();
    pieces_.push_back({begin, end});
    spec_.push_back(&table[by_offset[k]]);
  }
  ready_.assign(pieces_.size(), false);
  accumulated_.assign(pieces_.size(), false);
  started_.assign(pieces_.size(), false);
  held_.assign(pieces_.size(), false);
}

std::size_t OverlappedAllReduce::piece_of(std::size_t param) const {
  if (param >= piece_of_param_.size()) {
    base::fail("OverlappedAllReduce: parameter ", param, " is not in the table");
  }
  return piece_of_param_[param];
}

void OverlappedAllReduce::hold(std::size_t param) {
  if (step_) base::fail("OverlappedAllReduce: hold() while a step's reduction is in progress");
  held_[piece_of(param)] = true;
}

void OverlappedAllReduce::begin(const Step& step) {
  if (step_) base::fail("OverlappedAllReduce: begin() while a step's reduction is in progress");
  if (step.group == nullptr || step.group->size() < 2 || step.ctx == nullptr) {
    base::fail("OverlappedAllReduce: needs a device context and a group of at least 2 ranks");
  }
  const std::int64_t numel = pieces_.empty() ? 0 : pieces_.back().end;
  if (step.accumulator.numel() != numel || step.micro.numel() < numel) {
    base::fail("OverlappedAllReduce: the accumulator must hold the table's ", numel,
               " elements and the micro-batch gradients at least as many, got ",
               step.accumulator.numel(), " and ", step.micro.numel());
  }
  step_ = step;
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(accumulated_.begin(), accumulated_.end(), false);
  std::fill(started_.begin(), started_.end(), false);
}

void OverlappedAllReduce::ready(std::span<const std::size_t> params) {
  if (!step_) base::fail("OverlappedAllReduce: ready() outside a step's reduction");
  for (const std::size_t param : params) {
    const std::size_t piece = piece_of(param);
    if (ready_[piece]) {
      base::fail("OverlappedAllReduce: the gradient of ", spec_[piece]->engine_name(),
                 " was reported final twice in one step");
    }
    ready_[piece] = true;
  }
  for (const std::size_t param : params) start_run_around(piece_of_param_[param]);
  make_progress();
}

void OverlappedAllReduce::start_run_around(std::size_t piece) {
  const auto waiting = [&](std::size_t k) { return ready_[k] && !started_[k] && !held_[k]; };
  if (!waiting(piece)) return;
  std::size_t first = piece, end = piece + 1;
  while (first > 0 && waiting(first - 1)) --first;
  while (end < pieces_.size() && waiting(end)) ++end;
  if (pieces_[end - 1].end - pieces_[first].begin >= bucket_numel_) start(first, end);
}

void OverlappedAllReduce::flush() {
  if (!step_) base::fail("OverlappedAllReduce: flush() outside a step's reduction");
  std::size_t first = 0;
  while (first < pieces_.size()) {
    if (started_[first]) {
      ++first;
    } else if (held_[first]) {
      if (!accumulated_[first]) {
        accumulate(pieces_[first].begin, pieces_[first].end - pieces_[first].begin);
        accumulated_[first] = true;
      }
      ++first;
    } else {
      std::size_t end = first + 1;
      while (end < pieces_.size() && !started_[end] && !held_[end]) ++end;
      start(first, end);
      first = end;
    }
  }
}

void OverlappedAllReduce::release(std::size_t param) {
  const std::size_t piece = piece_of(param);
  if (!step_ || !held_[piece] || !accumulated_[piece] || started_[piece]) {
    base::fail("OverlappedAllReduce: release() of ", spec_[piece]->engine_name(),
               ", which is not a held gradient accumulated by flush() and waiting");
  }
  started_[piece] = true;
  reduce(pieces_[piece].begin, pieces_[piece].end - pieces_[piece].begin);
}

void OverlappedAllReduce::start(std::size_t first, std::size_t end) {
  const std::int64_t begin = pieces_[first].begin;
  const std::int64_t numel = pieces_[end - 1].end - begin;
  for (std::size_t k = first; k < end; ++k) {
    accumulated_[k] = true;
    started_[k] = true;
  }
  accumulate(begin, numel);
  reduce(begin, numel);
}

void OverlappedAllReduce::accumulate(std::int64_t begin, std::int64_t numel) {
  const Step& step = *step_;
  if (numel == 0) return;
  ops::AccumulateSteps steps;
  steps.fresh = step.fresh;
  accumulate_gradient(*step.ctx, step.accumulator.narrow(begin, numel),
                      step.micro.narrow(begin, numel), step.grad_dtype, steps);
}

void OverlappedAllReduce::reduce(std::int64_t begin, std::int64_t numel) {
  const Step& step = *step_;
  const bool staged = step.comm != step.accumulator.dtype();
  for_each_chunk(numel, chunk_numel_, [&](const Chunk& chunk) {
    const std::int64_t offset = begin + chunk.offset;
    InFlight op;
    op.part = step.accumulator.narrow(offset, chunk.numel);
    op.reduced = staged ? reinterpret(step.micro, offset, step.comm, chunk.numel) : op.part;
    if (staged) ops::cast(*step.ctx, op.reduced, op.part);
    if (step.divide_first) {
      divide_in_dtype(*step.ctx, op.reduced, static_cast<double>(step.group->size()));
    }
    op.request = step.group->all_reduce_async(op.reduced, dist::ReduceOp::kSum);
    in_flight_.push_back(std::move(op));
  });
}

void OverlappedAllReduce::make_progress() {
  for (InFlight& op : in_flight_) op.request.test();
}

void OverlappedAllReduce::finish() {
  if (!step_) base::fail("OverlappedAllReduce: finish() outside a step's reduction");
  if (std::find(started_.begin(), started_.end(), false) != started_.end()) {
    base::fail(
        "optimizer: step() before every gradient's reduction started (call "
        "accumulate_micro_batch(last = true) after the last backward, and "
        "reduce_tied_gradient() for a held tied gradient)");
  }
  const Step step = *step_;
  const double inverse = 1.0 / static_cast<double>(step.group->size());
  for (InFlight& op : in_flight_) {
    op.request.wait();
    // DeepSpeed's allreduce_bucket with postscale_gradients: sum, then × 1/D in the
    // communication dtype.
    if (!step.divide_first) scale_in_dtype(*step.ctx, op.reduced, inverse);
    if (op.reduced.raw() != op.part.raw()) ops::cast(*step.ctx, op.part, op.reduced);
  }
  in_flight_.clear();
  step_.reset();
}

}  // namespace mds::train
