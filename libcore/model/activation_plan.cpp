#include "model/activation_plan.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "ops/attention.h"

namespace mds::model {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

StageLayers StageLayers::of(const GptConfig& config) {
  const auto local = [&](std::int64_t spec) {
    return std::clamp<std::int64_t>(spec - GptConfig::layer_spec(0), 0, config.num_layers);
  };
  return {local(config.stage_first_spec), local(config.stage_end())};
}

std::vector<LayerChunk> checkpoint_chunks(const ModelOptions& options) {
  const GptConfig& c = options.config;
  std::vector<LayerChunk> chunks;
  const auto single_layers = [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t layer = first; layer < end; ++layer) chunks.push_back({layer, layer + 1});
  };
  if (!options.checkpoint_activations) {
    const StageLayers stage = StageLayers::of(c);
    single_layers(stage.first, stage.end);
    return chunks;
  }
  const std::int64_t k = options.checkpoint_num_layers;
  const std::int64_t first_spec = c.stage_first_spec;
  const std::int64_t end_spec = c.stage_end();
  const std::int64_t first_layer_spec = GptConfig::layer_spec(0);
  const std::int64_t end_layer_spec = GptConfig::layer_spec(c.num_layers);
  for (std::int64_t start = first_spec; start < end_spec; start += k) {
    const std::int64_t stop = std::min(start + k, end_spec);
    // Layers are specs [3, L+3); clip the chunk to them and keep only those it holds.
    const std::int64_t lo = std::max(start, first_layer_spec);
    const std::int64_t hi = std::min(stop, end_layer_spec);
    if (lo >= hi) continue;
    const std::int64_t first = lo - first_layer_spec;
    const std::int64_t end = hi - first_layer_spec;
    if (start >= first_layer_spec && stop <= end_layer_spec) {
      chunks.push_back({first, end, true});
    } else {
      single_layers(first, end);
    }
  }
  return chunks;
}

