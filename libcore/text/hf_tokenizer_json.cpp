#include "text/hf_tokenizer_json.h"

#include <string>

#include "base/error.h"
#include "config/json_document.h"

namespace mds::text {
namespace {

using config::JsonValue;

constexpr std::string_view kBloomPattern = " ?[^(\\s|[.,!?…。，、।۔،])]+";
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Reads one tokenizer.json, naming fields by their dotted path in errors.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    base::fail(path_, ": ", field, ": ", reason);
  }

  const JsonValue& member(const JsonValue& object, const std::string& field,
                          std::string_view key) const {
    const JsonValue* value = object.find(key);
    if (value == nullptr)
      fail(field.empty() ? std::string(key) : field + "." + std::string(key), "missing");
    return *value;
  }

  bool flag(const JsonValue& object, const std::string& field, std::string_view key,
            bool fallback) const {
    const JsonValue* value = object.find(key);
    if (value == nullptr || value->is_null()) return fallback;
    if (!value->is_bool()) {
      fail(field + "." + std::string(key),
           "must be true or false, got " + std::string(config::json_kind_name(*value)));
    }
    return value->as_bool();
  }

  std::string text(const JsonValue& value, const std::string& field) const {
    if (!value.is_string()) {
      fail(field, "must be a string, got " + std::string(config::json_kind_name(value)));
    }
    return value.as_string();
  }

  std::int32_t id(const JsonValue& value, const std::string& field) const {
    if (!value.is_int64() || value.as_int64() < 0 || value.as_int64() > 0x7FFFFFFF) {
      fail(field, "must be a token id (an integer in [0, 2^31))");
    }
    return static_cast<std::int32_t>(value.as_int64());
  }

  std::string type_of(const JsonValue& component, const std::string& field) const {
    if (!component.is_object()) fail(field, "must be an object or null");
    return text(member(component, field, "type"), field + ".type");
  }

  std::vector<HfAddedToken> added_tokens(const JsonValue& root) const {
    std::vector<HfAddedToken> tokens;
    const JsonValue* list = root.find("added_tokens");
    if (list == nullptr || list->is_null()) return tokens;
    if (!list->is_array()) fail("added_tokens", "must be an array");
    for (std::size_t i = 0; i < list->items().size(); ++i) {
      const JsonValue& item = list->items()[i];
      const std::string field = "added_tokens[" + std::to_string(i) + "]";
      if (!item.is_object()) fail(field, "must be an object");
      HfAddedToken token;
      token.id = id(member(item, field, "id"), field + ".id");
      token.content = text(member(item, field, "content"), field + ".content");
      if (token.content.empty()) fail(field + ".content", "must not be empty");
      token.special = flag(item, field, "special", false);
      token.single_word = flag(item, field, "single_word", false);
      token.lstrip = flag(item, field, "lstrip", false);
      token.rstrip = flag(item, field, "rstrip", false);
      token.normalized = flag(item, field, "normalized", !token.special);
      tokens.push_back(std::move(token));
    }
    return tokens;
  }

  std::string padding_pad_token(const JsonValue& root) const {
    const JsonValue* padding = root.find("padding");
    if (padding == nullptr || padding->is_null()) return {};
    if (!padding->is_object()) fail("padding", "must be an object or null");
    return text(member(*padding, "padding", "pad_token"), "padding.pad_token");
  }

  // NFC, alone or as every step of a Sequence; other normalizers are refused.
  bool nfc_normalizer(const JsonValue& root) const {
    const JsonValue* normalizer = root.find("normalizer");
    if (normalizer == nullptr || normalizer->is_null()) return false;
    const std::string type = type_of(*normalizer, "normalizer");
    if (type == "NFC") return true;
    if (type == "Sequence") {
      const JsonValue& steps = member(*normalizer, "normalizer", "normalizers");
      if (!steps.is_array()) fail("normalizer.normalizers", "must be an array");
      for (std::size_t i = 0; i < steps.items().size(); ++i) {
        const std::string field = "normalizer.normalizers[" + std::to_string(i) + "]";
        const std::string step_type = type_of(steps.items()[i], field);
        if (step_type != "NFC") refuse_normalizer(field, step_type);
      }
      return !steps.items().empty();
    }
    refuse_normalizer("normalizer", type);
  }

  [[noreturn]] void refuse_normalizer(const std::string& field, const std::string& type) const {
    fail(field, "type " + type +
                    " is not supported (mds reads byte-level BPE tokenizers with no normalizer "
                    "or NFC, such as GPT-2's, BLOOM's and GPT-NeoX's)");
  }

