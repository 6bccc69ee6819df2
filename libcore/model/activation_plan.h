#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_options.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace mds::model {

// What one transformer layer's forward keeps for its backward (s sequence, b micro-batch,
// h hidden; n heads, a = n·hn attention width and F ffn of this TP rank; token-major [s, b, ...]
// as upstream's layers).
// The attention keeps what its implementation needs (ops/attention.h): on the host the
// probabilities, on a CUDA device (flash attention) one log-sum-exp per query row instead; the
// other one stays an empty tensor.
struct LayerActivations {
  tensor::Tensor ln1, ln1_mean, ln1_rstd;  // input_layernorm: [s, b, h], [s, b], [s, b]
  tensor::Tensor qkv;                      // [s, b, 3a], bias included
  tensor::Tensor probs;                    // host: [b, n, s, s] softmax before attention dropout
  tensor::Tensor lse;                      // CUDA: [b, n, s]
  // CUDA with attention dropout, where the backward reads them: the dropout's keep bits
  // (ops::flash_attention_keep_bits_shape, int32 [b, n, s, 2·⌈s/64⌉]).
  tensor::Tensor keep_bits;
  tensor::Tensor context;                  // [s, b, a]
  tensor::Tensor attention_out;            // [s, b, h] residual stream after attention
  tensor::Tensor ln2, ln2_mean, ln2_rstd;  // post_attention_layernorm
  tensor::Tensor fc;                       // [s, b, F] dense_h_to_4h output, bias not added
  tensor::Tensor gelu;                     // [s, b, F] gelu(fc + bias)
};

// The micro-batch in the token-major order of the layers ([s, b]).
struct InputActivations {
  tensor::Tensor tokens, positions, labels;  // int64
  tensor::Tensor loss_mask;                  // fp32
};

// The first stage's embedding LayerNorm (--embed-layernorm): its input, the TP-summed lookups
// [s, b, h], and its statistics [s, b]. Empty tensors without the norm.
struct EmbeddingActivations {
  tensor::Tensor norm_input, norm_mean, norm_rstd;
};

// Final LayerNorm, tied logits and the loss.
struct HeadActivations {
  tensor::Tensor input;                 // [s, b, h] the last layer's output
  tensor::Tensor ln, ln_mean, ln_rstd;  // final LayerNorm
  // [s, b, Vp/T] in the activation dtype: this rank's logits, then (the backward) their gradient.
  // fp32 logits hold exp(logit − max) between the loss and the backward; 16-bit ones are read as
  // they are by the loss (widened, fp32 math: upstream's logits.float() without the fp32 copy).
  tensor::Tensor logits;
  tensor::Tensor max, target_logit, sum_exp, loss;  // cross entropy, per token [s, b]
  tensor::Tensor dloss;                             // [s, b]
};

// Scratch shared by all layers: forward temporaries and backward gradients. `grad` carries the
// gradient of the residual stream from the head down to the embedding.
struct Workspace {
  tensor::Tensor grad;                // [s, b, h]
  tensor::Tensor hidden_a, hidden_b;  // [s, b, h]
  tensor::Tensor ffn_a, ffn_b;        // [s, b, F]
  tensor::Tensor qkv;                 // [s, b, 3a]
  tensor::Tensor context;             // [s, b, a]
  tensor::Tensor probs_a, probs_b;    // [b, n, s, s] on the host; empty on a CUDA device
};

// A run of consecutive layers [first, end). A recomputed chunk keeps only its input during the
// forward and runs its forward again inside its backward.
struct LayerChunk {
  std::int64_t first = 0;
  std::int64_t end = 0;
  bool recompute = false;
};

// The transformer layers [first, end) of the stage's spec range (all of them for P = 1).
struct StageLayers {
  std::int64_t first = 0;
  std::int64_t end = 0;
  std::int64_t count() const { return end - first; }
  static StageLayers of(const GptConfig& config);
};

// DeepSpeed's rule for GPTModelPipe (training.md §6): the stage's specs are cut into chunks of
// checkpoint_num_layers specs counted from the stage's first spec, and a chunk is recomputed only
// if every spec in it is a transformer layer. Layers outside recomputed chunks come one per chunk.
// Only the stage's own layers appear.
std::vector<LayerChunk> checkpoint_chunks(const ModelOptions& options);

