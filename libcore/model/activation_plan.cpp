#include "model/activation_plan.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace mds::model {

using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

std::vector<LayerChunk> checkpoint_chunks(const ModelOptions& options) {
  const GptConfig& c = options.config;
  std::vector<LayerChunk> chunks;
  const auto single_layers = [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t layer = first; layer < end; ++layer) chunks.push_back({layer, layer + 1});
  };
  if (!options.checkpoint_activations) {
    single_layers(0, c.num_layers);
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
                          Views& v, Visit&& visit) {
  const GptConfig& c = options.config;
  const std::int64_t s = c.seq_length, b = options.micro_batch_size, h = c.hidden_size;
  // This TP rank's heads, attention width, MLP width and vocabulary columns.
  const std::int64_t n = c.local_heads(), attention = c.local_hidden(), f = c.local_ffn();
  const std::int64_t vocab = c.local_vocab(), layers = c.num_layers;
  const auto fp32 = [&](Tensor& t, const std::string& name, Shape shape) {
    visit(t, name, DType::kFloat32, shape);
  };
  const Shape tokens{s, b}, hidden{s, b, h}, ffn{s, b, f}, probs{b, n, s, s};
  const Shape qkv{s, b, 3 * attention}, context{s, b, attention};

  visit(v.inputs.tokens, "tokens", DType::kInt64, tokens);
  visit(v.inputs.positions, "position_ids", DType::kInt64, tokens);
  visit(v.inputs.labels, "labels", DType::kInt64, tokens);
  fp32(v.inputs.loss_mask, "loss_mask", tokens);

  const auto layer_set = [&](LayerActivations& a, const std::string& p) {
    fp32(a.ln1, p + "ln1", hidden);
    fp32(a.ln1_mean, p + "ln1_mean", tokens);
    fp32(a.ln1_rstd, p + "ln1_rstd", tokens);
    fp32(a.qkv, p + "qkv", qkv);
    fp32(a.probs, p + "probs", probs);
    fp32(a.context, p + "context", context);
    fp32(a.attention_out, p + "attention_out", hidden);
    fp32(a.ln2, p + "ln2", hidden);
    fp32(a.ln2_mean, p + "ln2_mean", tokens);
    fp32(a.ln2_rstd, p + "ln2_rstd", tokens);
    fp32(a.fc, p + "fc", ffn);
    fp32(a.gelu, p + "gelu", ffn);
  };

  // A recomputed chunk of k layers uses shared sets 0..k-1 and shared inputs for positions
  // 1..k-1; its first input is kept per chunk, as is every other layer's input and set.
  std::int64_t shared_count = 0;
  for (const LayerChunk& chunk : chunks) {
    if (chunk.recompute) shared_count = std::max(shared_count, chunk.end - chunk.first);
  }
  v.layer_inputs.assign(static_cast<std::size_t>(layers) + 1, Tensor{});
  v.set_of_layer.assign(static_cast<std::size_t>(layers), 0);
  std::size_t own_sets = 0;
  for (const LayerChunk& chunk : chunks) own_sets += chunk.recompute ? 0 : 1;
  v.sets.assign(own_sets + static_cast<std::size_t>(shared_count), LayerActivations{});
  std::vector<Tensor> shared_inputs(
      static_cast<std::size_t>(std::max<std::int64_t>(shared_count, 1)));
  for (std::int64_t j = 1; j < shared_count; ++j) {
    fp32(shared_inputs[static_cast<std::size_t>(j)], "recompute_input." + std::to_string(j),
         hidden);
  }
  for (std::int64_t j = 0; j < shared_count; ++j) {
    layer_set(v.sets[own_sets + static_cast<std::size_t>(j)],
              "recompute." + std::to_string(j) + ".");
  }
  std::size_t next_own = 0;
  for (const LayerChunk& chunk : chunks) {
    for (std::int64_t layer = chunk.first; layer < chunk.end; ++layer) {
      const auto index = static_cast<std::size_t>(layer);
      const std::string prefix = "layer." + std::to_string(layer) + ".";
      const std::int64_t position = layer - chunk.first;
      if (chunk.recompute && position > 0) {
        v.layer_inputs[index] = shared_inputs[static_cast<std::size_t>(position)];
      } else {
        fp32(v.layer_inputs[index], prefix + "input", hidden);
      }
      if (chunk.recompute) {
        v.set_of_layer[index] = own_sets + static_cast<std::size_t>(position);
      } else {
        v.set_of_layer[index] = next_own;
        layer_set(v.sets[next_own++], prefix);
      }
    }
  }

  HeadActivations& head = v.head;
  fp32(head.input, "head.input", hidden);
  v.layer_inputs[static_cast<std::size_t>(layers)] = head.input;
  fp32(head.ln, "head.ln", hidden);
  fp32(head.ln_mean, "head.ln_mean", tokens);
  fp32(head.ln_rstd, "head.ln_rstd", tokens);
  fp32(head.logits, "head.logits", Shape{s, b, vocab});
  fp32(head.max, "head.max", tokens);
  fp32(head.target_logit, "head.target_logit", tokens);
  fp32(head.sum_exp, "head.sum_exp", tokens);
  fp32(head.loss, "head.loss", tokens);
  fp32(head.dloss, "head.dloss", tokens);

  Workspace& w = v.workspace;
  fp32(w.grad, "workspace.grad", hidden);
  fp32(w.hidden_a, "workspace.hidden_a", hidden);
  fp32(w.hidden_b, "workspace.hidden_b", hidden);
  fp32(w.ffn_a, "workspace.ffn_a", ffn);
  fp32(w.ffn_b, "workspace.ffn_b", ffn);
  fp32(w.qkv, "workspace.qkv", qkv);
  fp32(w.context, "workspace.context", context);
  fp32(w.probs_a, "workspace.probs_a", probs);
  fp32(w.probs_b, "workspace.probs_b", probs);
}

tensor::ArenaPlan Activations::plan(const ModelOptions& options,
                                    const std::vector<LayerChunk>& chunks) {
  tensor::ArenaPlan arena_plan;
  Views scratch;
  lay_out(options, chunks, scratch,
          [&](Tensor&, const std::string& name, DType dtype, Shape shape) {
            arena_plan.add(name, dtype, shape);
          });
  return arena_plan;
}

std::size_t Activations::planned_bytes(const ModelOptions& options) {
  validate(options);
  return plan(options, checkpoint_chunks(options)).total_bytes();
}

Activations::Activations(const ModelOptions& options)
    : chunks_((validate(options), checkpoint_chunks(options))),
      arena_(plan(options, chunks_), tensor::Device{}, "GptModel activations") {
  std::size_t slot = 0;
  lay_out(options, chunks_, views_,
          [&](Tensor& view, const std::string&, DType, Shape) { view = arena_[slot++]; });
}

const Tensor& Activations::layer_input(std::int64_t layer) const {
  if (layer < 0 || layer >= static_cast<std::int64_t>(views_.set_of_layer.size()))
    base::fail("Activations: layer ", layer, " is out of range");
  return views_.layer_inputs[static_cast<std::size_t>(layer)];
}

const Tensor& Activations::layer_output(std::int64_t layer) const {
  layer_input(layer);  // range check
  return views_.layer_inputs[static_cast<std::size_t>(layer) + 1];
}

const LayerActivations& Activations::layer(std::int64_t layer) const {
  layer_input(layer);
  return views_.sets[views_.set_of_layer[static_cast<std::size_t>(layer)]];
}

}  // namespace mds::model