  void pre_tokenizer_step(const JsonValue& step, const std::string& field,
                          std::vector<HfPreTokenizerStep>& steps) const {
    const std::string type = type_of(step, field);
    if (type == "Sequence") {
      const JsonValue& list = member(step, field, "pretokenizers");
      if (!list.is_array()) fail(field + ".pretokenizers", "must be an array");
      for (std::size_t i = 0; i < list.items().size(); ++i) {
        pre_tokenizer_step(list.items()[i], field + ".pretokenizers[" + std::to_string(i) + "]",
                           steps);
      }
      return;
    }
    HfPreTokenizerStep out;
    if (type == "ByteLevel") {
      out.kind = HfPreTokenizerStep::Kind::kByteLevel;
      out.add_prefix_space = flag(step, field, "add_prefix_space", true);
      out.use_regex = flag(step, field, "use_regex", true);
    } else if (type == "Split") {
      out.kind = HfPreTokenizerStep::Kind::kSplitIsolated;
      out.pattern = split_pattern(member(step, field, "pattern"), field + ".pattern");
      const std::string behavior = text(member(step, field, "behavior"), field + ".behavior");
      if (behavior != "Isolated") {
        fail(field + ".behavior", "\"" + behavior + "\" is not supported (only Isolated)");
      }
      if (flag(step, field, "invert", false)) fail(field + ".invert", "true is not supported");
    } else {
      fail(field + ".type", "\"" + type +
                                "\" is not supported (mds implements ByteLevel, Split with "
                                "BLOOM's or GPT-2's regex, and Sequence of them)");
    }
    steps.push_back(out);
  }

  HfSplitPattern split_pattern(const JsonValue& pattern, const std::string& field) const {
    if (!pattern.is_object()) fail(field, "must be {\"Regex\": ...} or {\"String\": ...}");
    const JsonValue* regex = pattern.find("Regex");
    if (regex == nullptr) {
      fail(field, "only Regex patterns are supported (BLOOM's or GPT-2's)");
    }
    const std::string source = text(*regex, field + ".Regex");
    if (source == kBloomPattern) return HfSplitPattern::kBloom;
    if (source == kGpt2Pattern) return HfSplitPattern::kGpt2;
    fail(field + ".Regex", "the regex " + config::json_quote(source) +
                               " is not one mds implements (BLOOM's " +
                               config::json_quote(kBloomPattern) + " or GPT-2's)");
  }

  std::vector<HfPreTokenizerStep> pre_tokenizer(const JsonValue& root) const {
    std::vector<HfPreTokenizerStep> steps;
    const JsonValue* pre = root.find("pre_tokenizer");
    if (pre != nullptr && !pre->is_null()) pre_tokenizer_step(*pre, "pre_tokenizer", steps);
    return steps;
  }

  void check_byte_level_decoder(const JsonValue& root) const {
    const JsonValue& decoder = member(root, "", "decoder");
    if (decoder.is_null()) fail("decoder", "null is not supported (mds needs ByteLevel)");
    const std::string type = type_of(decoder, "decoder");
    if (type != "ByteLevel") {
      fail("decoder.type", "\"" + type + "\" is not supported (mds decodes ByteLevel only)");
    }
  }

  std::vector<HfTemplatePiece> single_template(const JsonValue& root) const {
    const JsonValue* post = root.find("post_processor");
    if (post == nullptr || post->is_null()) return {};
    const std::string type = type_of(*post, "post_processor");
    if (type == "ByteLevel") return {};
    if (type != "TemplateProcessing") {
      fail("post_processor.type", "\"" + type +
                                      "\" is not supported (mds implements ByteLevel and "
                                      "TemplateProcessing)");
    }
    const JsonValue& single = member(*post, "post_processor", "single");
    const JsonValue& specials = member(*post, "post_processor", "special_tokens");
    if (!single.is_array()) fail("post_processor.single", "must be an array");
    std::vector<HfTemplatePiece> pieces;
    for (std::size_t i = 0; i < single.items().size(); ++i) {
      const JsonValue& item = single.items()[i];
      const std::string field = "post_processor.single[" + std::to_string(i) + "]";
      if (item.find("Sequence") != nullptr) {
        pieces.push_back({true, {}});
        continue;
      }
      const JsonValue* special = item.find("SpecialToken");
      if (special == nullptr) fail(field, "must be a Sequence or a SpecialToken");
      const std::string name =
          text(member(*special, field + ".SpecialToken", "id"), field + ".SpecialToken.id");
      const JsonValue* entry = specials.find(name);
      if (entry == nullptr) {
        fail("post_processor.special_tokens", "has no entry \"" + name + "\"");
      }
      const std::string entry_field = "post_processor.special_tokens." + name;
      const JsonValue& ids = member(*entry, entry_field, "ids");
      if (!ids.is_array()) fail(entry_field + ".ids", "must be an array");
      HfTemplatePiece piece;
      for (const JsonValue& value : ids.items())
        piece.ids.push_back(id(value, entry_field + ".ids"));
      pieces.push_back(std::move(piece));
    }
    return pieces;
  }

