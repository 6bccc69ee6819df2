// The optimizer DeepSpeed wraps around apex FusedAdam, over flat buffers laid out by a ParamTable
// (training.md §4.1, §4.3–§4.6, §5.1–§5.4):
//   fp32, ZeRO 0      the base optimizer directly, the engine's clip_fp32_gradients before it;
//   fp16, ZeRO 0      FP16_Optimizer (whole fp32 master and Adam state on every rank);
//   bf16, ZeRO 0      BF16_Optimizer (gradients all-reduced whole, master and Adam state
//                     partitioned over the data-parallel ranks);
//   fp16/fp32, ZeRO 1 or 2   DeepSpeedZeroOptimizer (gradients reduce-scattered, master and Adam
//                     state partitioned; stage 2 reduces every micro-batch into a partition-sized
//                     accumulator instead of keeping a whole one).
// Model weights stay whole on every rank. On CPU the model computes in fp32 (architecture.md §4):
// it reads the fp32 `compute` copy and adds each micro-batch's gradient, in fp32, into
// `micro_grads`; accumulate_micro_batch() then rounds it as the 16-bit gradient upstream would
// have been. A model with 16-bit activations (a --bf16/--fp16 run on a device) reads the 16-bit
// weights() alone, so the 16-bit wrappers then keep no compute copy
// (OptimizerOptions::fp32_compute_copy).
//
// Memory (memory(), planned by train/optimizer_memory.h): besides the weights, their compute
// copy (if kept), the micro-batch gradients and the Adam state, one gradient accumulator: whole
// (stages 0 and 1) or this rank's partitions (stage 2). The fp32 gradient partitions a partitioned
// step reads are borrowed from the micro-batch gradient buffer, which is free between the last
// accumulate_micro_batch() and the end of step(); the collectives go through a bounded
// CollectiveStaging, so no other buffer grows with the model.
//
// On a CUDA device (a DeviceContext lent by the caller) every wrapper runs there, on any grid:
// weights (16-bit, and their fp32 compute copy if kept), fp32 masters, gradients and Adam moments
// in device buffers; accumulation with its roundings, the data-parallel averaging, the gradient
// norm, the overflow check, clipping and AdamW as device ops, with the host's arithmetic. The
// gradient collectives (all-reduce, ZeRO's reduce-scatter and all-gather, ReduceTiedGrads) then
// take device tensors, so the groups must be ones made for the device
// (dist::device_grid_communicators); the overflow flag and the norms' sums stay host scalars,
// which those groups send over their host communicators. The checkpoint views (params(),
// master(), exp_avg(), exp_avg_sq()) are then host copies: copy_state_to_host() fills them before
// a save, and restore_from_checkpoint() takes what a load wrote into them back to the device.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dist/communicator.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "ops/device_context.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/collective_staging.h"
#include "train/grad_clip.h"
#include "train/loss_scaler.h"
#include "train/optimizer_memory.h"
#include "train/overlapped_all_reduce.h"
#include "train/overlapped_reduce_to_owners.h"
#include "train/zero_shard.h"

namespace mds::config {
struct DeepSpeedConfig;
}

