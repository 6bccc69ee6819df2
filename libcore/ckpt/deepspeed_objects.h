// The Python objects DeepSpeed and apex put in checkpoints (checkpoints.md §2.4, §5.4), as Value
// trees to write and as parsers that check what they read and name the path at fault.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/training_state.h"
#include "io/pickle_value.h"
#include "tensor/shape.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"

namespace mds::ckpt {

io::Value torch_size(const tensor::Shape& shape);
tensor::Shape read_torch_size(const io::ValueRef& ref);

io::Value empty_set();
// deepspeed.utils.tensor_fragment.fragment_address (a dataclass: NEWOBJ + BUILD {numel, start}).
io::Value fragment_address(std::int64_t numel, std::int64_t start);
// Also accepts the pre-0.7 home deepspeed.runtime.bf16_optimizer.
void read_fragment_address(const io::ValueRef& ref, std::int64_t& numel, std::int64_t& start);
// deepspeed.runtime.zero.config.ZeroStageEnum(stage), pickled by value as Python < 3.11 does.
io::Value zero_stage_enum(std::int64_t stage);

// DynamicLossScaler (dynamic) or LossScaler (static) instance with its attribute dict.
io::Value loss_scaler_object(const train::LossScalerState& state);
// Restores every attribute the object carries into `state`.
void read_loss_scaler_object(const io::ValueRef& ref, train::LossScalerState& state);

// An apex FusedAdam param group as Optimizer.state_dict() packs it: the keys in the order the
// group dict got them (Megatron's no-decay dict starts with weight_decay), `params` last.
io::Value adam_param_group(const AdamHyper& adam, bool decay, std::int64_t step,
                           const std::vector<std::int64_t>& params);
// Reads one group back; checks its params list equals `params`. Fills lr, betas, eps, and
// weight_decay (decay groups only) of `adam`, and `step`.
void read_adam_param_group(const io::ValueRef& ref, bool decay,
                           const std::vector<std::int64_t>& params, AdamHyper& adam,
                           std::int64_t& step);

// Megatron's AnnealingLR.state_dict() and load_state_dict's view of it (legacy key names too).
io::Value lr_scheduler_dict(const train::LrSchedulerState& state);
train::LrSchedulerState read_lr_scheduler_dict(const io::ValueRef& ref);

// An int, or a float with an integral value (Python code sometimes stores counters as floats).
std::int64_t read_integer(const io::ValueRef& ref);

}  // namespace mds::ckpt
