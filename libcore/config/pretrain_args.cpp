#include "config/pretrain_args.h"

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "config/flags.h"
#include "config/pretrain_flags.h"

namespace mds::config {

std::string_view to_string(PositionEmbeddingType type) {
  switch (type) {
    case PositionEmbeddingType::kRotary:
      return "rotary";
    case PositionEmbeddingType::kAbsolute:
      return "absolute";
    case PositionEmbeddingType::kAlibi:
      return "alibi";
  }
  return "?";
}

bool PretrainArgs::was_given(std::string_view flag) const {
  return std::find(given_flags.begin(), given_flags.end(), flag) != given_flags.end();
}

void add_pretrain_flags(FlagSet& flags, PretrainArgs& args) {
  // argparse lets a repeated flag override the earlier value; this also covers the shared
  // tokenizer flags.
  flags.app().option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  pretrain_flags::add_model_flags(flags, args);
  pretrain_flags::add_training_flags(flags, args);
  pretrain_flags::add_system_flags(flags, args);
}

PretrainArgs parse_pretrain_args(int argc, char** argv) {
  PretrainArgs args;
  FlagSet flags("pretrain",
                "Pretrain a GPT model with upstream Megatron-DeepSpeed's flags "
                "(pretrain_gpt.py). Flags under \"mds additions\" are not upstream's.");
  add_pretrain_flags(flags, args);
  flags.parse(argc, argv);  // upstream's training parser has allow_abbrev=False
  for (const CLI::Option* option : flags.app().get_options()) {
    if (option->count() == 0 || option->get_lnames().empty()) continue;
    args.given_flags.push_back("--" + option->get_lnames().front());
  }
  args.resolved_arguments = flags.resolved_arguments();
  return args;
}

ProcessEnv process_env_from_environment() {
  ProcessEnv env;
  const auto read = [](const char* name, int64_t fallback) -> int64_t {
    const char* text = std::getenv(name);
    if (text == nullptr) return fallback;
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0') base::fail("$", name, " is not an integer: '", text, "'");
    return value;
  };
  env.rank = read("RANK", 0);
  env.world_size = read("WORLD_SIZE", 1);
  return env;
}

}  // namespace mds::config
