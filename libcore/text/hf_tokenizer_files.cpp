#include "text/hf_tokenizer_files.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/text.h"
#include "text/hf_transformers_setup.h"

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

std::vector<std::string> extra_id_tokens(std::int64_t count) {
  std::vector<std::string> tokens;
  for (std::int64_t i = 0; i < count; ++i) tokens.push_back("<extra_id_" + std::to_string(i) + ">");
  return tokens;
}

std::unique_ptr<HfBpeTokenizer> load_hf_tokenizer(
    const std::string& name_or_path, const std::vector<std::string>& additional_special_tokens) {
  const std::string path = find_hf_tokenizer_json(name_or_path);
  const base::MappedFile file(path);
  HfTokenizerJson json = parse_hf_tokenizer_json(file.bytes(), path);
  // A tokenizer.json named directly has no transformers files beside it to read (mds's extension).
  const HfTransformersSetup setup =
      is_regular(fs::path(name_or_path))
          ? bare_file_setup(additional_special_tokens)
          : read_transformers_setup(fs::path(path).parent_path().string(), json,
                                    additional_special_tokens);
  return assemble_hf_tokenizer(std::move(json), setup).tokenizer;
}

HfAssembledTokenizer assemble_hf_tokenizer(HfTokenizerJson json, const HfTransformersSetup& setup) {
  HfAddedVocabulary added(json.vocab);
  added.add_tokens(json.added_tokens);
  add_transformers_tokens(setup, added);
  apply_class_rewrites(setup, added, json);
  HfTokenizerOptions options;
  if (setup.eos) options.eos_token = setup.eos->token.content;
  options.clean_up_tokenization_spaces = setup.clean_up_tokenization_spaces;
  auto tokenizer = std::make_unique<HfBpeTokenizer>(json, added, options);
  return {std::move(added), std::move(tokenizer)};
}

}  // namespace mds::text
