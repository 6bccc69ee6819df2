// Exposes the DeepSpeed checkpoint writer and reader to tests/e2e/ckpt_torch_load_test.py, which
// loads the files with torch. Commands (LAYOUT: fp32, fp16, fp16-zero1, bf16):
//   ckpt_probe write DIR LAYOUT [rotary]    save the fixed tiny training state as global_step12
//   ckpt_probe verify DIR LAYOUT [rotary]   load DIR's latest into fresh buffers and compare every
//                                           byte and counter with the fixed state; prints "ok"
// The state: L=2, h=16, n=2, F=64, Vp=64 (V=50), 8 positions, seed 42; 16-bit layouts hold
// fp32 masters equal to their 16-bit weights, so that rebuilding fp32 weights from the optimizer
// file must give the layer files' weights exactly. Errors: message, exit 1.
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/json_value.h"
#include "config/json_document.h"
#include "model/param_buffer.h"
#include "tensor/buffer.h"
#include "train/zero_partition.h"

namespace {

using namespace mds;

ckpt::OptimizerLayout parse_layout(const std::string& name) {
  for (const auto layout : {ckpt::OptimizerLayout::kFp32, ckpt::OptimizerLayout::kFp16,
                            ckpt::OptimizerLayout::kFp16Zero1, ckpt::OptimizerLayout::kBf16}) {
    if (ckpt::layout_name(layout) == name) return layout;
  }
  base::fail("unknown layout '", name, "' (fp32, fp16, fp16-zero1, bf16)");
}

model::GptConfig probe_config(bool rotary) {
  model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.seq_length = 8;
  c.max_position_embeddings = 8;
  c.padded_vocab_size = 64;
  c.position_embedding =
      rotary ? model::PositionEmbedding::kRotary : model::PositionEmbedding::kAbsolute;
  return c;
}

float sample(std::uint32_t stream, std::int64_t i) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + stream * 40503u + 977u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (static_cast<float>(x % 20000u) - 9999.5f) / 8192.0f;
}

struct Probe {
  Probe(bool rotary, ckpt::OptimizerLayout layout, bool filled)
      : table(model::ParamTable::build(probe_config(rotary))),
        zero(table, 1),
        params(table, ckpt::params_dtype(layout)),
        master(table, tensor::DType::kFloat32),
        exp_avg(table, tensor::DType::kFloat32),
        exp_avg_sq(table, tensor::DType::kFloat32),
        partitions(static_cast<std::size_t>(3 * zero.partition_numel()) * sizeof(float),
                   tensor::Device{}) {
    state.table = &table;
    state.layout = layout;
    state.params = params.flat();
    state.master = master.flat();
    state.exp_avg = exp_avg.flat();
    state.exp_avg_sq = exp_avg_sq.flat();
    if (ckpt::has_zero_file(layout)) {
      // The ZeRO layouts keep master and moments as this (only) rank's partitions.
      const std::int64_t n = zero.partition_numel();
      const tensor::Tensor all = partitions.as(tensor::DType::kFloat32, tensor::Shape{3 * n});
      state.zero = &zero;
      state.master = all.narrow(0, n);
      state.exp_avg = all.narrow(n, n);
      state.exp_avg_sq = all.narrow(2 * n, n);
    }
    state.rotary_head_dim = rotary ? 8 : 0;
    if (filled) fill();
  }

  // The table-layout buffers' values moved into the state's partitions.
  void partition_optimizer_state() {
    if (state.zero == nullptr) return;
    const std::pair<const model::ParamBuffer*, tensor::Tensor> pairs[] = {
        {&master, state.master}, {&exp_avg, state.exp_avg}, {&exp_avg_sq, state.exp_avg_sq}};
    for (const auto& [values, partitions_out] : pairs) {
      std::int64_t offset = 0;
      for (std::size_t g = 0; g < zero.size(); ++g) {
        const std::int64_t n = zero[g].partition_numel;
        train::gather_partition(values->flat(), zero, g, 0, partitions_out.narrow(offset, n));
        offset += n;
      }
    }
  }

