// Runs the CPU GPT model once, forward and backward, for tests/e2e/gpt_reference_test.py, which
// checks the loss and every parameter gradient against an independent PyTorch GPT-2
// (tests/e2e/reference_gpt.py). Also gives pretrain_reference_test.py the initial weights that
// `pretrain --seed S` starts from.
//
// Usage: gpt_grad_probe --num-layers L --hidden-size h --num-attention-heads n --seq-length s
//          --padded-vocab-size Vp [--max-position-embeddings P] [--micro-batch-size b] [--seed S]
//          [--no-query-key-layer-scaling] [--checkpoint-activations] [--checkpoint-num-layers k]
//          [--apply-residual-connection-post-layernorm] [--embed-layernorm] [--alibi]
//          [--gelu tanh|openai|erf] [--perturb]
//          [--init-only] --out DIR
// --perturb adds a fixed pseudo-random offset in [-0.1, 0.1] to every initialized parameter, so
// that biases are not zero and LayerNorm weights not one (a forward pass that skipped them would
// otherwise go unnoticed).
// Writes (every .pt an OrderedDict of fp32/int64 tensors, loadable with torch.load):
//   DIR/weights.pt  engine name → initial parameter (model::initialize_parameters(seed))
// and, without --init-only, with dropout 0 and loss scale 1:
//   DIR/grads.pt    engine name → gradient of the micro-batch loss
//   DIR/batch.pt    tokens, labels, loss_mask, position_ids ([b, s]; a fixed LCG batch)
//   DIR/token_losses.pt  token_losses [b, s] from forward_loss
//   DIR/loss.txt    line 1: forward_backward's loss, line 2: forward_loss's loss (%.9g)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/pickle_value.h"
#include "io/torch_file.h"
#include "model/gpt_model.h"
#include "model/init.h"
#include "model/model_options.h"
#include "model/param_buffer.h"
#include "model/param_table.h"

namespace {

using mds::base::fail;
using mds::io::TensorRef;
using mds::io::Value;
using mds::tensor::DType;
using mds::tensor::Shape;
using mds::tensor::Tensor;

struct ProbeArgs {
  mds::model::ModelOptions options;
  std::uint64_t seed = 1234;
  bool init_only = false;
  bool perturb = false;
  std::string out;
};

std::int64_t parse_int(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 0)
    fail(flag, ": expected a non-negative integer, got '", text, "'");
  return value;
}

ProbeArgs parse(const std::vector<std::string>& args) {
  ProbeArgs probe;
  auto& options = probe.options;
  auto& config = options.config;
  options.hidden_dropout = 0.0f;
  options.attention_dropout = 0.0f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) fail(flag, ": missing value");
      return args[++i];
    };
    if (flag == "--num-layers") {
      config.num_layers = parse_int(flag, value());
    } else if (flag == "--hidden-size") {
      config.hidden_size = parse_int(flag, value());
    } else if (flag == "--num-attention-heads") {
      config.num_attention_heads = parse_int(flag, value());
    } else if (flag == "--seq-length") {
      config.seq_length = parse_int(flag, value());
    } else if (flag == "--max-position-embeddings") {
      config.max_position_embeddings = parse_int(flag, value());
    } else if (flag == "--padded-vocab-size") {
      config.padded_vocab_size = parse_int(flag, value());
    } else if (flag == "--micro-batch-size") {
      options.micro_batch_size = parse_int(flag, value());
    } else if (flag == "--seed") {
      probe.seed = static_cast<std::uint64_t>(parse_int(flag, value()));
    } else if (flag == "--no-query-key-layer-scaling") {
      options.apply_query_key_layer_scaling = false;
    } else if (flag == "--apply-residual-connection-post-layernorm") {
      options.apply_residual_connection_post_layernorm = true;
    } else if (flag == "--embed-layernorm") {
      config.embed_layernorm = true;
    } else if (flag == "--alibi") {
      config.position_embedding = mds::model::PositionEmbedding::kAlibi;
    } else if (flag == "--checkpoint-activations") {
      options.checkpoint_activations = true;
    } else if (flag == "--checkpoint-num-layers") {
      options.checkpoint_num_layers = parse_int(flag, value());
    } else if (flag == "--gelu") {
      const std::string& kind = value();
      if (kind == "tanh") {
        options.gelu = mds::ops::GeluKind::kTanhFused;
      } else if (kind == "openai") {
        options.gelu = mds::ops::GeluKind::kTanhOpenAI;
      } else if (kind == "erf") {
        options.gelu = mds::ops::GeluKind::kErf;
      } else {
        fail("--gelu: expected tanh, openai or erf, got '", kind, "'");
      }
    } else if (flag == "--perturb") {
      probe.perturb = true;
    } else if (flag == "--init-only") {
      probe.init_only = true;
    } else if (flag == "--out") {
      probe.out = value();
    } else {
      fail("unknown flag ", flag);
    }
  }
  if (probe.out.empty()) fail("--out is required");
  if (config.max_position_embeddings == 0) config.max_position_embeddings = config.seq_length;
  return probe;
}

