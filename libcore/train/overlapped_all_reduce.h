// Stage 0's ReduceGrads started while the last micro-batch's backward still runs (DeepSpeed's
// zero_optimization.overlap_comm). The backward reports parameters whose micro-batch gradient is
// final (ready()); each run of adjacent ready parameters of the flat buffer is folded into the
// accumulator and its all-reduce started as soon as the run holds a bucket's worth of elements,
// so the communication of the layers done proceeds under the backward of the layers still to go.
// finish() waits for every reduction and averages it (÷ D before the sum or × 1/D after, in the
// communication dtype), as the whole-buffer pass of MixedPrecisionOptimizer would.
//
// Every step is element-wise (the rounded accumulation, the casts, the ÷ D) and the collectives
// fold each element over the ranks in group-rank order whatever the message, so with the MPI
// communicators the results equal the unoverlapped step bit for bit (NCCL's order may depend on
// the message size). A reduction in a communication dtype other than the accumulator's is
// staged in the micro-batch gradient buffer's own bytes (its values are consumed once
// accumulated, and a 16-bit or fp32 element fits in an fp32 one), so overlapping needs no
// buffer of its own.
//
// The runs come from train/gradient_runs.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/gradient_runs.h"

namespace mds::train {

class OverlappedAllReduce {
 public:
  // What one step's reduction works on; the tensors and the group outlive it.
  struct Step {
    const ops::DeviceContext* ctx = nullptr;
    tensor::Tensor accumulator;  // table layout, fp32 or fp16
    tensor::Tensor micro;        // fp32, at least the accumulator's elements
    tensor::DType grad_dtype = tensor::DType::kFloat32;  // accumulate_gradient's rounding
    tensor::DType comm = tensor::DType::kFloat32;        // the all-reduce dtype
    bool fresh = false;  // the accumulator holds nothing of this step yet (ops::AccumulateSteps)
    // ZeRO's averaging, ÷ D before the sum (DeepSpeedZeroOptimizer); otherwise the engine's
    // allreduce_bucket, × 1/D after it. Both in the communication dtype.
    bool divide_first = false;
    dist::Communicator* group = nullptr;  // the data-parallel group, at least 2 ranks
  };

  // A run is started once it holds `chunk_numel` elements; each all-reduce call moves at most
  // that many.
  OverlappedAllReduce(const model::ParamTable& table, std::int64_t chunk_numel);

  bool in_progress() const { return step_.has_value(); }
  // From now on, `param`'s reduction waits for release(param) in every step (a tied gradient
  // whose ReduceTiedGrads must come first): ready() and flush() only accumulate it.
  void hold(std::size_t param);
  // Starts a step's reduction: nothing is ready yet.
  void begin(const Step& step);
  // The micro-batch gradients of table parameters `params` are final: each at most once a step.
  void ready(std::span<const std::size_t> params);
  // The backward is over: every piece not accumulated yet is, and every reduction not started
  // yet, but the held ones', starts.
  void flush();
  // After flush(): starts the reduction of held parameter `param`.
  void release(std::size_t param);
  // Waits for every reduction and averages it into the accumulator; the step is over.
  void finish();

 private:
  struct InFlight {
    dist::Request request;
    tensor::Tensor reduced;  // what the collective reduces in place
    tensor::Tensor part;     // the accumulator's elements (reduced itself when not staged)
  };

  // Accumulates the run and starts its reduction.
  void start(const GradientRuns::Run& run);
  void accumulate(std::int64_t begin, std::int64_t numel);
  void reduce(std::int64_t begin, std::int64_t numel);
  // MPI advances an operation only inside test() or wait(): called as the backward reports.
  void make_progress();

  GradientRuns runs_;
  std::vector<bool> accumulated_;  // held pieces flush() accumulated
  std::int64_t chunk_numel_;
  std::optional<Step> step_;
  std::vector<InFlight> in_flight_;
};

}  // namespace mds::train
