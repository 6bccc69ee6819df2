#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/activation_plan.h"
#include "model/dropout_context.h"
#include "model/embedding_layer.h"
#include "model/model_options.h"
#include "model/model_params.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "ops/device_context.h"
#include "ops/dx_mode.h"
#include "tensor/arena.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace mds::model {

// How a backward treats the parameter gradient buffer it is given.
enum class GradientWrite {
  // The buffer receives the micro-batch's gradient whatever it held: every element is written
  // (the GEMM weights' straight from their GEMMs, with no fill and no read beforehand; the rest,
  // alignment padding included, onto zeros filled first).
  kOverwrite,
  kAdd,  // the gradient is added into the buffer's values (micro-batches accumulate)
};

// Called by a backward with the table indices of parameters whose gradient it has finished
// (nothing later in that backward writes them): after the head, after each transformer layer,
// after the embedding. On a device the kernels writing them are queued, not necessarily done.
// Every parameter of the stage is reported once per backward.
using GradientsReady = std::function<void(std::span<const std::size_t> params)>;

struct MicroBatch {             // host tensors
  tensor::Tensor tokens;        // int64 [b, s]
  tensor::Tensor labels;        // int64 [b, s]
  tensor::Tensor loss_mask;     // fp32  [b, s]
  tensor::Tensor position_ids;  // int64 [b, s]
};

// GPTModelPipe, fp32 or with 16-bit activations (ModelOptions::activation_dtype) on the CPU or
// on a CUDA device, with every layer's forward and backward
// written out (architecture.md §3). With T > 1 this rank holds its TP shard of every split weight
// (the table's local shapes) and `tp` carries the collectives of training.md §2.3; the results
// equal the T = 1 model's up to the order of the sums. The config's spec range [stage_first_spec,
// stage_end) makes it one pipeline stage (training.md §3): the stage owning the embedding reads
// tokens, a later one the previous stage's output [s, b, h]; the stage owning the head (final
// LayerNorm, logits through its replica of the tied word embedding, loss) returns the loss, the
// others their output [s, b, h]. Dropout masks follow the global layer index, so they do not
// depend on the split. Activations live in an arena planned from the options at construction
// for `num_buffers` micro-batches in flight; a step allocates nothing.
//
// Where it runs: on the host, or, given a DeviceContext of a CUDA device (owned by the caller,
// who keeps it alive), on that device: activations there, parameters and gradients in
// ParamBuffers there, the same layer code dispatching to the CUDA ops, attention through the
// flash kernels. The micro-batch still comes from the host (checked and transposed there, then
// copied over) and the loss goes back to it. Any T and any pipeline stage run on a device: the TP
// group must then move device tensors (dist/device_communicators.h), and the stage's hidden
// tensors are on the model's device.
class GptModel {
 public:
  // Plans and allocates the activations; fails with the bytes needed if they cannot be had, or
  // naming the option or parameter that does not fit the model. A TP group, when given, must
  // have config.tensor_parallel_size ranks with this one at config.tp_rank. `device` null: the
  // host.
  GptModel(const ModelOptions& options, const ParamTable& table,
           dist::Communicator* tensor_parallel = nullptr, int num_buffers = 1,
           const ops::DeviceContext* device = nullptr);

  const ModelOptions& options() const { return options_; }
  // Where the activations live and the ops run (ParamBuffers passed in must be there too).
  tensor::Device device() const { return context().device(); }
  std::size_t activation_bytes() const { return activations_->bytes(); }
  int num_buffers() const { return activations_->num_buffers(); }
  bool owns_embedding() const { return owns_embedding_; }  // the first stage
  bool owns_head() const { return owns_head_; }            // the last stage

  // Forward and backward of one micro-batch through the whole model (P = 1; fails on a partial
  // stage). params and grads are ParamBuffers laid out by the table on the model's device: grads
  // fp32; params one fp32 buffer with fp32 activations, or with 16-bit activations the 16-bit
  // weights (alone, or with an fp32 copy of them for the non-GEMM parameters: model_params.h).
  // The gradient of (loss · loss_scale) is written into grads, or added into it with
  // GradientWrite::kAdd (micro-batches accumulate). `ready`, if set, hears which gradients are
  // final as the backward goes. Returns the unscaled micro-batch loss Σ loss·mask / Σ mask.
  float forward_backward(const ModelParams& params, const ParamBuffer& grads,
                         const MicroBatch& batch, const DropoutContext& dropout, float loss_scale,
                         GradientWrite write = GradientWrite::kOverwrite,
                         const GradientsReady& ready = {});

