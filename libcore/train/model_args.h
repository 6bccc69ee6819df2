// The model as the Megatron flags describe it, shared by pretrain, evaluate and generate.
#pragma once
#include <cstdint>

#include "config/pretrain_args.h"
#include "model/model_options.h"

namespace mds::train {

// Shape, GeLU form, query-key scaling, dropout and activation checkpointing of --num-layers,
// --hidden-size, … (training.md §1); the DeepSpeed JSON's activation-checkpoint interval wins over
// --checkpoint-num-layers when a config was loaded and sets it.
model::ModelOptions model_options_from_args(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab);

}  // namespace mds::train
