#include "text/hf_transformers_setup.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/json_document.h"

namespace mds::text {
namespace {

namespace fs = std::filesystem;
using config::JsonValue;

constexpr std::array<const char*, 7> kAttributes = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

struct ClassInfo {
  HfTokenizerClass cls;
  std::map<std::string, std::string> default_tokens;
  bool clean_up = true;
};

// The classes AutoTokenizer picks (the fast ones) and their constructors' defaults.
std::optional<ClassInfo> class_named(const std::string& name) {
  std::string base = name;
  if (base.ends_with("Fast")) base.resize(base.size() - 4);
  const std::map<std::string, std::string> gpt2 = {{"unk_token", "<|endoftext|>"},
                                                   {"bos_token", "<|endoftext|>"},
                                                   {"eos_token", "<|endoftext|>"}};
  if (base == "PreTrainedTokenizer") return ClassInfo{HfTokenizerClass::kGeneric, {}, true};
  if (base == "GPT2Tokenizer") return ClassInfo{HfTokenizerClass::kGpt2, gpt2, true};
  if (base == "GPTNeoXTokenizer") return ClassInfo{HfTokenizerClass::kGptNeoX, gpt2, true};
  if (base == "BloomTokenizer") {
    return ClassInfo{HfTokenizerClass::kBloom,
                     {{"unk_token", "<unk>"},
                      {"bos_token", "<s>"},
                      {"eos_token", "</s>"},
                      {"pad_token", "<pad>"}},
                     false};
  }
  return std::nullopt;
}

std::optional<JsonValue> read_json_if_present(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return std::nullopt;
  return config::parse_json(base::read_file(path.string()), path.string());
}

bool flag_of(const JsonValue& object, std::string_view key, bool fallback) {
  const JsonValue* value = object.find(key);
  return value != nullptr && value->is_bool() ? value->as_bool() : fallback;
}

// Python's truthiness of a JSON value (transformers tests some settings with `if value:`).
bool truthy(const JsonValue& value) {
  switch (value.kind()) {
    case JsonValue::Kind::kNull:
      return false;
    case JsonValue::Kind::kBool:
      return value.as_bool();
    case JsonValue::Kind::kNumber:
      return value.as_double() != 0.0;
    case JsonValue::Kind::kString:
      return !value.as_string().empty();
    case JsonValue::Kind::kArray:
      return !value.items().empty();
    case JsonValue::Kind::kObject:
      return !value.members().empty();
  }
  return false;
}

// An AddedToken written as an object: its fields, `special` as given or `special_default`, and
// `normalized` defaulting to !special as the tokenizers library's AddedToken does.
HfAddedToken added_token_of(const JsonValue& object, const std::string& where,
                            bool special_default) {
  const JsonValue* content = object.find("content");
  if (content == nullptr || !content->is_string()) {
    base::fail(where, ": an AddedToken needs a string \"content\"");
  }
  HfAddedToken token;
  token.content = content->as_string();
  token.special = flag_of(object, "special", special_default);
  token.single_word = flag_of(object, "single_word", false);
  token.lstrip = flag_of(object, "lstrip", false);
  token.rstrip = flag_of(object, "rstrip", false);
  token.normalized = flag_of(object, "normalized", !token.special);
  return token;
}

HfSpecialToken plain(const std::string& content) {
  HfSpecialToken special;
  special.token.content = content;
  special.token.special = true;
  special.token.normalized = false;
  return special;
}

std::vector<HfSpecialToken> plain_tokens(const std::vector<std::string>& contents) {
  std::vector<HfSpecialToken> tokens;
  for (const std::string& content : contents) tokens.push_back(plain(content));
  return tokens;
}

// A special-token value of tokenizer_config.json (strings, AddedTokens marked "__type") or of
// special_tokens_map.json (objects are AddedTokens made special); nullopt for null.
std::optional<HfSpecialToken> special_value(const JsonValue& value, const std::string& where,
                                            bool from_map) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return plain(value.as_string());
  if (value.is_object() && (from_map || value.find("__type") != nullptr)) {
    return HfSpecialToken{added_token_of(value, where, from_map), false};
  }
  base::fail(where, ": a special token must be a string or an AddedToken");
}

bool same_added_token(const HfAddedToken& a, const HfAddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
}

// Python's == between two special-token values: a str never equals an AddedToken, and
// AddedTokens are equal when every field is.
bool python_equal(const HfSpecialToken& a, const HfSpecialToken& b) {
  if (a.plain_string != b.plain_string) return false;
  return a.plain_string ? a.token.content == b.token.content : same_added_token(a.token, b.token);
}

// Special-token attributes by name; a null value is an attribute explicitly set to None.
using SpecialValues = std::map<std::string, std::optional<HfSpecialToken>>;

// all_special_tokens_extended: the attributes' values in kAttributes' order, then the additional
// ones; a value whose text an earlier attribute has is left out, and so is an empty string
// (Python's `if attr_value:`). The additional list is checked against the attributes only.
std::vector<HfSpecialToken> all_special_tokens_extended(
    const SpecialValues& values, const std::vector<HfSpecialToken>& additional) {
  std::vector<HfSpecialToken> tokens;
  std::set<std::string> seen;
  for (const char* key : kAttributes) {
    const auto it = values.find(key);
    if (it == values.end() || !it->second) continue;
    const HfSpecialToken& value = *it->second;
    if (value.plain_string && value.token.content.empty()) continue;
    if (seen.insert(value.token.content).second) tokens.push_back(value);
  }
  for (const HfSpecialToken& value : additional) {
    if (!seen.contains(value.token.content)) tokens.push_back(value);
  }
  return tokens;
}

class SetupReader {
 public:
  SetupReader(const std::string& folder, const HfTokenizerJson& json,
              const std::vector<std::string>& kwargs_additional)
      : folder_(folder), json_(json), kwargs_additional_(kwargs_additional) {}

