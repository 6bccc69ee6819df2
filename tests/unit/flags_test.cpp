#include "config/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/tokenizer_args.h"

#include "test_support.h"

namespace mds::config {
namespace {

using testing_support::Argv;

TEST(Flags, AcceptsUniquePrefixesLikeArgparse) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kAbsent);
  flags.allow_abbreviations(true);
  // A refused flag never makes an abbreviation ambiguous.
  flags.add_rejected("--vocab-size", "not an upstream flag", true);
  Argv args({"prog", "--vocab", "v.json", "--merge-file=m.txt", "--make-vocab", "64"});
  flags.parse(args.argc(), args.argv());
  EXPECT_EQ(tokenizer.vocab_file, "v.json");
  EXPECT_EQ(tokenizer.merge_file, "m.txt");
  EXPECT_EQ(tokenizer.make_vocab_size_divisible_by, 64);
  EXPECT_EQ(tokenizer.tokenizer_type, "GPT2BPETokenizer");
  EXPECT_NE(flags.resolved_arguments().find("vocab-file=\"v.json\""), std::string::npos);
}

TEST(Flags, VocabExtraIdsIsAFlagWhereUpstreamHasIt) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "PretrainedFromHF", VocabExtraIdsFlag::kPresent);
  Argv args({"prog", "--vocab-extra-ids", "3"});
  flags.parse(args.argc(), args.argv());
  EXPECT_EQ(tokenizer.vocab_extra_ids, 3);
}

TEST(FlagsDeathTest, AmbiguousPrefixIsAnError) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kAbsent);
  flags.allow_abbreviations(true);
  Argv args({"prog", "--tokenizer", "x"});  // --tokenizer-type or --tokenizer-model
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: ambiguous option: --tokenizer could match");
}

TEST(FlagsDeathTest, VocabIsAmbiguousBesideVocabExtraIds) {
  // As in pretrain_gpt.py's argparse: --vocab-file or --vocab-extra-ids.
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kPresent);
  flags.allow_abbreviations(true);
  Argv args({"prog", "--vocab", "v.json"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: ambiguous option: --vocab could match");
}

TEST(FlagsDeathTest, AbbreviationsAreOffUnlessAllowed) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kAbsent);
  Argv args({"prog", "--vocab", "v.json"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: .*--vocab");
}

TEST(FlagsDeathTest, RejectedFlagExplainsWhy) {
  FlagSet flags("prog", "test");
  flags.add_rejected("--mask-prob", "only used by BERT/T5 models", true);
  Argv args({"prog", "--mask-prob", "0.2"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "--mask-prob: only used by BERT/T5 models");
}

TEST(FlagsDeathTest, UnknownFlagIsAnError) {
  FlagSet flags("prog", "test");
  Argv args({"prog", "--no-such-flag"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: .*no-such-flag");
}

TEST(FlagsDeathTest, HelpListsFlagsAndExitsZero) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer", VocabExtraIdsFlag::kAbsent);
  Argv args({"prog", "--help"});
  EXPECT_EXIT(
      {
        flags.parse(args.argc(), args.argv());
        std::exit(1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mds::config
