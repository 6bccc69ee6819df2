#include "ckpt/deepspeed_objects.h"

#include <cmath>

#include "base/error.h"

namespace mds::ckpt {

using io::Value;
using io::ValueRef;

namespace {

constexpr const char* kLossScalerModule = "deepspeed.runtime.fp16.loss_scaler";

Value float_tuple(double a, double b) {
  return Value::tuple({Value::real(a), Value::real(b)});
}

Value int_list(const std::vector<std::int64_t>& ints) {
  Value list = Value::list();
  for (const std::int64_t i : ints) list.push(Value::integer(i));
  return list;
}

const Value& object_of(const ValueRef& ref, std::string_view what) {
  if (!ref.value().is(Value::Kind::kObject)) ref.fail_expected(what);
  return ref.value();
}

}  // namespace

std::int64_t read_integer(const ValueRef& ref) {
  if (ref.value().is(Value::Kind::kFloat)) {
    const double d = ref.value().as_float();
    if (std::nearbyint(d) == d && std::fabs(d) < 9.0e18) return static_cast<std::int64_t>(d);
  }
  return ref.as_int();
}

Value torch_size(const tensor::Shape& shape) {
  Value dims = Value::tuple();
  for (const std::int64_t d : shape) dims.items().push_back(Value::integer(d));
  return Value::object("torch", "Size", {std::move(dims)}, false);
}

tensor::Shape read_torch_size(const ValueRef& ref) {
  const Value& v = object_of(ref, "a torch.Size");
  if (v.qualified_name() != "torch.Size" || v.args().size() != 1 ||
      !v.args()[0].is(Value::Kind::kTuple) || v.args()[0].size() > tensor::Shape::kMaxRank) {
    ref.fail_expected("a torch.Size");
  }
  std::vector<std::int64_t> dims;
  for (const Value& d : v.args()[0].items()) {
    if (!d.is(Value::Kind::kInt)) ref.fail_expected("a torch.Size of ints");
    dims.push_back(d.as_int());
  }
  // Shape has no push: build it through its initializer-list form, one rank at a time.
  switch (dims.size()) {
    case 0:
      return tensor::Shape{};
    case 1:
      return tensor::Shape{dims[0]};
    case 2:
      return tensor::Shape{dims[0], dims[1]};
    case 3:
      return tensor::Shape{dims[0], dims[1], dims[2]};
    case 4:
      return tensor::Shape{dims[0], dims[1], dims[2], dims[3]};
    case 5:
      return tensor::Shape{dims[0], dims[1], dims[2], dims[3], dims[4]};
    default:
      return tensor::Shape{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]};
  }
}

Value empty_set() {
  return Value::object("__builtin__", "set", {Value::list()}, false);
}

Value fragment_address(std::int64_t numel, std::int64_t start) {
  Value object = Value::object("deepspeed.utils.tensor_fragment", "fragment_address", {}, true);
  Value fields = Value::dict();
  fields.set("numel", Value::integer(numel));
  fields.set("start", Value::integer(start));
  object.set_state(std::move(fields));
  return object;
}

void read_fragment_address(const ValueRef& ref, std::int64_t& numel, std::int64_t& start) {
  const Value& v = object_of(ref, "a fragment_address");
  if (v.name() != "fragment_address" || (v.module() != "deepspeed.utils.tensor_fragment" &&
                                         v.module() != "deepspeed.runtime.bf16_optimizer")) {
    ref.fail_expected("a fragment_address");
  }
  const ValueRef fields = ref.object_state();
  numel = fields["numel"].as_int();
  start = fields["start"].as_int();
}

Value zero_stage_enum(std::int64_t stage) {
  return Value::object("deepspeed.runtime.zero.config", "ZeroStageEnum", {Value::integer(stage)},
                       false);
}

Value loss_scaler_object(const train::LossScalerState& s) {
  Value fields = Value::dict();
  fields.set("cur_scale", Value::real(s.cur_scale));
  fields.set("dynamic", Value::boolean(s.dynamic));
  if (!s.dynamic) {
    Value object = Value::object(kLossScalerModule, "LossScaler", {}, true);
    object.set_state(std::move(fields));
    return object;
  }
  fields.set("cur_iter", Value::integer(s.cur_iter));
  fields.set("last_overflow_iter", Value::integer(s.last_overflow_iter));
  fields.set("scale_factor", Value::real(s.scale_factor));
  fields.set("scale_window", Value::integer(s.scale_window));
  fields.set("min_scale", Value::real(s.min_scale));
  fields.set("delayed_shift", Value::integer(s.delayed_shift));
  fields.set("cur_hysteresis", Value::integer(s.cur_hysteresis));
  fields.set("consecutive_hysteresis", Value::boolean(s.consecutive_hysteresis));
  fields.set("raise_error_at_min_scale", Value::boolean(s.raise_error_at_min_scale));
  fields.set("dtype", Value::global("torch", "float16"));
  Value object = Value::object(kLossScalerModule, "DynamicLossScaler", {}, true);
  object.set_state(std::move(fields));
  return object;
}