  HfTransformersSetup read() {
    const fs::path config_path = folder_ / "tokenizer_config.json";
    const std::optional<JsonValue> config = read_json_if_present(config_path);
    const ClassInfo info = resolve_class(config);
    HfTransformersSetup setup;
    setup.tokenizer_class = info.cls;
    setup.clean_up_tokenization_spaces = info.clean_up;
    // What from_pretrained passes to the class: the files' special tokens.
    SpecialValues given;
    std::vector<HfSpecialToken> additional;
    bool has_decoder = false;
    if (config) {
      read_attributes(*config, config_path.string(), false, given);
      read_additional(*config, config_path.string(), false, additional);
    }
    if (!kwargs_additional_.empty()) additional = plain_tokens(kwargs_additional_);
    if (config) {
      if (const JsonValue* clean = config->find("clean_up_tokenization_spaces")) {
        setup.clean_up_tokenization_spaces = truthy(*clean);
      }
      setup.add_prefix_space = flag_of(*config, "add_prefix_space", false);
      setup.add_bos_token = flag_of(*config, "add_bos_token", false);
      setup.add_eos_token = flag_of(*config, "add_eos_token", false);
      if (const JsonValue* decoder = config->find("added_tokens_decoder")) {
        has_decoder = true;
        setup.added_tokens_decoder = decoder_tokens(*decoder, config_path.string());
      }
    }
    if (!has_decoder) {
      // The legacy path: special_tokens_map.json overrides, tokenizer.json's added tokens serve
      // as the decoder.
      const fs::path map_path = folder_ / "special_tokens_map.json";
      if (const std::optional<JsonValue> map = read_json_if_present(map_path)) {
        read_attributes(*map, map_path.string(), true, given);
        // A keyword argument wins over the map.
        if (kwargs_additional_.empty()) read_additional(*map, map_path.string(), true, additional);
      }
      setup.added_tokens_decoder = json_.added_tokens;
      std::stable_sort(setup.added_tokens_decoder.begin(), setup.added_tokens_decoder.end(),
                       [](const auto& a, const auto& b) { return a.id < b.id; });
    }
    replace_by_added_tokens(setup.added_tokens_decoder, given);
    // The class's constructor defaults fill the attributes the files leave out; then
    // PreTrainedTokenizerFast takes tokenizer.json's padding token for a pad_token the class
    // does not pass (GPT-2's and the generic class; BLOOM's and GPT-NeoX's pass theirs).
    SpecialValues values = given;
    for (const auto& [key, content] : info.default_tokens) values.try_emplace(key, plain(content));
    const bool passes_pad_token =
        info.cls == HfTokenizerClass::kBloom || info.cls == HfTokenizerClass::kGptNeoX;
    if (!passes_pad_token && !json_.padding_pad_token.empty()) {
      values.try_emplace("pad_token", plain(json_.padding_pad_token));
    }
    setup.special_tokens = all_special_tokens_extended(values, additional);
    setup.bos = values["bos_token"];
    setup.eos = values["eos_token"];
    return setup;
  }

