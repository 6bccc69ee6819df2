#include "text/tokenizer_factory.h"

#include "base/error.h"
#include "text/gpt2_bpe.h"
#include "text/hf_tokenizer_files.h"
#include "text/sentencepiece_tokenizer.h"

namespace mds::text {

std::unique_ptr<Tokenizer> build_tokenizer(const config::TokenizerArgs& args) {
  const std::string& type = args.tokenizer_type;
  if (args.vocab_extra_ids > 0 && type != "PretrainedFromHF") {
    base::fail("--vocab-extra-ids ", args.vocab_extra_ids,
               ": only PretrainedFromHF adds the extra ", "tokens (upstream's ", type,
               " ignores the flag); leave it out");
  }
  if (type == "GPT2BPETokenizer") {
    if (args.vocab_file.empty()) base::fail("GPT2BPETokenizer needs --vocab-file (vocab.json)");
    if (args.merge_file.empty()) base::fail("GPT2BPETokenizer needs --merge-file (merges.txt)");
    return std::make_unique<GPT2BPETokenizer>(args.vocab_file, args.merge_file);
  }
  if (type == "SentencePieceTokenizer") {
    if (args.tokenizer_model.empty()) {
      base::fail("SentencePieceTokenizer needs --tokenizer-model (a SentencePiece .model file)");
    }
    return std::make_unique<SentencePieceTokenizer>(args.tokenizer_model);
  }
  if (type == "PretrainedFromHF") {
    if (args.tokenizer_name_or_path.empty()) {
      base::fail(
          "PretrainedFromHF needs --tokenizer-name-or-path (a tokenizer.json, its folder, "
          "or a model name in the Hugging Face cache)");
    }
    return load_hf_tokenizer(args.tokenizer_name_or_path, extra_id_tokens(args.vocab_extra_ids));
  }
  if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase") {
    base::fail("--tokenizer-type ", type,
               " is not supported by mds; use GPT2BPETokenizer, SentencePieceTokenizer or "
               "PretrainedFromHF");
  }
  if (type.empty()) base::fail("--tokenizer-type is required");
  base::fail("unknown --tokenizer-type ", type,
             "; use GPT2BPETokenizer, SentencePieceTokenizer or PretrainedFromHF");
}

std::int64_t padded_vocab_size(std::int64_t vocab_size, const config::TokenizerArgs& args,
                               std::int64_t tensor_parallel_size) {
  const std::int64_t divisible_by = args.make_vocab_size_divisible_by;
  if (divisible_by <= 0) {
    base::fail("--make-vocab-size-divisible-by must be positive, got ", divisible_by);
  }
  if (args.pad_vocab_size_to) {
    const std::int64_t target = *args.pad_vocab_size_to;
    if (target < vocab_size) {
      base::fail("--pad-vocab-size-to ", target, " is smaller than the vocabulary (", vocab_size,
                 " tokens)");
    }
    if (target % divisible_by != 0) {
      base::fail("--pad-vocab-size-to ", target,
                 " is not a multiple of "
                 "--make-vocab-size-divisible-by ",
                 divisible_by);
    }
    return target;
  }
  if (tensor_parallel_size <= 0) {
    base::fail("tensor-parallel size must be positive, got ", tensor_parallel_size);
  }
  const std::int64_t multiple = divisible_by * tensor_parallel_size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mds::text