  // Forward only through the whole model; returns the micro-batch loss. With `token_losses`
  // (fp32 [b, s]) also writes each token's loss (for evaluate/perplexity later).
  float forward_loss(const ModelParams& params, const MicroBatch& batch,
                     const DropoutContext& dropout, tensor::Tensor token_losses = {});

  // Each token's loss of the last forward into pipe buffer `buffer` (the last stage only) into
  // `token_losses` (fp32 [b, s]).
  void copy_token_losses(int buffer, tensor::Tensor token_losses) const;

  // The stage's forward of one micro-batch into pipe buffer `buffer`, which keeps what its
  // backward needs (the dropout context included) until the next forward into that buffer.
  // `batch` needs tokens and position_ids on the first stage, labels and loss_mask on the last
  // (other fields may be empty). `input_hidden` (fp32 [s, b, h], on the model's device) is the
  // previous stage's output, empty on the first stage; `output_hidden` receives this stage's
  // output, empty on the last. These two (and output_grad, input_grad) are fp32 or of the
  // activation dtype.
  // Either may be the buffer's own stage_input / stage_output (then nothing is copied). Returns
  // the micro-batch loss on the last stage, 0 elsewhere.
  float forward_stage(int buffer, const ModelParams& params, const MicroBatch& batch,
                      const DropoutContext& dropout, tensor::Tensor input_hidden,
                      tensor::Tensor output_hidden);

  // The backward of the micro-batch in `buffer`, writing its parameter gradients into grads (or
  // adding them, with GradientWrite::kAdd).
  // On the last stage it starts from loss · loss_scale (the last forward must have been into
  // this buffer, as 1F1B does, since the buffers share the head); elsewhere from `output_grad`
  // = ∂/∂output_hidden (fp32 [s, b, h]) and loss_scale is unused. `input_grad` receives
  // ∂/∂input_hidden, empty on the first stage. The tied word embedding's gradient of each
  // stage (first: lookups, last: logits) lands in that stage's own view; summing the two is the
  // caller's ReduceTiedGrads.
  // `ready` as for forward_backward.
  void backward_stage(int buffer, const ModelParams& params, const ParamBuffer& grads,
                      tensor::Tensor output_grad, tensor::Tensor input_grad, float loss_scale,
                      GradientWrite write = GradientWrite::kOverwrite,
                      const GradientsReady& ready = {});

  // The last stage's forward_stage then backward_stage of one micro-batch in one call, for a
  // training step whose loss scale is known before the forward (as 1F1B runs the last stage: its
  // backward follows its forward directly): the same loss, gradients and input_grad bit for bit,
  // the head's loss and logits' gradient in one pass over the logits at TP = 1 (on a device one
  // kernel instead of two). Leaves the buffer as backward_stage does. Fails on another stage.
  float forward_backward_stage(int buffer, const ModelParams& params, const ParamBuffer& grads,
                               const MicroBatch& batch, const DropoutContext& dropout,
                               tensor::Tensor input_hidden, tensor::Tensor input_grad,
                               float loss_scale, GradientWrite write = GradientWrite::kOverwrite,
                               const GradientsReady& ready = {});

  // The buffer's tensors, for receiving or sending without a copy.
  const tensor::Tensor& stage_input(int buffer) const { return activations_->stage_input(buffer); }
  const tensor::Tensor& stage_output(int buffer) const {
    return activations_->stage_output(buffer);
  }