 private:
  ClassInfo resolve_class(const std::optional<JsonValue>& config) const {
    const JsonValue* named = config ? config->find("tokenizer_class") : nullptr;
    if (named != nullptr && named->is_string()) {
      if (std::optional<ClassInfo> info = class_named(named->as_string())) return *info;
      base::fail((folder_ / "tokenizer_config.json").string(), ": tokenizer_class ",
                 named->as_string(),
                 " is not one mds reproduces (GPT2TokenizerFast, BloomTokenizerFast, "
                 "GPTNeoXTokenizerFast, PreTrainedTokenizerFast)");
    }
    const fs::path model_config = folder_ / "config.json";
    if (const std::optional<JsonValue> model = read_json_if_present(model_config)) {
      const JsonValue* type = model->find("model_type");
      const std::string name = type != nullptr && type->is_string() ? type->as_string() : "";
      if (name == "gpt2") return *class_named("GPT2TokenizerFast");
      if (name == "bloom") return *class_named("BloomTokenizerFast");
      if (name == "gpt_neox") return *class_named("GPTNeoXTokenizerFast");
      base::fail(model_config.string(), ": model_type \"", name,
                 "\" does not name a tokenizer class mds reproduces (gpt2, bloom, gpt_neox)");
    }
    base::fail(folder_.string(),
               ": neither tokenizer_config.json's tokenizer_class nor config.json's model_type "
               "names the tokenizer class (transformers' AutoTokenizer could not load it either)");
  }

  static void read_attributes(const JsonValue& object, const std::string& where, bool from_map,
                              SpecialValues& given) {
    for (const char* key : kAttributes) {
      if (const JsonValue* value = object.find(key)) {
        given[key] = special_value(*value, where + ": " + key, from_map);
      }
    }
  }

  // tokenizer_config.json's list is taken as it is; special_tokens_map.json's items join it
  // unless an equal one (Python's ==) is already there. null empties the list.
  static void read_additional(const JsonValue& object, const std::string& where, bool from_map,
                              std::vector<HfSpecialToken>& additional) {
    const JsonValue* list = object.find("additional_special_tokens");
    if (list == nullptr) return;
    if (!from_map || list->is_null()) additional.clear();
    if (list->is_null()) return;
    if (!list->is_array()) base::fail(where, ": additional_special_tokens must be a list");
    const std::string field = where + ": additional_special_tokens";
    for (const JsonValue& item : list->items()) {
      if (item.is_null()) base::fail(field, ": an item must be a string or an AddedToken");
      const HfSpecialToken token = *special_value(item, field, from_map);
      const bool known = std::any_of(additional.begin(), additional.end(),
                                     [&](const auto& t) { return python_equal(t, token); });
      if (!from_map || !known) additional.push_back(token);
    }
  }

  // from_pretrained swaps each given attribute (not additional_special_tokens) for the decoder's
  // added token with the same text, the last one listed.
  static void replace_by_added_tokens(const std::vector<HfAddedToken>& decoder,
                                      SpecialValues& given) {
    for (auto& [key, value] : given) {
      if (!value) continue;
      for (const HfAddedToken& entry : decoder) {
        if (entry.content == value->token.content) *value = HfSpecialToken{entry, false};
      }
    }
  }

  std::vector<HfAddedToken> decoder_tokens(const JsonValue& decoder,
                                           const std::string& where) const {
    if (!decoder.is_object()) base::fail(where, ": added_tokens_decoder must be an object");
    std::vector<HfAddedToken> tokens;
    for (const config::JsonMember& member : decoder.members()) {
      if (!member.value.is_object()) {
        base::fail(where, ": added_tokens_decoder.", member.key, " must be an AddedToken");
      }
      HfAddedToken token =
          added_token_of(member.value, where + ": added_tokens_decoder." + member.key, false);
      try {
        token.id = static_cast<std::int32_t>(std::stol(member.key));
      } catch (const std::exception&) {
        base::fail(where, ": added_tokens_decoder key \"", member.key, "\" is not an id");
      }
      tokens.push_back(std::move(token));
    }
    std::stable_sort(tokens.begin(), tokens.end(),
                     [](const auto& a, const auto& b) { return a.id < b.id; });
    return tokens;
  }

  fs::path folder_;
  const HfTokenizerJson& json_;
  const std::vector<std::string>& kwargs_additional_;
};

}  // namespace

HfTransformersSetup read_transformers_setup(
    const std::string& folder, const HfTokenizerJson& json,
    const std::vector<std::string>& additional_special_tokens) {
  return SetupReader(folder, json, additional_special_tokens).read();
}

