#include "text/tokenizer_factory.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "model/gpt_config.h"

namespace mds::text {
namespace {

std::string error_of(const config::TokenizerArgs& args) {
  try {
    build_tokenizer(args);
  } catch (const base::Error& error) {
    return error.what();
  }
  return "";
}

config::TokenizerArgs gpt2_args() {
  config::TokenizerArgs args;
  args.tokenizer_type = "GPT2BPETokenizer";
  args.vocab_file = MDS_DATA_DIR "/gpt2/vocab.json";
  args.merge_file = MDS_DATA_DIR "/gpt2/merges.txt";
  return args;
}

TEST(TokenizerFactory, BuildsGpt2) {
  const auto tokenizer = build_tokenizer(gpt2_args());
  EXPECT_EQ(tokenizer->type_name(), "GPT2BPETokenizer");
  EXPECT_EQ(tokenizer->vocab_size(), 50257);
  EXPECT_EQ(tokenizer->eod(), 50256);
  EXPECT_EQ(tokenizer->encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
}

TEST(TokenizerFactory, NamesTheMissingFlag) {
  config::TokenizerArgs args = gpt2_args();
  args.vocab_file.clear();
  EXPECT_NE(error_of(args).find("needs --vocab-file"), std::string::npos);
  args = gpt2_args();
  args.merge_file.clear();
  EXPECT_NE(error_of(args).find("needs --merge-file"), std::string::npos);
  args = {};
  args.tokenizer_type = "SentencePieceTokenizer";
  EXPECT_NE(error_of(args).find("needs --tokenizer-model"), std::string::npos);
  args.tokenizer_model = "/nonexistent.model";
  EXPECT_NE(error_of(args).find("/nonexistent.model: cannot load"), std::string::npos);
}

TEST(TokenizerFactory, RejectsUnsupportedTypes) {
  for (const char* type : {"BertWordPieceLowerCase", "BertWordPieceCase"}) {
    config::TokenizerArgs args = gpt2_args();
    args.tokenizer_type = type;
    EXPECT_EQ(error_of(args), std::string("--tokenizer-type ") + type +
                                  " is not supported by mds; use GPT2BPETokenizer, "
                                  "SentencePieceTokenizer or PretrainedFromHF");
  }
  config::TokenizerArgs args = gpt2_args();
  args.tokenizer_type = "PretrainedFromHF";
  EXPECT_NE(error_of(args).find("PretrainedFromHF needs --tokenizer-name-or-path"),
            std::string::npos);
  args.tokenizer_name_or_path = "/nonexistent/folder";
  EXPECT_NE(error_of(args).find("--tokenizer-name-or-path /nonexistent/folder: neither a file"),
            std::string::npos);
  args = gpt2_args();
  args.tokenizer_type = "Nonsense";
  EXPECT_NE(error_of(args).find("unknown --tokenizer-type Nonsense"), std::string::npos);
}

TEST(TokenizerFactory, PaddedVocabSize) {
  config::TokenizerArgs args;
  EXPECT_EQ(padded_vocab_size(50257, args, 1), 50304);
  EXPECT_EQ(padded_vocab_size(50257, args, 2), 50432);
  EXPECT_EQ(padded_vocab_size(50257, args, 4), 50688);
  EXPECT_EQ(padded_vocab_size(50257, args, 8), 51200);
  EXPECT_EQ(padded_vocab_size(5000, args, 1), 5120);
  EXPECT_EQ(padded_vocab_size(50304, args, 1), 50304);
  args.make_vocab_size_divisible_by = 1;
  EXPECT_EQ(padded_vocab_size(50257, args, 1), 50257);
  args.make_vocab_size_divisible_by = 128;
  args.pad_vocab_size_to = 51200;
  EXPECT_EQ(padded_vocab_size(50257, args, 8), 51200);
  EXPECT_EQ(padded_vocab_size(50257, args, 3), 51200);  // TP is not checked here
  // BLOOM (tr11): 250680 tokens, --pad-vocab-size-to 250880 at T = 4: 62720 rows per rank.
  args.pad_vocab_size_to = 250880;
  EXPECT_EQ(padded_vocab_size(250680, args, 4), 250880);
  model::GptConfig bloom;
  bloom.padded_vocab_size = padded_vocab_size(250680, args, 4);
  bloom.tensor_parallel_size = 4;
  bloom.tp_rank = 3;
  EXPECT_EQ(bloom.local_vocab(), 62720);
  EXPECT_EQ(bloom.vocab_start(), 3 * 62720);
  args.pad_vocab_size_to = 50000;
  EXPECT_THROW(padded_vocab_size(50257, args, 1), base::Error);
  args.pad_vocab_size_to = 50300;
  EXPECT_THROW(padded_vocab_size(50257, args, 1), base::Error);
  args.make_vocab_size_divisible_by = 4;
  EXPECT_EQ(padded_vocab_size(50257, args, 1), 50300);
}

}  // namespace
}  // namespace mds::text