// Tensors to write, each with its own storage; the bytes stay owned by the caller.
class TensorWriter {
 public:
  void add(const std::string& name, const Tensor& tensor) {
    const std::string key = std::to_string(storages_.size());
    storages_[key] = {tensor.dtype(),
                      std::string_view(static_cast<const char*>(tensor.raw()), tensor.bytes())};
    TensorRef ref;
    ref.dtype = tensor.dtype();
    ref.shape.assign(tensor.shape().begin(), tensor.shape().end());
    ref.strides = TensorRef::contiguous_strides(ref.shape);
    ref.storage_key = key;
    root_.set(name, Value::tensor(std::move(ref)));
  }
  void write(const std::string& path) const { mds::io::write_torch_file(path, root_, storages_); }

 private:
  Value root_ = Value::ordered_dict();
  mds::io::TorchStorages storages_;
};

void write_params(const std::string& path, const mds::model::ParamBuffer& buffer) {
  TensorWriter writer;
  const auto& table = buffer.table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].tied_replica) continue;
    writer.add(table[i].engine_name(), buffer.view(i));
  }
  writer.write(path);
}

// A fixed batch: tokens and labels from one 64-bit LCG over [0, Vp) (labels are the tokens
// shifted by one, as get_batch_pipe makes them), a loss mask with a few zeros, positions 0..s-1.
struct ProbeBatch {
  std::vector<std::int64_t> tokens, labels, position_ids;
  std::vector<float> loss_mask;
};

ProbeBatch make_batch(std::int64_t b, std::int64_t s, std::int64_t vocab, std::uint64_t seed) {
  ProbeBatch batch;
  std::uint64_t state = seed * 2654435761u + 12345u;
  for (std::int64_t row = 0; row < b; ++row) {
    std::vector<std::int64_t> text(static_cast<std::size_t>(s + 1));
    for (auto& token : text) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      token = static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(vocab));
    }
    for (std::int64_t j = 0; j < s; ++j) {
      batch.tokens.push_back(text[static_cast<std::size_t>(j)]);
      batch.labels.push_back(text[static_cast<std::size_t>(j + 1)]);
      batch.position_ids.push_back(j);
      batch.loss_mask.push_back((row * 3 + j) % 7 == 2 ? 0.0f : 1.0f);
    }
  }
  return batch;
}

void perturb(const mds::model::ParamBuffer& params, std::uint64_t seed) {
  std::uint64_t state = seed ^ 0x9E3779B97F4A7C15ull;
  for (std::size_t i = 0; i < params.table().size(); ++i) {
    for (float& value : params.view(i).host_span<float>()) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double unit = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
      value += static_cast<float>(0.2 * unit - 0.1);
    }
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) fail("cannot write ", path);
}

std::string format_float(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g\n", value);
  return buf;
}

int run(const ProbeArgs& probe) {
  std::filesystem::create_directories(probe.out);
  const std::string dir = probe.out + "/";
  const auto& config = probe.options.config;
  const auto table = mds::model::ParamTable::build(config);
  const mds::model::ParamBuffer params(table, DType::kFloat32);
  mds::model::initialize_parameters(params, probe.seed);
  if (probe.perturb) perturb(params, probe.seed);
  write_params(dir + "weights.pt", params);
  if (probe.init_only) return 0;

  const std::int64_t b = probe.options.micro_batch_size, s = config.seq_length;
  ProbeBatch data = make_batch(b, s, config.padded_vocab_size, probe.seed);
  const Shape shape{b, s};
  mds::model::MicroBatch batch;
  batch.tokens = Tensor(data.tokens.data(), DType::kInt64, shape);
  batch.labels = Tensor(data.labels.data(), DType::kInt64, shape);
  batch.loss_mask = Tensor(data.loss_mask.data(), DType::kFloat32, shape);
  batch.position_ids = Tensor(data.position_ids.data(), DType::kInt64, shape);

  mds::model::GptModel model(probe.options, table);
  const mds::model::ParamBuffer grads(table, DType::kFloat32);
  mds::model::DropoutContext dropout;
  dropout.seed = probe.seed;
  const float loss = model.forward_backward(params, grads, batch, dropout, 1.0f);
  std::vector<float> token_losses(static_cast<std::size_t>(b * s));
  const float eval_loss = model.forward_loss(params, batch, dropout,
                                             Tensor(token_losses.data(), DType::kFloat32, shape));

  write_params(dir + "grads.pt", grads);
  TensorWriter batch_writer;
  batch_writer.add("tokens", batch.tokens);
  batch_writer.add("labels", batch.labels);
  batch_writer.add("loss_mask", batch.loss_mask);
  batch_writer.add("position_ids", batch.position_ids);
  batch_writer.write(dir + "batch.pt");
  TensorWriter loss_writer;
  loss_writer.add("token_losses", Tensor(token_losses.data(), DType::kFloat32, shape));
  loss_writer.write(dir + "token_losses.pt");
  write_text(dir + "loss.txt", format_float(loss) + format_float(eval_loss));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(std::vector<std::string>(argv + 1, argv + argc)));
  } catch (const std::exception& e) {
    std::cerr << "gpt_grad_probe: " << e.what() << "\n";
    return 1;
  }
}
