// check_checkpoint_args: the model-defining arguments of a saved Namespace against the current
// command line (megatron/checkpointing.py).
#include <optional>
#include <string>

#include "base/error.h"
#include "ckpt/megatron_args.h"

namespace mds::ckpt {

using config::PositionEmbeddingType;
using io::Value;
using io::ValueRef;

std::optional<PositionEmbeddingType> saved_position_embedding_type(const Value& v) {
  const auto from_value = [](int64_t value) -> std::optional<PositionEmbeddingType> {
    if (value < 1 || value > 3) return std::nullopt;
    return static_cast<PositionEmbeddingType>(value);
  };
  if (!v.is(Value::Kind::kObject)) return std::nullopt;
  if (v.qualified_name() == "megatron.enums.PositionEmbeddingType" && v.args().size() == 1 &&
      v.args()[0].is(Value::Kind::kInt)) {
    return from_value(v.args()[0].as_int());
  }
  if ((v.qualified_name() == "builtins.getattr" || v.qualified_name() == "__builtin__.getattr") &&
      v.args().size() == 2 && v.args()[0].is(Value::Kind::kGlobal) &&
      v.args()[0].qualified_name() == "megatron.enums.PositionEmbeddingType" &&
      v.args()[1].is(Value::Kind::kString)) {
    for (auto type : {PositionEmbeddingType::kRotary, PositionEmbeddingType::kAbsolute,
                      PositionEmbeddingType::kAlibi}) {
      if (config::to_string(type) == v.args()[1].as_string()) return type;
    }
  }
  return std::nullopt;
}

namespace {

// A saved attribute as Python's str() would show it, for messages.
std::string describe(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return base::cat(v.as_float());
    case Value::Kind::kString:
      return v.as_string();
    default:
      if (const auto type = saved_position_embedding_type(v))
        return std::string(config::to_string(*type));
      return std::string("a ") + std::string(v.kind_name());
  }
}

class Comparison {
 public:
  Comparison(const ValueRef& saved, std::string checkpoint)
      : saved_(saved), checkpoint_(std::move(checkpoint)) {}

  const Value& saved(const std::string& name) const {
    const std::optional<ValueRef> value = saved_.get(name);
    if (!value) base::fail("checkpoint ", checkpoint_, ": its args have no ", name);
    return value->value();
  }

  [[noreturn]] void mismatch(const std::string& name, const std::string& saved,
                             const std::string& current) const {
    base::fail("checkpoint ", checkpoint_, ": ", name, " is ", saved, " in the checkpoint but ",
               current, " on the command line");
  }

  // Python's ==: ints and floats compare by value, None only equals None.
  void integer(const std::string& name, std::optional<int64_t> current,
               const std::string& saved_name = "") const {
    const Value& v = saved(saved_name.empty() ? name : saved_name);
    const bool equal =
        current ? ((v.is(Value::Kind::kInt) && v.as_int() == *current) ||
                   (v.is(Value::Kind::kFloat) && v.as_float() == static_cast<double>(*current)))
                : v.is(Value::Kind::kNone);
    if (!equal) mismatch(name, describe(v), current ? std::to_string(*current) : "None");
  }

  void text(const std::string& name, const std::string& current) const {
    const Value& v = saved(name);
    if (!v.is(Value::Kind::kString) || v.as_string() != current) {
      mismatch(name, describe(v), current);
    }
  }

  // A flag that changes what the model computes but that upstream does not compare: checked only
  // where the saved args have it, so that checkpoints written without the attribute still load.
  void flag_if_saved(const std::string& name, bool current) const {
    const std::optional<ValueRef> value = saved_.get(name);
    if (!value) return;
    const Value& v = value->value();
    if (!v.is(Value::Kind::kBool) || v.as_bool() != current) {
      mismatch(name, describe(v), current ? "True" : "False");
    }
  }

  void position_type(PositionEmbeddingType current) const {
    const Value& v = saved("position_embedding_type");
    const std::optional<PositionEmbeddingType> type = saved_position_embedding_type(v);
    if (type != current) {
      mismatch("position_embedding_type", describe(v), std::string(config::to_string(current)));
    }
  }

 private:
  ValueRef saved_;
  std::string checkpoint_;
};

}  // namespace

void check_checkpoint_args(const io::ValueRef& saved_args, const config::PretrainArgs& current,
                           int64_t padded_vocab_size, const std::string& checkpoint,
                           double checkpoint_version) {
  if (current.universal_checkpoint) return;  // topology and padding may change
  const ValueRef attributes =
      saved_args.kind() == Value::Kind::kObject ? saved_args.object_state() : saved_args;
  const Comparison check(attributes, checkpoint);
  check.integer("num_layers", current.num_layers);
  check.integer("hidden_size", current.hidden_size);
  check.integer("num_attention_heads", current.num_attention_heads);
  check.position_type(current.position_embedding_type);
  check.flag_if_saved("apply_residual_connection_post_layernorm",
                      current.apply_residual_connection_post_layernorm);
  check.flag_if_saved("embed_layernorm", current.embed_layernorm);
  if (current.position_embedding_type != PositionEmbeddingType::kAlibi) {
    check.integer("max_position_embeddings", current.max_position_embeddings);
  }
  if (!current.tokenizer.vocab_file.empty()) {
    check.integer("make_vocab_size_divisible_by", current.tokenizer.make_vocab_size_divisible_by);
    check.integer("padded_vocab_size", padded_vocab_size);
    check.text("tokenizer_type", current.tokenizer.tokenizer_type);
  }
  if (checkpoint_version < 3.0) {
    check.integer("tensor_model_parallel_size", current.tensor_model_parallel_size,
                  "model_parallel_size");
  } else {
    check.integer("tensor_model_parallel_size", current.tensor_model_parallel_size);
    check.integer("pipeline_model_parallel_size", current.pipeline_model_parallel_size);
  }
}

}  // namespace mds::ckpt
