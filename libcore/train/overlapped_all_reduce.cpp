#include "train/overlapped_all_reduce.h"

#include <algorithm>
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

OverlappedAllReduce::OverlappedAllReduce(const model::ParamTable& table, std::int64_t chunk_numel)
    : runs_(table), accumulated_(runs_.size(), false), chunk_numel_(chunk_numel) {
  if (chunk_numel < 1) {
    base::fail("OverlappedAllReduce: a chunk must hold at least one element, got ", chunk_numel);
  }
}

void OverlappedAllReduce::hold(std::size_t param) {
  if (step_) base::fail("OverlappedAllReduce: hold() while a step's reduction is in progress");
  runs_.hold(param);
}

void OverlappedAllReduce::begin(const Step& step) {
  if (step_) base::fail("OverlappedAllReduce: begin() while a step's reduction is in progress");
  if (step.group == nullptr || step.group->size() < 2 || step.ctx == nullptr) {
    base::fail("OverlappedAllReduce: needs a device context and a group of at least 2 ranks");
  }
  const std::int64_t numel = runs_.numel();
  if (step.accumulator.numel() != numel || step.micro.numel() < numel) {
    base::fail("OverlappedAllReduce: the accumulator must hold the table's ", numel,
               " elements and the micro-batch gradients at least as many, got ",
               step.accumulator.numel(), " and ", step.micro.numel());
  }
  step_ = step;
  runs_.reset();
  std::fill(accumulated_.begin(), accumulated_.end(), false);
}

void OverlappedAllReduce::ready(std::span<const std::size_t> params) {
  if (!step_) base::fail("OverlappedAllReduce: ready() outside a step's reduction");
  for (const GradientRuns::Run& run : runs_.ready(params, chunk_numel_)) start(run);
  make_progress();
}

void OverlappedAllReduce::flush() {
  if (!step_) base::fail("OverlappedAllReduce: flush() outside a step's reduction");
  for (const GradientRuns::Run& run : runs_.rest()) start(run);
  for (std::size_t piece = 0; piece < runs_.size(); ++piece) {
    if (!runs_.held(piece) || accumulated_[piece]) continue;
    const GradientRuns::Run run = runs_.run(piece, piece + 1);
    accumulate(run.begin, run.numel);
    accumulated_[piece] = true;
  }
}

void OverlappedAllReduce::release(std::size_t param) {
  const std::size_t piece = runs_.piece_of(param);
  if (!step_ || !runs_.held(piece) || !accumulated_[piece] || runs_.started(piece)) {
    base::fail("OverlappedAllReduce: release() of ", runs_.spec(piece).engine_name(),
               ", which is not a held gradient accumulated by flush() and waiting");
  }
  runs_.mark_started(piece);
  const GradientRuns::Run run = runs_.run(piece, piece + 1);
  reduce(run.begin, run.numel);
}

void OverlappedAllReduce::start(const GradientRuns::Run& run) {
  accumulate(run.begin, run.numel);
  reduce(run.begin, run.numel);
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
  if (!runs_.all_started()) {
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
