// Internal to pretrain_args: the flag groups of `pretrain` and a small builder that registers
// upstream-style flags (Python int/float literals, store_true/store_false, choices) on a FlagSet.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "config/flags.h"
#include "config/pretrain_args.h"

namespace mds::config::pretrain_flags {

// Registers options in one help group, converting values as argparse's type=int / type=float do
// (Python literals: "5_000_000", "007", " 3 ", "1e-4"; no "0x10").
class FlagGroup {
 public:
  FlagGroup(FlagSet& flags, std::string group) : flags_(flags), group_(std::move(group)) {}

  CLI::Option* integer(const std::string& name, int64_t& field, const std::string& help);
  CLI::Option* integer(const std::string& name, std::optional<int64_t>& field,
                       const std::string& help);
  CLI::Option* real(const std::string& name, double& field, const std::string& help);
  CLI::Option* real(const std::string& name, std::optional<double>& field, const std::string& help);
  CLI::Option* text(const std::string& name, std::string& field, const std::string& help);
  CLI::Option* text(const std::string& name, std::optional<std::string>& field,
                    const std::string& help);
  CLI::Option* choice(const std::string& name, std::string& field,
                      std::initializer_list<const char*> choices, const std::string& help);
  CLI::Option* choice(const std::string& name, std::optional<std::string>& field,
                      std::initializer_list<const char*> choices, const std::string& help);
  // megatron.enums.PositionEmbeddingType by member name.
  CLI::Option* choice(const std::string& name, PositionEmbeddingType& field,
                      std::initializer_list<const char*> choices, const std::string& help);
  // nargs='*' (min_count 0) or nargs='+' (min_count 1); a repeated flag replaces the list.
  CLI::Option* words(const std::string& name, std::optional<std::vector<std::string>>& field,
                     int min_count, const std::string& help);
  // action='store_true' / action='store_false'.
  CLI::Option* store_true(const std::string& name, bool& field, const std::string& help);
  CLI::Option* store_false(const std::string& name, bool& field, const std::string& help);
  // An upstream flag mds refuses (FlagSet::add_rejected).
  void refuse(const std::string& name, const std::string& reason, bool takes_value);

 private:
  CLI::Option* finish(CLI::Option* option);
  FlagSet& flags_;
  std::string group_;
};

// Network size, regularization, initialization, mixed precision.
void add_model_flags(FlagSet& flags, PretrainArgs& args);
// Training, learning rate, checkpointing, validation, data, logging.
void add_training_flags(FlagSet& flags, PretrainArgs& args);
// Distributed, ZeRO, memory optimizations, activation checkpointing, DeepSpeed, mds additions,
// and the upstream groups GPT pretraining does not use (BERT/T5/ViT/biencoder/autoresume).
void add_system_flags(FlagSet& flags, PretrainArgs& args);

}  // namespace mds::config::pretrain_flags