void read_loss_scaler_object(const ValueRef& ref, train::LossScalerState& s) {
  const Value& v = object_of(ref, "a DeepSpeed loss scaler");
  if (v.module() != kLossScalerModule ||
      (v.name() != "DynamicLossScaler" && v.name() != "LossScaler")) {
    ref.fail_expected("a DynamicLossScaler or LossScaler");
  }
  const ValueRef fields = ref.object_state();
  s.cur_scale = fields["cur_scale"].as_float();
  s.dynamic = fields["dynamic"].as_bool();
  if (v.name() == "LossScaler") return;
  s.cur_iter = read_integer(fields["cur_iter"]);
  s.last_overflow_iter = read_integer(fields["last_overflow_iter"]);
  s.scale_factor = fields["scale_factor"].as_float();
  s.scale_window = read_integer(fields["scale_window"]);
  s.min_scale = fields["min_scale"].as_float();
  s.delayed_shift = read_integer(fields["delayed_shift"]);
  s.cur_hysteresis = read_integer(fields["cur_hysteresis"]);
  // Attributes added in later DeepSpeed releases keep the caller's values when absent.
  if (const auto f = fields.get("consecutive_hysteresis")) s.consecutive_hysteresis = f->as_bool();
  if (const auto f = fields.get("raise_error_at_min_scale")) {
    s.raise_error_at_min_scale = f->as_bool();
  }
}

Value adam_param_group(const AdamHyper& adam, bool decay, std::int64_t step,
                       const std::vector<std::int64_t>& params) {
  Value group = Value::dict();
  // Megatron builds the no-decay group as {'params': [...], 'weight_decay': 0.0}; the optimizer
  // then adds its defaults after the keys already there, and step comes with the first step.
  if (!decay) group.set("weight_decay", Value::real(0.0));
  group.set("lr", Value::real(adam.lr));
  group.set("bias_correction", Value::boolean(true));
  group.set("betas", float_tuple(adam.beta1, adam.beta2));
  group.set("eps", Value::real(adam.eps));
  if (decay) group.set("weight_decay", Value::real(adam.weight_decay));
  group.set("step", Value::integer(step));
  group.set("params", int_list(params));
  return group;
}

void read_adam_param_group(const ValueRef& ref, bool decay, const std::vector<std::int64_t>& params,
                           AdamHyper& adam, std::int64_t& step) {
  const ValueRef list = ref["params"];
  bool same = list.list_size() == params.size();
  for (std::size_t i = 0; same && i < params.size(); ++i) {
    same = list[i].value().is(Value::Kind::kInt) && list[i].value().as_int() == params[i];
  }
  if (!same) {
    std::string want;
    for (const std::int64_t p : params) want += (want.empty() ? "" : ", ") + std::to_string(p);
    base::fail(list.path(), ": expected parameter ids [", want, "]");
  }
  adam.lr = ref["lr"].as_float();
  const ValueRef betas = ref["betas"];
  if (betas.sequence_size() != 2) betas.fail_expected("a pair of betas");
  adam.beta1 = betas[0].as_float();
  adam.beta2 = betas[1].as_float();
  adam.eps = ref["eps"].as_float();
  const double weight_decay = ref["weight_decay"].as_float();
  if (decay) adam.weight_decay = weight_decay;
  if (!ref["bias_correction"].as_bool()) {
    base::fail(ref.path(), ": bias_correction is off, which the Adam step does not implement");
  }
  step = read_integer(ref["step"]);
}

Value lr_scheduler_dict(const train::LrSchedulerState& s) {
  Value dict = Value::dict();
  dict.set("max_lr", Value::real(s.max_lr));
  dict.set("warmup_steps", Value::real(s.warmup_steps));
  dict.set("num_steps", Value::integer(s.num_steps));
  dict.set("warmup_tokens", Value::integer(s.warmup_tokens));
  dict.set("num_tokens", Value::integer(s.num_tokens));
  dict.set("decay_style", Value::string(s.decay_style));
  dict.set("decay_steps", Value::integer(s.decay_steps));
  dict.set("min_lr", Value::real(s.min_lr));
  return dict;
}

train::LrSchedulerState read_lr_scheduler_dict(const ValueRef& ref) {
  // The first of each pair is the name older Megatron versions used.
  const auto either = [&](std::string_view old_key, std::string_view key) {
    if (const auto found = ref.get(old_key)) return *found;
    return ref[key];
  };
  train::LrSchedulerState s;
  s.max_lr = either("start_lr", "max_lr").as_float();
  s.min_lr = ref["min_lr"].as_float();
  s.warmup_steps = either("warmup_iter", "warmup_steps").as_float();
  s.decay_steps = read_integer(either("end_iter", "decay_steps"));
  s.decay_style = ref["decay_style"].as_string();
  s.num_steps = read_integer(either("num_iters", "num_steps"));
  if (const auto f = ref.get("warmup_tokens")) s.warmup_tokens = read_integer(*f);
  if (const auto f = ref.get("num_tokens")) s.num_tokens = read_integer(*f);
  return s;
}

}  // namespace mds::ckpt