namespace mds::train {

enum class Precision { kFp32, kBf16, kFp16 };
std::string_view to_string(Precision precision);

// Megatron's --adam-beta1, --adam-beta2, --adam-eps, --weight-decay (the no-decay group uses 0).
struct AdamHyperParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

struct OptimizerOptions {
  Precision precision = Precision::kFp32;
  int zero_stage = 0;              // 0, 1 or 2 (not 1 or 2 with bf16)
  double gradient_clipping = 0.0;  // JSON gradient_clipping; 0 disables clipping
  AdamHyperParams adam;
  // The dtype gradients are all-reduced in; with one rank only its rounding remains (bf16: the
  // fp32-accumulated gradients are rounded to bf16 once per step).
  tensor::DType communication_dtype = tensor::DType::kFloat32;
  LossScaler loss_scaler = LossScaler::none();
  // The most elements one gradient or weight collective moves per call (CollectiveStaging), and
  // so the bound of the optimizer's scratch; any value gives the same numbers.
  std::int64_t collective_chunk_numel = kDefaultCollectiveChunk;
  // Whether bf16/fp16 keep `compute`, an fp32 copy of the weights refreshed after every step
  // (4 bytes per parameter), for a model that computes in fp32 from them (the host's default). A
  // model with 16-bit activations reads the 16-bit weights() alone and needs none. No effect on
  // fp32, whose weights are fp32.
  bool fp32_compute_copy = true;
  // Whether each micro-batch's gradient is written whole into micro_grads(), every element
  // including the alignment padding (GptModel's GradientWrite::kOverwrite, as the trainer runs
  // it): then micro_grads() is not zeroed between micro-batches or after a step that borrowed it,
  // a full pass over it each time. Off, it is zero whenever a micro-batch's gradient is to be
  // added into it.
  bool micro_grads_written_whole = false;
  // DeepSpeed's zero_optimization.overlap_comm, with several data-parallel ranks: at stages 0
  // and 1 the last micro-batch's gradients are all-reduced bucket by bucket as its backward
  // reports them final (gradients_ready()), the same bits as reducing them in step(); stage 1
  // then all-reduces its whole accumulator, as DeepSpeed 0.8.3 does, instead of
  // reduce-scattering it (twice the bytes, overlapped). At stage 2 every micro-batch's pieces are
  // reduced to the ranks owning them during its backward (train/overlapped_reduce_to_owners.h),
  // the bits of its reduce-scatter.
  bool overlap_reduction = false;
};

// The options DeepSpeed derives from its JSON (precision, ZeRO stage, clipping, communication
// dtype, loss scaler) with Megatron's Adam flags. Combinations upstream rejects or mds does not
// implement (bf16 with ZeRO 1 or 2, ZeRO 3) are Errors.
OptimizerOptions optimizer_options_from_config(const config::DeepSpeedConfig& config,
                                               const AdamHyperParams& adam);

struct StepResult {
  bool skipped = false;  // fp16 overflow: weights, Adam state and step count untouched
  // What engine.get_global_grad_norm() returns: the pre-clip norm of the unscaled gradients;
  // the previous step's value (0 before any) on an fp16 overflow; none for fp32, whose engine
  // never stores one.
  std::optional<double> grad_norm;
  double loss_scale = 1.0;  // after this step's scaler update
  bool clipped = false;     // the clipping factor was applied
  std::int64_t adam_step = 0;
};

// How restore_from_checkpoint() reconciles params and master after a checkpoint was written into
// the buffers' views.
enum class RestoreSource {
  kAsLoaded,          // both were loaded (DeepSpeed's load_from_fp32_weights, the default)
  kParamsFromMaster,  // params = master rounded (universal checkpoints load only fp32 weights)
  kMasterFromParams,  // master = params widened (load_from_fp32_weights = false)
};

class MixedPrecisionOptimizer {
 public:
  // `table` must outlive the optimizer, and so must the groups: `data_parallel` (null or one
  // rank: no reduction, no partitioning) and `model_parallel`, DeepSpeed's P×T group of this
  // replica (the gradient norm's sums and the overflow flag are reduced over it). Buffers start
  // zeroed; call initialize() or load a checkpoint and call restore_from_checkpoint() before
  // the first step.
  // `device` (null: the host) must outlive the optimizer too.
  MixedPrecisionOptimizer(const model::ParamTable& table, OptimizerOptions options,
                          dist::Communicator* data_parallel = nullptr,
                          dist::Communicator* model_parallel = nullptr,
                          const ops::DeviceContext* device = nullptr);