HfTransformersSetup bare_file_setup(const std::vector<std::string>& additional_special_tokens) {
  HfTransformersSetup setup;
  setup.special_tokens = plain_tokens(additional_special_tokens);
  return setup;
}

void add_transformers_tokens(const HfTransformersSetup& setup, HfAddedVocabulary& vocabulary) {
  // Every added_tokens_decoder entry is added again (an identical one changes nothing), then each
  // special token whose string is not yet an added token; AddedToken values always.
  std::vector<HfAddedToken> to_add = setup.added_tokens_decoder;
  std::vector<std::string> known;
  for (const HfAddedToken& entry : vocabulary.patterns()) known.push_back(entry.content);
  for (const HfAddedToken& entry : to_add) known.push_back(entry.content);
  std::vector<bool> special_batch(to_add.size());
  for (std::size_t i = 0; i < to_add.size(); ++i) special_batch[i] = to_add[i].special;
  const auto is_special_content = [&](const std::string& content) {
    return std::any_of(setup.special_tokens.begin(), setup.special_tokens.end(),
                       [&](const HfSpecialToken& s) { return s.token.content == content; });
  };
  for (std::size_t i = 0; i < to_add.size(); ++i) {
    special_batch[i] = special_batch[i] || is_special_content(to_add[i].content);
  }
  for (const HfSpecialToken& special : setup.special_tokens) {
    // A string is skipped when it is already an added token's; an AddedToken when an equal one
    // is in added_tokens_decoder (AddedToken never equals a string in Python).
    const std::vector<HfAddedToken>& decoder = setup.added_tokens_decoder;
    if (special.plain_string
            ? std::find(known.begin(), known.end(), special.token.content) != known.end()
            : std::any_of(decoder.begin(), decoder.end(), [&](const HfAddedToken& t) {
                return same_added_token(t, special.token);
              })) {
      continue;
    }
    to_add.push_back(special.token);
    special_batch.push_back(true);
  }
  // add_special_tokens marks its tokens special; batches keep their order.
  std::vector<HfAddedToken> batch;
  bool batch_special = false;
  const auto flush = [&] {
    if (!batch.empty()) vocabulary.add_tokens(batch);
    batch.clear();
  };
  for (std::size_t i = 0; i < to_add.size(); ++i) {
    if (!batch.empty() && batch_special != special_batch[i]) flush();
    batch_special = special_batch[i];
    HfAddedToken token = to_add[i];
    if (batch_special) token.special = true;
    batch.push_back(std::move(token));
  }
  flush();
}

void apply_class_rewrites(const HfTransformersSetup& setup, const HfAddedVocabulary& vocabulary,
                          HfTokenizerJson& json) {
  switch (setup.tokenizer_class) {
    case HfTokenizerClass::kGeneric:
      return;
    case HfTokenizerClass::kBloom:
      // The pickled state's "add_prefix_space":false become true, in every ByteLevel step.
      if (setup.add_prefix_space) {
        for (HfPreTokenizerStep& step : json.pre_tokenizer) {
          if (step.kind == HfPreTokenizerStep::Kind::kByteLevel) step.add_prefix_space = true;
        }
      }
      return;
    case HfTokenizerClass::kGpt2:
    case HfTokenizerClass::kGptNeoX:
      // A top-level ByteLevel takes the class's add_prefix_space (false unless the config says).
      if (json.pre_tokenizer_is_byte_level) {
        json.pre_tokenizer.front().add_prefix_space = setup.add_prefix_space;
      }
      break;
  }
  if (setup.tokenizer_class != HfTokenizerClass::kGptNeoX) return;
  // GPTNeoXTokenizerFast.update_post_processor: "[bos ]$A[ eos]" replaces the file's.
  const auto id_of = [&](const std::optional<HfSpecialToken>& special, const char* what) {
    const std::optional<std::int32_t> id =
        special ? vocabulary.token_to_id(special->token.content) : std::nullopt;
    if (!id)
      base::fail("GPTNeoXTokenizerFast: add_", what, "_token is set but ", what, "_token is not");
    return *id;
  };
  json.single_template.clear();
  if (setup.add_bos_token) json.single_template.push_back({false, {id_of(setup.bos, "bos")}});
  json.single_template.push_back({true, {}});
  if (setup.add_eos_token) json.single_template.push_back({false, {id_of(setup.eos, "eos")}});
}

}  // namespace mds::text
