#include "config/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mds::config {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

[[noreturn]] void exit_with_usage_error(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s (see %s --help)\n", program.c_str(), message.c_str(),
               program.c_str());
  std::exit(2);
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string description)
    : program_(std::move(program)), app_(std::move(description), program_) {
  app_.get_formatter()->column_width(40);
}

void FlagSet::add_rejected(const std::string& name, const std::string& reason, bool takes_value) {
  CLI::Option* option = app_.add_option(name)->description("not supported: " + reason);
  option->expected(takes_value ? 1 : 0, takes_value ? CLI::detail::expected_max_vector_size : 0);
  option->allow_extra_args(takes_value);  // so that every value of an nargs flag is consumed
  option->group("Upstream flags this program refuses");
  rejected_.emplace_back(name, reason);
}

std::vector<std::string> FlagSet::long_names() const {
  std::vector<std::string> names;
  for (const CLI::Option* option : app_.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

std::vector<std::string> FlagSet::expand_abbreviations(int argc, char** argv) const {
  std::vector<std::string> args;
  if (!allow_abbreviations_) {
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    return args;
  }
  std::vector<std::string> names;
  for (const std::string& name : long_names()) {
    const bool refused = std::any_of(rejected_.begin(), rejected_.end(),
                                     [&](const auto& entry) { return entry.first == name; });
    if (!refused) names.push_back(name);
  }
  bool only_values = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_values || !starts_with(arg, "--") || arg == "--") {
      only_values = only_values || arg == "--";
      args.push_back(std::move(arg));
      continue;
    }
    const std::size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const std::string rest = equals == std::string::npos ? "" : arg.substr(equals);
    std::vector<std::string> matches;
    for (const std::string& candidate : names) {
      if (candidate == name) {
        matches = {candidate};
        break;
      }
      if (starts_with(candidate, name)) matches.push_back(candidate);
    }
    if (matches.size() > 1) {
      std::string list;
      for (const std::string& m : matches) list += (list.empty() ? "" : ", ") + m;
      exit_with_usage_error(program_, "ambiguous option: " + name + " could match " + list);
    }
    args.push_back(matches.size() == 1 ? matches.front() + rest : arg);
  }
  return args;
}

void FlagSet::parse(int argc, char** argv) {
  std::vector<std::string> args = expand_abbreviations(argc, argv);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app_.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app_.help().c_str());
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    exit_with_usage_error(program_, e.what());
  }
  for (const auto& [name, reason] : rejected_) {
    if (app_.get_option(name)->count() > 0) exit_with_usage_error(program_, name + ": " + reason);
  }
}

std::string FlagSet::resolved_arguments() const {
  return app_.config_to_str(true, false);
}

}  // namespace mds::config
