// What transformers' AutoTokenizer.from_pretrained(folder) (4.40.2) does around tokenizer.json
// for the tokenizer classes mds reproduces: the class (tokenizer_config.json's tokenizer_class,
// else config.json's model_type), its special tokens (the class's defaults, tokenizer_config.json,
// and special_tokens_map.json when the config has no added_tokens_decoder; an explicit null
// removes one; tokenizer.json's padding token for a class that passes no pad token), the tokens
// PreTrainedTokenizerFast adds at construction (added_tokens_decoder, then every special token not
// yet an added token), and the class's own rewrites of the pipeline (GPT-2's and GPT-NeoX's
// ByteLevel prefix space, BLOOM's add_prefix_space, GPT-NeoX's post-processor from
// add_bos_token/add_eos_token). Other classes are refused.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "text/hf_added_tokens.h"
#include "text/hf_tokenizer_json.h"

namespace mds::text {

enum class HfTokenizerClass : std::uint8_t { kGeneric, kGpt2, kBloom, kGptNeoX };

// A special token attribute's value: a plain string (added as a special token with default
// flags) or an AddedToken with its own flags.
struct HfSpecialToken {
  HfAddedToken token;
  bool plain_string = true;
};

struct HfTransformersSetup {
  HfTokenizerClass tokenizer_class = HfTokenizerClass::kGeneric;
  // all_special_tokens_extended: bos, eos, unk, sep, pad, cls, mask (those set, each text once),
  // then additional_special_tokens.
  std::vector<HfSpecialToken> special_tokens;
  std::optional<HfSpecialToken> bos, eos;
  std::vector<HfAddedToken> added_tokens_decoder;  // by id
  bool clean_up_tokenization_spaces = true;
  bool add_prefix_space = false;
  bool add_bos_token = false, add_eos_token = false;  // GPT-NeoX
};

// Reads tokenizer_config.json, special_tokens_map.json and config.json in `folder`; from `json`
// (the folder's tokenizer.json) its added tokens (the legacy path reads them as
// added_tokens_decoder) and its padding token. `additional_special_tokens`: from_pretrained's
// keyword argument (replaces the files' list when not empty).
HfTransformersSetup read_transformers_setup(
    const std::string& folder, const HfTokenizerJson& json,
    const std::vector<std::string>& additional_special_tokens = {});

// The setup of a bare tokenizer.json file (mds's extension: no class, no special tokens but the
// additional ones given).
HfTransformersSetup bare_file_setup(const std::vector<std::string>& additional_special_tokens = {});

// PreTrainedTokenizerFast's construction: adds the tokens it adds to `vocabulary`.
void add_transformers_tokens(const HfTransformersSetup& setup, HfAddedVocabulary& vocabulary);

// The class's rewrites of the pre-tokenizer and post-processor, after the tokens are added.
void apply_class_rewrites(const HfTransformersSetup& setup, const HfAddedVocabulary& vocabulary,
                          HfTokenizerJson& json);

}  // namespace mds::text
