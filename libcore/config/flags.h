#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mds::config {

// The flags of one program: upstream (Megatron / DeepSpeed) names, defaults and help text, parsed
// with CLI11. Shared groups of flags are registered by functions such as add_tokenizer_flags, so
// every program spells and documents a flag the same way.
class FlagSet {
 public:
  FlagSet(std::string program, std::string description);

  CLI::App& app() { return app_; }
  const std::string& program() const { return program_; }

  // A flag that upstream accepts but this program refuses: giving it fails with `reason`.
  void add_rejected(const std::string& name, const std::string& reason, bool takes_value);

  // Like argparse's default allow_abbrev=True: a unique prefix of a long flag is accepted (--vocab
  // for --vocab-file). Off by default, as in upstream's training parser; refused flags never
  // match by prefix.
  void allow_abbreviations(bool allow) { allow_abbreviations_ = allow; }

  // Parses the command line (--flag value and --flag=value). --help prints help and exits 0; a bad
  // command line prints one "<program>: error: ..." line and exits 2.
  void parse(int argc, char** argv);

  // "name = value" lines for every flag after parsing, for logs and reproducibility.
  std::string resolved_arguments() const;

  // Long names of all registered flags, with their leading dashes.
  std::vector<std::string> long_names() const;

 private:
  std::vector<std::string> expand_abbreviations(int argc, char** argv) const;
  std::string program_;
  CLI::App app_;
  std::vector<std::pair<std::string, std::string>> rejected_;  // (flag, reason)
  bool allow_abbreviations_ = false;
};

}  // namespace mds::config