// Walks every tensor of the arena in a fixed order, calling visit(view, name, dtype, shape): once
// to plan the arena and once to point the views at it.
template <typename Visit>
void Activations::lay_out(const ModelOptions& options, const std::vector<LayerChunk>& chunks,
                          int num_buffers, bool flash_attention, Views& v, Visit&& visit) {
  const GptConfig& c = options.config;
  const std::int64_t s = c.seq_length, b = options.micro_batch_size, h = c.hidden_size;
  // This TP rank's heads, attention width, MLP width and vocabulary columns.
  const std::int64_t n = c.local_heads(), attention = c.local_hidden(), f = c.local_ffn();
  const std::int64_t vocab = c.local_vocab();
  const StageLayers stage = StageLayers::of(c);
  const bool owns_embedding = c.stage_owns(GptConfig::kEmbeddingSpec);
  const bool owns_head = c.stage_owns(c.head_spec());
  const auto fp32 = [&](Tensor& t, const std::string& name, Shape shape) {
    visit(t, name, DType::kFloat32, shape);
  };
  // Activations (the logits too) and their gradients take the options' dtype; statistics,
  // probabilities, lse and the per-token losses stay fp32.
  const auto act = [&](Tensor& t, const std::string& name, Shape shape) {
    visit(t, name, options.activation_dtype, shape);
  };
  const Shape tokens{s, b}, hidden{s, b, h}, ffn{s, b, f}, probs{b, n, s, s}, rows{b, n, s};
  // The backward reads a bit per pair instead of drawing the dropout's Philox stream again.
  const bool keep_bits =
      flash_attention && options.attention_dropout > 0.0f &&
      ops::flash_attention_reads_keep_bits(options.activation_dtype, c.head_dim());
  const Shape qkv{s, b, 3 * attention}, context{s, b, attention};

  const auto layer_set = [&](LayerActivations& a, const std::string& p) {
    act(a.ln1, p + "ln1", hidden);
    fp32(a.ln1_mean, p + "ln1_mean", tokens);
    fp32(a.ln1_rstd, p + "ln1_rstd", tokens);
    act(a.qkv, p + "qkv", qkv);
    if (flash_attention) {
      fp32(a.lse, p + "lse", rows);
      if (keep_bits) {
        visit(a.keep_bits, p + "keep_bits", DType::kInt32,
              ops::flash_attention_keep_bits_shape(b, n, s));
      }
    } else {
      fp32(a.probs, p + "probs", probs);
    }
    act(a.context, p + "context", context);
    act(a.attention_out, p + "attention_out", hidden);
    act(a.ln2, p + "ln2", hidden);
    fp32(a.ln2_mean, p + "ln2_mean", tokens);
    fp32(a.ln2_rstd, p + "ln2_rstd", tokens);
    act(a.fc, p + "fc", ffn);
    act(a.gelu, p + "gelu", ffn);
  };

  // A recomputed chunk of k layers uses shared sets 0..k-1 and shared inputs for positions
  // 1..k-1, refilled inside its backward; its first input is kept per chunk and buffer, as is
  // every other layer's input and set.
  std::int64_t shared_count = 0;
  std::size_t own_sets = 0;
  for (const LayerChunk& chunk : chunks) {
    if (chunk.recompute) shared_count = std::max(shared_count, chunk.end - chunk.first);
    own_sets += chunk.recompute ? 0 : 1;
  }
  const auto buffers = static_cast<std::size_t>(num_buffers);
  v.sets.assign(static_cast<std::size_t>(shared_count) + buffers * own_sets, LayerActivations{});
  std::vector<Tensor> shared_inputs(
      static_cast<std::size_t>(std::max<std::int64_t>(shared_count, 1)));
  for (std::int64_t j = 1; j < shared_count; ++j) {
    act(shared_inputs[static_cast<std::size_t>(j)], "recompute_input." + std::to_string(j), hidden);
  }
  for (std::int64_t j = 0; j < shared_count; ++j) {
    layer_set(v.sets[static_cast<std::size_t>(j)], "recompute." + std::to_string(j) + ".");
  }

  HeadActivations head;
  if (owns_head) {
    act(head.ln, "head.ln", hidden);
    fp32(head.ln_mean, "head.ln_mean", tokens);
    fp32(head.ln_rstd, "head.ln_rstd", tokens);
    act(head.logits, "head.logits", Shape{s, b, vocab});
    fp32(head.max, "head.max", tokens);
    fp32(head.target_logit, "head.target_logit", tokens);
    fp32(head.sum_exp, "head.sum_exp", tokens);
    fp32(head.loss, "head.loss", tokens);
    fp32(head.dloss, "head.dloss", tokens);
  }

  v.buffers.assign(buffers, BufferViews{});
  std::size_t next_own = static_cast<std::size_t>(shared_count);
  for (std::size_t k = 0; k < buffers; ++k) {
    BufferViews& buffer = v.buffers[k];
    const std::string tag = "buffer." + std::to_string(k) + ".";
    if (owns_embedding) {
      visit(buffer.inputs.tokens, tag + "tokens", DType::kInt64, tokens);
      visit(buffer.inputs.positions, tag + "position_ids", DType::kInt64, tokens);
      if (c.embed_layernorm) {
        act(buffer.embedding.norm_input, tag + "embedding.norm_input", hidden);
        fp32(buffer.embedding.norm_mean, tag + "embedding.norm_mean", tokens);
        fp32(buffer.embedding.norm_rstd, tag + "embedding.norm_rstd", tokens);
      }
    }
    if (owns_head) {
      visit(buffer.inputs.labels, tag + "labels", DType::kInt64, tokens);
      fp32(buffer.inputs.loss_mask, tag + "loss_mask", tokens);
    }
    buffer.hidden.assign(static_cast<std::size_t>(stage.count()) + 1, Tensor{});
    buffer.set_of_layer.assign(static_cast<std::size_t>(stage.count()), 0);
    for (const LayerChunk& chunk : chunks) {
      for (std::int64_t layer = chunk.first; layer < chunk.end; ++layer) {
        const auto local = static_cast<std::size_t>(layer - stage.first);
        const std::string prefix = tag + "layer." + std::to_string(layer) + ".";
        const std::int64_t position = layer - chunk.first;
        if (chunk.recompute && position > 0) {
          buffer.hidden[local] = shared_inputs[static_cast<std::size_t>(position)];
        } else {
          act(buffer.hidden[local], prefix + "input", hidden);
        }
        if (chunk.recompute) {
          buffer.set_of_layer[local] = static_cast<std::size_t>(position);
        } else {
          buffer.set_of_layer[local] = next_own;
          layer_set(v.sets[next_own++], prefix);
        }
      }
    }
    act(buffer.hidden.back(), tag + "output", hidden);
    buffer.head = head;
    buffer.head.input = buffer.hidden.back();
  }

  Workspace& w = v.workspace;
  act(w.grad, "workspace.grad", hidden);
  act(w.hidden_a, "workspace.hidden_a", hidden);
  act(w.hidden_b, "workspace.hidden_b", hidden);
  act(w.ffn_a, "workspace.ffn_a", ffn);
  act(w.ffn_b, "workspace.ffn_b", ffn);
  act(w.qkv, "workspace.qkv", qkv);
  act(w.context, "workspace.context", context);
  if (!flash_attention) {
    fp32(w.probs_a, "workspace.probs_a", probs);
    fp32(w.probs_b, "workspace.probs_b", probs);
  }
}