  void fill() {
    for (const model::ParamSpec& p : table.params()) {
      for (std::int64_t j = p.offset; j < p.offset + p.local_numel(); ++j) {
        float value = sample(1, j);
        switch (state.params.dtype()) {
          case tensor::DType::kFloat32:
            static_cast<float*>(state.params.raw())[j] = value;
            break;
          case tensor::DType::kBFloat16: {
            const tensor::BFloat16 b = tensor::to_bfloat16(value);
            static_cast<tensor::BFloat16*>(state.params.raw())[j] = b;
            value = tensor::to_float(b);
            break;
          }
          default: {
            const tensor::Float16 h = tensor::to_float16(value);
            static_cast<tensor::Float16*>(state.params.raw())[j] = h;
            value = tensor::to_float(h);
            break;
          }
        }
        master.flat().data<float>()[j] = value;
        exp_avg.flat().data<float>()[j] = sample(3, j) / 64.0f;
        exp_avg_sq.flat().data<float>()[j] = std::fabs(sample(4, j)) / 4096.0f;
      }
    }
    partition_optimizer_state();
    ckpt::TrainingState& s = state;
    s.adam_step = 13;
    s.adam = {3.0e-4, 0.9, 0.95, 1e-8, 0.1};
    s.clip_grad = 1.0;
    s.loss_scaler = {true, 32768.0, 12, 3, 2.0, 1000, 1.0, 2, 2, false, true};
    s.lr_scheduler = {6e-4, 16.0, 96, 0, 768, "cosine", 800, 6e-5};
    s.iteration = 12;
    s.global_steps = 12;
    s.global_samples = 96;
    s.skipped_steps = 0;
    s.consumed_train_samples = 96;
    s.consumed_valid_samples = 16;
    s.consumed_train_tokens = 768;
    s.padded_vocab_size = 64;
    s.original_vocab_size = 50;
    s.seed = 42;
    io::Value fields = io::Value::dict();
    fields.set("num_layers", io::Value::integer(2));
    fields.set("hidden_size", io::Value::integer(16));
    fields.set("params_dtype", io::Value::global("torch", "bfloat16"));
    fields.set("position_embedding_type",
               io::Value::object("megatron.enums", "PositionEmbeddingType", {io::Value::integer(2)},
                                 false));
    fields.set("seed", io::Value::integer(42));
    s.args = io::Value::namespace_object(std::move(fields));
    s.ds_config = ckpt::json_to_value(config::parse_json(
        R"({"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8,
            "gradient_clipping": 1.0, "zero_optimization": {"stage": 0},
            "bf16": {"enabled": false}, "steps_per_print": 2000})",
        "ds_config.json"));
  }

  model::ParamTable table;
  train::ZeroLayout zero;
  model::ParamBuffer params, master, exp_avg, exp_avg_sq;
  tensor::Buffer partitions;
  ckpt::TrainingState state;
};

bool same(const tensor::Tensor& a, const tensor::Tensor& b) {
  return std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

void require(bool condition, const std::string& what) {
  if (!condition) base::fail("verify: ", what, " differs from what was written");
}

void verify(const std::string& dir, ckpt::OptimizerLayout layout, bool rotary) {
  const Probe expected(rotary, layout, true);
  Probe loaded(rotary, layout, false);
  const auto tag = ckpt::read_latest_tag(dir);
  if (!tag) base::fail(dir, ": no latest file");
  const ckpt::LoadedCheckpoint info = ckpt::load_deepspeed_checkpoint(dir, *tag, loaded.state);
  const ckpt::TrainingState& e = expected.state;
  const ckpt::TrainingState& l = loaded.state;
  require(same(l.params, e.params), "params");
  if (layout != ckpt::OptimizerLayout::kFp32) require(same(l.master, e.master), "master");
  require(same(l.exp_avg, e.exp_avg), "exp_avg");
  require(same(l.exp_avg_sq, e.exp_avg_sq), "exp_avg_sq");
  require(l.adam_step == e.adam_step && l.adam.lr == e.adam.lr && l.adam.beta2 == e.adam.beta2 &&
              l.adam.eps == e.adam.eps && l.adam.weight_decay == e.adam.weight_decay,
          "adam");
  require(l.iteration == e.iteration && l.global_steps == e.global_steps &&
              l.global_samples == e.global_samples && l.skipped_steps == e.skipped_steps &&
              l.consumed_train_samples == e.consumed_train_samples &&
              l.consumed_valid_samples == e.consumed_valid_samples &&
              l.consumed_train_tokens == e.consumed_train_tokens,
          "counters");
  require(l.lr_scheduler.num_steps == e.lr_scheduler.num_steps &&
              l.lr_scheduler.max_lr == e.lr_scheduler.max_lr &&
              l.lr_scheduler.decay_style == e.lr_scheduler.decay_style,
          "lr_scheduler");
  if (layout == ckpt::OptimizerLayout::kFp16 || layout == ckpt::OptimizerLayout::kFp16Zero1) {
    require(l.loss_scaler.cur_scale == e.loss_scaler.cur_scale &&
                l.loss_scaler.cur_iter == e.loss_scaler.cur_iter &&
                l.loss_scaler.last_overflow_iter == e.loss_scaler.last_overflow_iter,
            "loss scaler");
  }
  require(info.ds_config == e.ds_config, "ds_config");
  std::cout << "ok\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string usage = "usage: ckpt_probe write|verify DIR LAYOUT [rotary]";
    if (argc < 4 || argc > 5) base::fail(usage);
    const std::string command = argv[1];
    const ckpt::OptimizerLayout layout = parse_layout(argv[3]);
    const bool rotary = argc == 5 && std::string(argv[4]) == "rotary";
    if (argc == 5 && !rotary) base::fail(usage);
    if (command == "write") {
      const Probe probe(rotary, layout, true);
      ckpt::save_deepspeed_checkpoint(argv[2], probe.state);
    } else if (command == "verify") {
      verify(argv[2], layout, rotary);
    } else {
      base::fail(usage);
    }
  } catch (const std::exception& e) {
    std::cerr << "ckpt_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
