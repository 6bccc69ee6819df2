#include "config/pretrain_flags.h"

#include <cctype>
#include <cstdlib>

namespace mds::config::pretrain_flags {
namespace {

std::string strip_spaces(const std::string& text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Removes the underscores Python allows between two digits; false if one stands elsewhere.
bool remove_digit_underscores(const std::string& text, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '_') {
      out += text[i];
      continue;
    }
    if (i == 0 || i + 1 == text.size() || !is_digit(text[i - 1]) || !is_digit(text[i + 1])) {
      return false;
    }
  }
  return true;
}

// What Python's int() accepts (ASCII digits), rewritten as plain decimal digits: CLI11 alone
// would read "010" as octal and accept "0x10".
CLI::Validator python_int() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::string invalid = "invalid int value: '" + value + "'";
        std::string digits;
        if (!remove_digit_underscores(strip_spaces(value), digits)) return invalid;
        std::string sign;
        if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
          if (digits[0] == '-') sign = "-";
          digits.erase(0, 1);
        }
        if (digits.empty()) return invalid;
        for (char c : digits) {
          if (!is_digit(c)) return invalid;
        }
        const std::size_t first = digits.find_first_not_of('0');
        value = sign + (first == std::string::npos ? "0" : digits.substr(first));
        return {};
      },
      "INT", "python int");
}

// What Python's float() accepts: decimal literals with digit underscores, inf, infinity, nan.
CLI::Validator python_float() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::string invalid = "invalid float value: '" + value + "'";
        std::string text;
        if (!remove_digit_underscores(strip_spaces(value), text)) return invalid;
        std::string lower;
        for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const std::size_t unsigned_at = !lower.empty() && (lower[0] == '+' || lower[0] == '-');
        const std::string word = lower.substr(unsigned_at);
        if (word == "inf" || word == "infinity" || word == "nan") {
          value = (lower[0] == '-' ? "-" : "") + word.substr(0, 3);
          return {};
        }
        if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return invalid;
        char* end = nullptr;
        std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size()) return invalid;
        value = text;
        return {};
      },
      "FLOAT", "python float");
}

std::string joined(std::initializer_list<const char*> choices) {
  std::string out;
  for (const char* choice : choices) out += (out.empty() ? "" : ", ") + std::string(choice);
  return out;
}

CLI::Validator member_of(std::initializer_list<const char*> choices) {
  std::vector<std::string> allowed(choices.begin(), choices.end());
  const std::string list = joined(choices);
  return CLI::Validator(
      [allowed, list](std::string& value) -> std::string {
        for (const std::string& choice : allowed) {
          if (value == choice) return {};
        }
        return "invalid choice: '" + value + "' (choose from " + list + ")";
      },
      "{" + list + "}", "choice");
}

}  // namespace

CLI::Option* FlagGroup::finish(CLI::Option* option) {
  // argparse lets a repeated flag override the earlier value.
  return option->group(group_)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

CLI::Option* FlagGroup::integer(const std::string& name, int64_t& field, const std::string& help) {
  return finish(flags_.app().add_option(name, field, help)->transform(python_int()))
      ->capture_default_str();
}

CLI::Option* FlagGroup::integer(const std::string& name, std::optional<int64_t>& field,
                                const std::string& help) {
  return finish(flags_.app().add_option(name, field, help)->transform(python_int()));
}

CLI::Option* FlagGroup::real(const std::string& name, double& field, const std::string& help) {
  return finish(flags_.app().add_option(name, field, help)->transform(python_float()))
      ->capture_default_str();
}

CLI::Option* FlagGroup::real(const std::string& name, std::optional<double>& field,
                             const std::string& help) {
  return finish(flags_.app().add_option(name, field, help)->transform(python_float()));
}

CLI::Option* FlagGroup::text(const std::string& name, std::string& field, const std::string& help) {
  return finish(flags_.app().add_option(name, field, help))->capture_default_str();
}

CLI::Option* FlagGroup::text(const std::string& name, std::optional<std::string>& field,
                             const std::string& help) {
  return finish(flags_.app().add_option(name, field, help));
}

CLI::Option* FlagGroup::choice(const std::string& name, std::string& field,
                               std::initializer_list<const char*> choices,
                               const std::string& help) {
  return text(name, field, help)->check(member_of(choices));
}

CLI::Option* FlagGroup::choice(const std::string& name, std::optional<std::string>& field,
                               std::initializer_list<const char*> choices,
                               const std::string& help) {
  return text(name, field, help)->check(member_of(choices));
}

CLI::Option* FlagGroup::choice(const std::string& name, PositionEmbeddingType& field,
                               std::initializer_list<const char*> choices,
                               const std::string& help) {
  CLI::Option* option = flags_.app().add_option_function<std::string>(
      name,
      [&field](const std::string& value) {
        for (auto type : {PositionEmbeddingType::kRotary, PositionEmbeddingType::kAbsolute,
                          PositionEmbeddingType::kAlibi}) {
          if (to_string(type) == value) field = type;
        }
      },
      help);
  return finish(option->check(member_of(choices)))->default_str(std::string(to_string(field)));
}

CLI::Option* FlagGroup::words(const std::string& name,
                              std::optional<std::vector<std::string>>& field, int min_count,
                              const std::string& help) {
  CLI::Option* option = flags_.app().add_option_function<std::vector<std::string>>(
      name, [&field](const std::vector<std::string>& values) { field = values; }, help);
  option->expected(min_count, CLI::detail::expected_max_vector_size);
  // CLI11 hands the callback the values of every occurrence, so a repeated list flag
  // concatenates where argparse would keep the last occurrence.
  return option->group(group_)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* FlagGroup::store_true(const std::string& name, bool& field, const std::string& help) {
  return flags_.app().add_flag(name, field, help)->group(group_);
}

CLI::Option* FlagGroup::store_false(const std::string& name, bool& field, const std::string& help) {
  return flags_.app()
      .add_flag_callback(
          name, [&field] { field = false; }, help)
      ->group(group_);
}

void FlagGroup::refuse(const std::string& name, const std::string& reason, bool takes_value) {
  flags_.add_rejected(name, reason, takes_value);
}

}  // namespace mds::config::pretrain_flags
