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
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer");
  flags.allow_abbreviations(true);
  // --vocab also prefixes the refused --vocab-extra-ids, which must not make it ambiguous.
  Argv args({"prog", "--vocab", "v.json", "--merge-file=m.txt", "--make-vocab", "64"});
  flags.parse(args.argc(), args.argv());
  EXPECT_EQ(tokenizer.vocab_file, "v.json");
  EXPECT_EQ(tokenizer.merge_file, "m.txt");
  EXPECT_EQ(tokenizer.make_vocab_size_divisible_by, 64);
  EXPECT_EQ(tokenizer.tokenizer_type, "GPT2BPETokenizer");
  EXPECT_NE(flags.resolved_arguments().find("vocab-file=\"v.json\""), std::string::npos);
}

TEST(FlagsDeathTest, AmbiguousPrefixIsAnError) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer");
  flags.allow_abbreviations(true);
  Argv args({"prog", "--tokenizer", "x"});  // --tokenizer-type or --tokenizer-model
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: ambiguous option: --tokenizer could match");
}

TEST(FlagsDeathTest, AbbreviationsAreOffUnlessAllowed) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer");
  Argv args({"prog", "--vocab", "v.json"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "prog: error: .*--vocab");
}

TEST(FlagsDeathTest, RejectedFlagExplainsWhy) {
  FlagSet flags("prog", "test");
  TokenizerArgs tokenizer;
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer");
  Argv args({"prog", "--vocab-extra-ids", "100"});
  EXPECT_EXIT(flags.parse(args.argc(), args.argv()), testing::ExitedWithCode(2),
              "--vocab-extra-ids: only used by BERT/T5 tokenizers");
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
  add_tokenizer_flags(flags, tokenizer, "GPT2BPETokenizer");
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
