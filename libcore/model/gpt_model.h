#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/activation_plan.h"
#include "model/dropout_context.h"
#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "tensor/tensor.h"

namespace mds::model {

struct MicroBatch {             // host tensors
  tensor::Tensor tokens;        // int64 [b, s]
  tensor::Tensor labels;        // int64 [b, s]
  tensor::Tensor loss_mask;     // fp32  [b, s]
  tensor::Tensor position_ids;  // int64 [b, s]
};

// GPTModelPipe (P = 1), fp32 on the CPU, with every layer's forward and backward written out
// (architecture.md §3). With T > 1 this rank holds its TP shard of every split weight (the
// table's local shapes) and `tp` carries the collectives of training.md §2.3; the results equal
// the T = 1 model's up to the order of the sums. Activations live in an arena planned from the
// options at construction; a step allocates nothing.
class GptModel {
 public:
  // Plans and allocates the activations; fails with the bytes needed if they cannot be had, or
  // naming the option or parameter that does not fit the model. A TP group, when given, must
  // have config.tensor_parallel_size ranks with this one at config.tp_rank.
  GptModel(const ModelOptions& options, const ParamTable& table,
           dist::Communicator* tensor_parallel = nullptr);

  const ModelOptions& options() const { return options_; }
  std::size_t activation_bytes() const { return activations_->bytes(); }

  // Forward and backward of one micro-batch. params and grads are fp32 ParamBuffers laid out by
  // the table. The gradient of (loss · loss_scale) is ADDED into grads (micro-batches
  // accumulate). Returns the unscaled micro-batch loss Σ loss·mask / Σ mask.
  float forward_backward(const ParamBuffer& params, const ParamBuffer& grads,
                         const MicroBatch& batch, const DropoutContext& dropout, float loss_scale);

  // Forward only; returns the micro-batch loss. With `token_losses` (fp32 [b, s]) also writes
  // each token's loss (for evaluate/perplexity later).
  float forward_loss(const ParamBuffer& params, const MicroBatch& batch,
                     const DropoutContext& dropout, tensor::Tensor token_losses = {});

 private:
  struct ParamIndex {
    std::size_t word, position, final_ln_weight, final_ln_bias;
    std::vector<LayerParamIndex> layers;
  };

  void check_buffer(const ParamBuffer& buffer, const char* role) const;
  void load_batch(const MicroBatch& batch);
  LayerSetup layer_setup(std::int64_t layer, const DropoutContext& dropout) const;
  float forward(const ParamBuffer& params, const DropoutContext& dropout);
  void forward_layer(const ParamBuffer& params, std::int64_t layer, const DropoutContext& dropout);

  ModelOptions options_;
  std::size_t table_size_;
  std::int64_t table_numel_;
  ParamIndex index_;
  std::unique_ptr<Activations> activations_;
  TensorParallel tp_;
};

}  // namespace mds::model