  // Sets the weights from fp32 initial values (a flat buffer laid out by the table; padding is
  // ignored): params = rounded, master (= compute) = params widened, as DeepSpeed's `module.half()`
  // / `.bfloat16()` before copying masters. The 16-bit wrappers then take their construction
  // step with all-zero gradients (training.md §4.3 item 6): step count 1, masters of the decay
  // groups × (1 − lr₀·wd), where lr₀ is the LR the scheduler's constructor set. Like upstream,
  // that step touches only the masters; params see it at the first real step. fp32 takes none.
  void initialize(tensor::Tensor initial_params, double initial_lr);
  // The same with the initial values written by `write_initial` into an fp32 host buffer laid
  // out by the table (zeroed; padding ignored). On the host that buffer is the fp32 weights,
  // their compute copy or (16-bit without one) the micro-batch gradient buffer, zero again
  // afterwards, so initializing needs no model-sized buffer of its own.
  void initialize_with(const std::function<void(const model::ParamBuffer&)>& write_initial,
                       double initial_lr);

  const OptimizerOptions& options() const { return options_; }
  const model::ParamTable& table() const { return *table_; }
  // Where the weights the model reads, the gradients and the Adam state live.
  tensor::Device device() const { return context().device(); }

  // The fp32 weights a model with fp32 activations reads (on device()): the weights themselves
  // (fp32), or their compute copy (bf16/fp16; fails with one line when built without one).
  const model::ParamBuffer& compute() const;
  // The weights in the precision's dtype on device() (compute() is them widened): all a model
  // with 16-bit activations reads.
  const model::ParamBuffer& weights() const { return params_; }
  // Where the model puts one micro-batch's (loss-scaled) fp32 gradient: zero between micro-batches
  // for a model that adds it, unspecified with OptimizerOptions::micro_grads_written_whole.
  const model::ParamBuffer& micro_grads() const { return micro_grads_; }
  // The factor the micro-batch loss is multiplied by before backward (1 unless fp16).
  double loss_scale() const { return options_.loss_scaler.scale(); }

  // Folds micro_grads into the gradient accumulator with upstream's rounding and zeroes it (unless
  // micro_grads_written_whole); the first micro-batch of a step writes the accumulator without
  // reading it (no zero fill between steps). At ZeRO stage 2 this reduce-scatters the micro-batch's
  // gradient (a collective: every data-parallel rank calls it together). `last`: nothing else joins
  // the accumulator before step() (no further micro-batch, and no reduce_tied_gradient but that of
  // a parameter held by reduce_after_tied_gradient() in an overlapped reduction); with one
  // data-parallel rank the communication dtype's rounding then happens in this pass instead of a
  // pass of step()'s own, and with overlaps_reduction() the reductions not started yet start.
  void accumulate_micro_batch(bool last = false);

  // Whether gradients_ready() starts reductions: overlap_reduction with a data-parallel group of
  // several ranks.
  bool overlaps_reduction() const;
  // Whether the backward of a micro-batch (the step's last or not) is to report its finished
  // gradients to gradients_ready(): at stages 0 and 1 the last one's, at stage 2 every one's.
  bool wants_gradients_ready(bool last_micro_batch) const;
  // With overlaps_reduction(): from now on the data-parallel reduction of table parameter `param`
  // (a pipeline's tied word embedding) waits for reduce_tied_gradient(param, ...) in every step,
  // since upstream's ReduceTiedGrads comes before ReduceGrads. Nothing happens otherwise.
  void reduce_after_tied_gradient(std::size_t param);
  // During the backward of a micro-batch for which wants_gradients_ready(): the micro-batch
  // gradients of table parameters `params` are final in micro_grads(), each parameter reported
  // at most once. Runs of adjacent final parameters are folded into the accumulator and their
  // all-reduce started as soon as they hold a collective chunk (stage 2: reduced to their
  // owners); the last accumulate starts the rest and step() waits for them (stage 2: the
  // micro-batch's accumulate waits). Nothing happens unless overlaps_reduction().
  void gradients_ready(std::span<const std::size_t> params);

  // Pipeline ReduceTiedGrads (training.md §3.2): sums the accumulated gradient of table
  // parameter `param` (the tied word embedding) over the first and last stage's `embedding`
  // group, between the last accumulate_micro_batch() and step(). At stage 2 the gradient is
  // already reduced and partitioned, and this is also a collective over the data-parallel group.
  // With an overlapped reduction in progress `param` must have been passed to
  // reduce_after_tied_gradient(); its data-parallel all-reduce starts here, after the tied sum.
  void reduce_tied_gradient(std::size_t param, dist::Communicator& embedding);

