// Finding and reading a Hugging Face tokenizer for --tokenizer-type PretrainedFromHF.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/hf_bpe_tokenizer.h"
#include "text/hf_transformers_setup.h"

namespace mds::text {

// The tokenizer.json that --tokenizer-name-or-path names: the file itself, a folder holding it
// (what save_pretrained writes), or a model name ("bigscience/tokenizer") already in the local
// Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; the
// snapshot refs/main names). Nothing is downloaded; a name not found fails with one line saying
// how to fetch it.
std::string find_hf_tokenizer_json(const std::string& name_or_path);

// The tokenizer as transformers' AutoTokenizer.from_pretrained builds it from the folder
// (hf_transformers_setup.h); a tokenizer.json named directly is read on its own.
// `additional_special_tokens` is from_pretrained's keyword argument of that name: when not empty
// it replaces the files' list.
std::unique_ptr<HfBpeTokenizer> load_hf_tokenizer(
    const std::string& name_or_path,
    const std::vector<std::string>& additional_special_tokens = {});

// The added vocabulary and tokenizer that transformers' setup (`setup`) makes of a parsed
// tokenizer.json: load_hf_tokenizer's last step.
struct HfAssembledTokenizer {
  HfAddedVocabulary added;
  std::unique_ptr<HfBpeTokenizer> tokenizer;
};
HfAssembledTokenizer assemble_hf_tokenizer(HfTokenizerJson json, const HfTransformersSetup& setup);

// "<extra_id_0>" ... "<extra_id_{count-1}>": what upstream's _AutoTokenizer passes as
// additional_special_tokens for --vocab-extra-ids.
std::vector<std::string> extra_id_tokens(std::int64_t count);

}  // namespace mds::text