 private:
  struct ParamIndex {
    // The word embedding is the first stage's module or the last stage's tied replica.
    std::size_t word = 0, position = 0, final_ln_weight = 0, final_ln_bias = 0;
    std::size_t embed_norm_weight = 0, embed_norm_bias = 0;  // with --embed-layernorm
    std::vector<LayerParamIndex> layers;  // the stage's layers, from StageLayers::first
  };
  struct BufferState {
    DropoutContext dropout;
    bool forward_done = false;
    double loss_mask_sum = 0.0;  // of the micro-batch's mask, on the last stage
  };

  // The micro-batch's host side on a device: transposed here, then copied over; and the
  // per-token losses coming back.
  struct HostStaging {
    tensor::Arena arena;
    InputActivations inputs;
    tensor::Tensor token_losses;  // [s, b]
  };

  const ops::DeviceContext& context() const { return device_ != nullptr ? *device_ : host_; }
  void check_device_support() const;
  void check_buffer(const ParamBuffer& buffer, const char* role, tensor::DType dtype) const;
  void check_params(const ModelParams& params) const;
  void check_whole_model(const char* call) const;
  void check_hidden(const tensor::Tensor& hidden, bool wanted, const char* role) const;
  int checked_pipe_buffer(int buffer) const;
  // Returns Σ loss_mask on the last stage (0 elsewhere).
  double load_batch(int buffer, const MicroBatch& batch);
  LayerSetup layer_setup(std::int64_t layer, const DropoutContext& dropout) const;
  const LayerParamIndex& layer_index(std::int64_t layer) const;
  // A forward's start: the buffer's state and batch, the previous stage's output in its input.
  void start_forward(BufferState& state, int buffer, const MicroBatch& batch,
                     const DropoutContext& dropout, tensor::Tensor input_hidden);
  // The embedding (on the first stage) and the stage's layers.
  void forward_body(int buffer, const ModelParams& params);
  // forward_body, then the head on the last stage (returning the loss).
  float forward(int buffer, const ModelParams& params);
  // Zeroes what no GEMM overwrites for GradientWrite::kOverwrite; the GEMMs' weight-gradient mode.
  ops::Dx prepare_gradients(const ParamBuffer& grads, GradientWrite write) const;
  void report_head_ready(const GradientsReady& ready) const;
  void backward(int buffer, const ModelParams& params, const ParamBuffer& grads, float loss_scale,
                GradientWrite write, const GradientsReady& ready);
  // The layers' backward from ws.grad, then the embedding's (on the first stage).
  void backward_body(int buffer, const ModelParams& params, const ParamBuffer& grads,
                     ops::Dx gemm_weight_grads, const GradientsReady& ready);
  // [offset, offset + numel) ranges of the gradient buffer that no GEMM writes over: filled with
  // zeros before a GradientWrite::kOverwrite backward adds into them.
  struct FlatRange {
    std::int64_t offset, numel;
  };
  static std::vector<FlatRange> ranges_not_overwritten(const ParamTable& table,
                                                       const std::vector<std::size_t>& overwritten);
  void forward_layer(int buffer, const ModelParams& params, std::int64_t layer);

  ModelOptions options_;
  const ops::DeviceContext* device_;  // null: host_
  ops::DeviceContext host_;
  std::size_t table_size_;
  std::int64_t table_numel_;
  bool owns_embedding_;
  bool owns_head_;
  bool absolute_positions() const;
  tensor::Tensor alibi_bias() const;  // a view of alibi_bias_
  // The position table (or its gradient) in `buffer`; an empty tensor with ALiBi, which has none.
  tensor::Tensor position_table(const ParamBuffer& buffer) const;
  // --embed-layernorm's weights, gradients and the buffer's activations (first stage).
  EmbeddingNorm embedding_norm(int buffer, const ModelParams& params,
                               const ParamBuffer* grads = nullptr) const;

  ParamIndex index_;
  // ALiBi: this rank's heads' key bias [np, s] on the model's device (model/alibi.h).
  tensor::Buffer alibi_bias_;
  std::unique_ptr<Activations> activations_;
  std::unique_ptr<HostStaging> staging_;  // on a device only
  TensorParallel tp_;
  std::vector<BufferState> buffers_;
  int head_buffer_ = -1;  // the buffer whose forward the shared head activations hold
  std::vector<FlatRange> zeroed_before_overwrite_;
};

}  // namespace mds::model