tensor::ArenaPlan Activations::plan(const ModelOptions& options,
                                    const std::vector<LayerChunk>& chunks, int num_buffers,
                                    bool flash_attention) {
  tensor::ArenaPlan arena_plan;
  Views scratch;
  lay_out(options, chunks, num_buffers, flash_attention, scratch,
          [&](Tensor&, const std::string& name, DType dtype, Shape shape) {
            arena_plan.add(name, dtype, shape);
          });
  return arena_plan;
}

namespace {

int checked_buffers(int num_buffers) {
  if (num_buffers < 1) base::fail("Activations: num_buffers must be at least 1, got ", num_buffers);
  return num_buffers;
}

// CUDA runs the flash-style attention kernels, which keep no probabilities.
bool flash_attention_on(tensor::Device device) {
  return device.kind == tensor::DeviceKind::kCuda;
}

}  // namespace

std::size_t Activations::planned_bytes(const ModelOptions& options, int num_buffers,
                                       tensor::Device device) {
  validate(options);
  return plan(options, checkpoint_chunks(options), checked_buffers(num_buffers),
              flash_attention_on(device))
      .total_bytes();
}

Activations::Activations(const ModelOptions& options, int num_buffers, tensor::Device device)
    : device_(device),
      stage_((validate(options), StageLayers::of(options.config))),
      chunks_(checkpoint_chunks(options)),
      arena_(plan(options, chunks_, checked_buffers(num_buffers), flash_attention_on(device)),
             device, "GptModel activations") {
  std::size_t slot = 0;
  lay_out(options, chunks_, num_buffers, flash_attention_on(device), views_,
          [&](Tensor& view, const std::string&, DType, Shape) { view = arena_[slot++]; });
}

const Activations::BufferViews& Activations::buffer(int buffer) const {
  if (buffer < 0 || buffer >= num_buffers())
    base::fail("Activations: pipe buffer ", buffer, " is outside [0, ", num_buffers(), ")");
  return views_.buffers[static_cast<std::size_t>(buffer)];
}

std::size_t Activations::local_layer(std::int64_t layer) const {
  if (layer < stage_.first || layer >= stage_.end) {
    base::fail("Activations: layer ", layer, " is not one of the stage's layers [", stage_.first,
               ", ", stage_.end, ")");
  }
  return static_cast<std::size_t>(layer - stage_.first);
}

const InputActivations& Activations::inputs(int buffer) const {
  return this->buffer(buffer).inputs;
}

const EmbeddingActivations& Activations::embedding(int buffer) const {
  return this->buffer(buffer).embedding;
}

const Tensor& Activations::stage_input(int buffer) const {
  return this->buffer(buffer).hidden.front();
}

const Tensor& Activations::stage_output(int buffer) const {
  return this->buffer(buffer).hidden.back();
}

const Tensor& Activations::layer_input(int buffer, std::int64_t layer) const {
  return this->buffer(buffer).hidden[local_layer(layer)];
}

const Tensor& Activations::layer_output(int buffer, std::int64_t layer) const {
  return this->buffer(buffer).hidden[local_layer(layer) + 1];
}

const LayerActivations& Activations::layer(int buffer, std::int64_t layer) const {
  return views_.sets[this->buffer(buffer).set_of_layer[local_layer(layer)]];
}

const HeadActivations& Activations::head(int buffer) const {
  return this->buffer(buffer).head;
}

}  // namespace mds::model
