#include "text/hf_tokenizer_files.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/text.h"
#include "config/json_document.h"

namespace mds::text {
namespace {

namespace fs = std::filesystem;

bool is_regular(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

bool is_folder(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

// The Hugging Face hub cache folder, as huggingface_hub resolves it.
fs::path hub_cache() {
  if (const char* cache = std::getenv("HF_HUB_CACHE"); cache != nullptr && *cache != '\0') {
    return cache;
  }
  if (const char* home = std::getenv("HF_HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / "hub";
  }
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return fs::path(xdg) / "huggingface" / "hub";
  const char* user_home = std::getenv("HOME");
  return fs::path(user_home != nullptr ? user_home : "") / ".cache" / "huggingface" / "hub";
}

// models--ORG--NAME/snapshots/<the commit refs/main names>, or an empty path.
fs::path cached_snapshot(const std::string& name) {
  std::string folder = "models--";
  for (const char c : name) {
    if (c == '/') {
      folder += "--";
    } else {
      folder.push_back(c);
    }
  }
  const fs::path model = hub_cache() / folder;
  const fs::path ref = model / "refs" / "main";
  if (!is_regular(ref)) return {};
  return model / "snapshots" / base::trimmed(base::read_file(ref.string()));
}

// An eos_token entry: a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const config::JsonValue* value) {
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (value->is_string()) return value->as_string();
  if (value->is_object()) {
    const config::JsonValue* content = value->find("content");
    if (content != nullptr && content->is_string()) return content->as_string();
  }
  return std::nullopt;
}

// What transformers' tokenizer classes default to where tokenizer_config.json is silent.
HfTokenizerOptions class_defaults(const std::string& tokenizer_class) {
  HfTokenizerOptions defaults;
  if (tokenizer_class.starts_with("GPT2Tokenizer") ||
      tokenizer_class.starts_with("GPTNeoXTokenizer")) {
    defaults.eos_token = "<|endoftext|>";
  } else if (tokenizer_class.starts_with("BloomTokenizer")) {
    defaults.eos_token = "</s>";
    defaults.clean_up_tokenization_spaces = false;
  }
  return defaults;
}

}  // namespace

std::string find_hf_tokenizer_json(const std::string& name_or_path) {
  if (name_or_path.empty()) base::fail("PretrainedFromHF needs --tokenizer-name-or-path");
  const fs::path given(name_or_path);
  if (is_regular(given)) return given.string();
  if (is_folder(given)) {
    if (is_regular(given / "tokenizer.json")) return (given / "tokenizer.json").string();
    base::fail("--tokenizer-name-or-path ", name_or_path,
               ": the folder has no tokenizer.json (mds reads the `tokenizers` library's file, "
               "which save_pretrained of a fast tokenizer writes)");
  }
  const fs::path snapshot = cached_snapshot(name_or_path);
  if (!snapshot.empty() && is_regular(snapshot / "tokenizer.json")) {
    return (snapshot / "tokenizer.json").string();
  }
  base::fail("--tokenizer-name-or-path ", name_or_path,
             ": neither a file, a folder nor a model in the Hugging Face cache (",
             hub_cache().string(),
             "); mds does not download: fetch it first, e.g. `huggingface-cli download ",
             name_or_path, " tokenizer.json tokenizer_config.json special_tokens_map.json`");
}

HfTokenizerOptions read_hf_tokenizer_options(const std::string& folder) {
  HfTokenizerOptions options;
  const fs::path config_path = fs::path(folder) / "tokenizer_config.json";
  const fs::path map_path = fs::path(folder) / "special_tokens_map.json";
  if (is_regular(config_path)) {
    const config::JsonValue config =
        config::parse_json(base::read_file(config_path.string()), config_path.string());
    const config::JsonValue* cls = config.find("tokenizer_class");
    if (cls != nullptr && cls->is_string()) options = class_defaults(cls->as_string());
    if (const config::JsonValue* clean = config.find("clean_up_tokenization_spaces");
        clean != nullptr && clean->is_bool()) {
      options.clean_up_tokenization_spaces = clean->as_bool();
    }
    if (std::optional<std::string> eos = token_text(config.find("eos_token"))) {
      options.eos_token = eos;
    }
  }
  if (is_regular(map_path)) {
    const config::JsonValue map =
        config::parse_json(base::read_file(map_path.string()), map_path.string());
    if (std::optional<std::string> eos = token_text(map.find("eos_token"))) {
      options.eos_token = eos;
    }
  }
  return options;
}

std::unique_ptr<HfBpeTokenizer> load_hf_tokenizer(const std::string& name_or_path) {
  const std::string path = find_hf_tokenizer_json(name_or_path);
  const base::MappedFile file(path);
  const HfTokenizerJson json = parse_hf_tokenizer_json(file.bytes(), path);
  return std::make_unique<HfBpeTokenizer>(
      json, read_hf_tokenizer_options(fs::path(path).parent_path().string()));
}

}  // namespace mds::text