  // ReduceGrads and OptimizerStep at a gradient-accumulation boundary with this step's LR; the
  // accumulator is zeroed afterwards. Stage 0 all-reduces the gradients in the communication
  // dtype and multiplies by 1/D (DeepSpeed's allreduce_bucket); ZeRO 1 divides by D and
  // reduce-scatters. `iteration` only names the step in errors: bf16 fails where upstream asserts
  // the norm is positive.
  StepResult step(double lr, std::int64_t iteration);

  // Whether master and Adam state are this rank's ZeRO partitions (bf16, ZeRO 1 and 2).
  bool partitioned() const { return shard_.has_value(); }
  // The partitions' layout and buffers; only when partitioned().
  const ZeroShard& shard() const;

  // Checkpoint state, in host memory. params is the whole table-layout weight buffer (fp32, bf16
  // or fp16). The fp32 master and Adam moments are table-layout buffers too, or, when
  // partitioned(), this rank's partitions back to back (shard().layout().partition_numel()
  // elements). For fp32 at ZeRO 0, params and master are one buffer. On a device these are host
  // copies: see copy_state_to_host().
  const model::ParamBuffer& params() const { return host_ ? host_->params : params_; }
  tensor::Tensor master() const;
  tensor::Tensor exp_avg() const;
  tensor::Tensor exp_avg_sq() const;
  // The gradients accumulated so far (fp32 for fp32 and bf16, fp16 for fp16): table layout, or
  // at ZeRO stage 2 this rank's reduced partitions. Its values at a step boundary are stale (the
  // next micro-batch writes it without reading), zero at stage 2. On device().
  tensor::Tensor grad_accumulator() const;

  // On a device: copies weights and Adam moments into the host views above (before a checkpoint
  // is written from them, or partly overwritten by a load). Nothing to do on the host.
  void copy_state_to_host();

  // The buffers this optimizer holds on device(), in bytes (the host copies of a device run
  // excepted): what plan_optimizer_memory() predicts, the staging as it has grown so far.
  std::vector<BufferBytes> memory() const;

  // Adam's per-group `step` (equal in every group).
  std::int64_t adam_step() const { return adam_step_; }
  void set_adam_step(std::int64_t step);
  const LossScaler& loss_scaler() const { return options_.loss_scaler; }
  void load_loss_scaler_state(const LossScalerState& state);
  // The wrapper's `_global_grad_norm` (not checkpointed upstream: 0 after a resume).
  double last_grad_norm() const { return last_grad_norm_; }
  void set_last_grad_norm(double norm) { last_grad_norm_ = norm; }

  // Call after writing a checkpoint into the views above: reconciles params and master per
  // `source`, then refreshes the compute copy (on a device, after copying the host views over).
  // Continuing then gives the same numbers, bit for bit, as never having stopped.
  void restore_from_checkpoint(RestoreSource source);

 private:
  // A host buffer shaped like a device tensor (nothing for an undefined one).
  struct HostCopy {
    explicit HostCopy(tensor::Tensor like);
    tensor::Buffer buffer;
    tensor::Tensor view;
  };
  // The host side of the checkpoint views on a device; master only where it is not params.
  struct HostState {
    model::ParamBuffer params;
    HostCopy master, exp_avg, exp_avg_sq;
  };