// Every activation of the stage's micro-batches in flight in one arena planned from the options:
// training allocates nothing per step. Each of `num_buffers` pipe buffers (training.md §3.3)
// keeps what one micro-batch's backward reads: its inputs, the input of every layer (of every
// chunk when recomputing), the non-recomputed layers' sets and the stage's output. Shared by the
// buffers: the workspace, the sets a recomputed chunk refills inside its backward, and the head
// (logits and loss), because the stage owning the head runs each micro-batch's backward right
// after its forward (1F1B). Layers of a recomputed chunk share one set of activation tensors per
// position in the chunk, so memory grows with the number of chunks instead of layers.
//
// The arena lives on `device`; what the attention keeps depends on it (LayerActivations), so a
// CUDA plan has no [b, n, s, s] tensor at all. Activations (the logits included), stage tensors
// and the workspace's activation gradients take options.activation_dtype; statistics,
// probabilities, lse and the per-token loss values are fp32; the attention dropout's keep bits
// (CUDA, where ops::flash_attention_reads_keep_bits) are int32 words.
class Activations {
 public:
  // Fails with the bytes needed when the arena cannot be allocated.
  explicit Activations(const ModelOptions& options, int num_buffers = 1,
                       tensor::Device device = {});
  // The bytes the arena for these options needs on `device`, without allocating it.
  static std::size_t planned_bytes(const ModelOptions& options, int num_buffers = 1,
                                   tensor::Device device = {});

  std::size_t bytes() const { return arena_.bytes(); }
  tensor::Device device() const { return device_; }
  int num_buffers() const { return static_cast<int>(views_.buffers.size()); }
  const StageLayers& stage_layers() const { return stage_; }
  const std::vector<LayerChunk>& chunks() const { return chunks_; }
  // Tokens and positions exist on the stage owning the embedding, labels and the loss mask on
  // the one owning the head; the others are empty tensors.
  const InputActivations& inputs(int buffer) const;
  const EmbeddingActivations& embedding(int buffer) const;
  // [s, b, h]: the first layer's input (the embedding's output or the previous stage's output),
  // and the stage's output (the last layer's output, the head's input on the last stage). They
  // are the same tensor on a stage without transformer layers.
  const tensor::Tensor& stage_input(int buffer) const;
  const tensor::Tensor& stage_output(int buffer) const;
  // The tensor layer `layer` (global index, one of the stage's) reads its input from; its output
  // goes to layer_output(buffer, layer).
  const tensor::Tensor& layer_input(int buffer, std::int64_t layer) const;
  const tensor::Tensor& layer_output(int buffer, std::int64_t layer) const;
  const LayerActivations& layer(int buffer, std::int64_t layer) const;
  // Empty tensors, head.input aside, on a stage without the head.
  const HeadActivations& head(int buffer) const;
  const Workspace& workspace() const { return views_.workspace; }

 private:
  struct BufferViews {
    InputActivations inputs;
    EmbeddingActivations embedding;
    std::vector<tensor::Tensor> hidden;     // stage layer count + 1: the last is the stage output
    std::vector<std::size_t> set_of_layer;  // by local layer, into Views::sets
    HeadActivations head;                   // the shared head with this buffer's input
  };
  // The views into the arena; laid out by one walk over the options (activation_plan.cpp).
  struct Views {
    std::vector<BufferViews> buffers;
    std::vector<LayerActivations> sets;
    Workspace workspace;
  };
  template <typename Visit>
  static void lay_out(const ModelOptions& options, const std::vector<LayerChunk>& chunks,
                      int num_buffers, bool flash_attention, Views& views, Visit&& visit);
  static tensor::ArenaPlan plan(const ModelOptions& options, const std::vector<LayerChunk>& chunks,
                                int num_buffers, bool flash_attention);
  const BufferViews& buffer(int buffer) const;
  std::size_t local_layer(std::int64_t layer) const;

  tensor::Device device_;
  StageLayers stage_;
  std::vector<LayerChunk> chunks_;
  tensor::Arena arena_;
  Views views_;
};

}  // namespace mds::model