  void bpe_model(const JsonValue& root, HfTokenizerJson& out) const {
    const JsonValue& model = member(root, "", "model");
    const std::string type = type_of(model, "model");
    if (type != "BPE") {
      fail("model.type", "\"" + type + "\" is not supported (mds implements byte-level BPE)");
    }
    const auto absent_or_empty = [&](std::string_view key) {
      const JsonValue* value = model.find(key);
      if (value == nullptr || value->is_null()) return;
      if (!value->is_string() || !value->as_string().empty()) {
        fail("model." + std::string(key), "is not supported (must be null or empty)");
      }
    };
    absent_or_empty("continuing_subword_prefix");
    absent_or_empty("end_of_word_suffix");
    const JsonValue* dropout = model.find("dropout");
    if (dropout != nullptr && !dropout->is_null()) {
      fail("model.dropout", "BPE dropout is not supported (must be null)");
    }
    const JsonValue* unk = model.find("unk_token");
    if (unk != nullptr && !unk->is_null()) {
      fail("model.unk_token", "is not supported (byte-level BPE needs none; must be null)");
    }
    if (flag(model, "model", "byte_fallback", false)) {
      fail("model.byte_fallback", "true is not supported");
    }
    if (flag(model, "model", "ignore_merges", false)) {
      fail("model.ignore_merges", "true is not supported");
    }
    const JsonValue& vocab = member(model, "model", "vocab");
    if (!vocab.is_object()) fail("model.vocab", "must be an object");
    out.vocab.reserve(vocab.members().size());
    for (const config::JsonMember& entry : vocab.members()) {
      out.vocab.emplace_back(entry.key, id(entry.value, "model.vocab." + entry.key));
    }
    const JsonValue& merges = member(model, "model", "merges");
    if (!merges.is_array()) fail("model.merges", "must be an array");
    out.merges.reserve(merges.items().size());
    for (std::size_t i = 0; i < merges.items().size(); ++i) {
      out.merges.push_back(
          merge_pair(merges.items()[i], "model.merges[" + std::to_string(i) + "]"));
    }
  }

  // "left right" (tokenizers < 0.20) or ["left", "right"].
  std::pair<std::string, std::string> merge_pair(const JsonValue& value,
                                                 const std::string& field) const {
    if (value.is_array()) {
      if (value.items().size() != 2) fail(field, "must hold two tokens");
      return {text(value.items()[0], field + "[0]"), text(value.items()[1], field + "[1]")};
    }
    const std::string line = text(value, field);
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      fail(field, "must be two tokens separated by one space, got " + config::json_quote(line));
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }

 private:
  const std::string& path_;
};

}  // namespace

HfTokenizerJson parse_hf_tokenizer_json(std::string_view text, const std::string& path) {
  const JsonValue root = config::parse_json(text, path);
  const Reader reader(path);
  if (!root.is_object()) reader.fail("(top level)", "must be an object");
  const JsonValue* version = root.find("version");
  if (version == nullptr || !version->is_string() || version->as_string() != "1.0") {
    reader.fail("version", "must be \"1.0\" (the only version the tokenizers library reads)");
  }
  HfTokenizerJson out;
  out.nfc_normalizer = reader.nfc_normalizer(root);
  reader.check_byte_level_decoder(root);
  out.added_tokens = reader.added_tokens(root);
  out.padding_pad_token = reader.padding_pad_token(root);
  out.pre_tokenizer = reader.pre_tokenizer(root);
  const JsonValue* pre = root.find("pre_tokenizer");
  out.pre_tokenizer_is_byte_level =
      pre != nullptr && pre->is_object() && pre->find("type") != nullptr &&
      pre->find("type")->is_string() && pre->find("type")->as_string() == "ByteLevel";
  out.single_template = reader.single_template(root);
  reader.bpe_model(root, out);
  return out;
}

}  // namespace mds::text