  const ops::DeviceContext& context() const { return device_ != nullptr ? *device_ : host_ctx_; }
  void copy_state_to_device();
  // The state on device(): a separate master (undefined for fp32 at ZeRO 0) and the moments.
  tensor::Tensor master_on_device() const;
  tensor::Tensor exp_avg_on_device() const;
  tensor::Tensor exp_avg_sq_on_device() const;
  bool is_16bit() const { return options_.precision != Precision::kFp32; }
  bool is_zero() const { return options_.zero_stage >= 1; }
  std::int64_t dp_size() const;
  // The fp32 gradient partitions of a partitioned step, in the micro-batch gradient buffer.
  tensor::Tensor step_gradients() const;
  ShardAdamStep shard_adam_step(double lr) const;
  // One FusedAdam step over every non-empty group of `weights` with its weight decay; when
  // `rounded` (a table-layout 16-bit buffer) is given, the new weights rounded into it too.
  void adam_update(const model::ParamBuffer& weights, tensor::Tensor grads, double lr,
                   tensor::Tensor rounded = {});
  // params = master rounded (gathered from every partition), compute (if kept) = params widened.
  void publish_master();
  // compute = params widened (16-bit with a compute copy only).
  void refresh_compute();
  // Zeroes memory of micro_grads_ for the next micro-batch's gradient to be added into, where
  // the model does not write it whole.
  void zero_micro_grads(tensor::Tensor memory) const;
  // The dtype a single-rank step rounds the accumulated gradients through (fp32: none).
  tensor::DType single_rank_rounding() const;
  // The step consumed grad_accumulator_: the next micro-batch starts it afresh.
  void release_accumulator();
  // Stage 0's ReduceGrads: all-reduce in the communication dtype, × 1/D, chunk by chunk.
  void all_reduce_gradients();
  // The last micro-batch's accumulation and reduction, overlapped (overlaps_reduction()).
  void begin_overlapped_reduction();
  // Stage 2's overlapped reduction of the current micro-batch.
  void begin_reduction_to_owners();
  // Whether any rank of the model-parallel group (and of the DP group, for partitioned
  // gradients) saw an inf/NaN.
  bool any_overflow(tensor::Tensor grads, bool partitioned_grads) const;
  StepResult step_fp32(double lr);
  StepResult step_bf16(double lr, std::int64_t iteration);
  StepResult step_fp16(double lr);
  // `reduced_whole`: stage 1's accumulator was all-reduced whole (an overlapped reduction).
  StepResult step_zero(double lr, bool reduced_whole);
  // ZeRO's per-group norm over the gradient partitions, reduced over DP and model parallel.
  double zero_grad_norm(tensor::Tensor grads) const;

  const model::ParamTable* table_;
  OptimizerOptions options_;
  dist::Communicator* data_parallel_;
  dist::Communicator* model_parallel_;
  const ops::DeviceContext* device_;  // null: host_ctx_
  ops::DeviceContext host_ctx_;
  model::ParamBuffer params_;
  CollectiveStaging staging_;
  std::optional<ZeroShard> shard_;                      // partitioned state
  std::optional<model::ParamBuffer> master_;            // FP16_Optimizer's whole master
  std::optional<model::ParamBuffer> compute_;           // 16-bit with fp32_compute_copy only
  std::optional<model::ParamBuffer> exp_avg_;           // unpartitioned state
  std::optional<model::ParamBuffer> exp_avg_sq_;        // unpartitioned state
  std::optional<model::ParamBuffer> grad_accumulator_;  // stages 0 and 1
  // Stage 2's reduced gradient partitions (accumulator dtype), to which every micro-batch adds.
  tensor::Buffer partition_accumulator_buffer_;
  tensor::Tensor partition_accumulator_;
  // Also the fp32 gradient scratch of the fp16 step and the gradient partitions of a partitioned
  // step (room for both), which leave it zeroed (unless micro_grads_written_whole).
  model::ParamBuffer micro_grads_;
  // grad_accumulator_ holds no gradient of the coming step yet (the next accumulate writes it).
  bool accumulator_fresh_ = true;
  // The last accumulate rounded grad_accumulator_ through the communication dtype already.
  bool accumulator_rounded_ = false;
  // The reduction overlapping the last micro-batch's backward (overlaps_reduction(), stages 0
  // and 1), and stage 2's overlapping every micro-batch's.
  std::optional<OverlappedAllReduce> overlap_;
  std::optional<OverlappedReduceToOwners> owners_;
  std::optional<HostState> host_;  // on a device only
  std::int64_t adam_step_ = 0;
  double last_grad_norm_ = 0.0;
  bool initialized_ = false;
};

}  // namespace mds::train
