// Zero-shot datasets against data.md §8.6: WikiText windows and pad masks, LAMBADA samples with
// the official GPT-2 vocabulary, and the input errors.
#include <gtest/gtest.h>

#include <memory>

#include "base/error.h"
#include "tasks/eval_datasets.h"
#include "test_support.h"
#include "text/tokenizer_factory.h"

namespace mds::tasks {
namespace {

using Ids = std::vector<std::int64_t>;
using Mask = std::vector<std::uint8_t>;

const text::Tokenizer& gpt2() {
  static const std::unique_ptr<text::Tokenizer> tokenizer = [] {
    config::TokenizerArgs args;
    args.tokenizer_type = "GPT2BPETokenizer";
    args.vocab_file = MDS_DATA_DIR "/gpt2/vocab.json";
    args.merge_file = MDS_DATA_DIR "/gpt2/merges.txt";
    return text::build_tokenizer(args);
  }();
  return *tokenizer;
}

Ids hundreds() {
  Ids tokens;
  for (std::int64_t t = 100; t <= 110; ++t) tokens.push_back(t);
  return tokens;
}

TEST(LmWindowsTest, NoOverlap) {
  for (const std::optional<std::int64_t> ov : {std::optional<std::int64_t>{}, {4}}) {
    const LmWindows windows(hundreds(), 4, 0, ov);
    ASSERT_EQ(windows.size(), 3);
    EXPECT_EQ(windows.window(0).tokens, (Ids{100, 101, 102, 103, 104}));
    EXPECT_EQ(windows.window(0).pad_mask, (Mask{1, 1, 1, 1}));
    EXPECT_EQ(windows.window(1).tokens, (Ids{104, 105, 106, 107, 108}));
    EXPECT_EQ(windows.window(1).pad_mask, (Mask{1, 1, 1, 1}));
    EXPECT_EQ(windows.window(2).tokens, (Ids{108, 109, 110, 0, 0}));
    EXPECT_EQ(windows.window(2).pad_mask, (Mask{1, 1, 0, 0}));
  }
}

TEST(LmWindowsTest, OverlapTwo) {
  const LmWindows windows(hundreds(), 4, 0, 2);
  ASSERT_EQ(windows.size(), 5);
  EXPECT_EQ(windows.window(0).tokens, (Ids{100, 101, 102, 103, 104}));
  EXPECT_EQ(windows.window(0).pad_mask, (Mask{1, 1, 1, 1}));
  EXPECT_EQ(windows.window(1).tokens, (Ids{102, 103, 104, 105, 106}));
  EXPECT_EQ(windows.window(1).pad_mask, (Mask{0, 0, 1, 1}));
  EXPECT_EQ(windows.window(2).tokens, (Ids{104, 105, 106, 107, 108}));
  EXPECT_EQ(windows.window(2).pad_mask, (Mask{0, 0, 1, 1}));
  EXPECT_EQ(windows.window(3).tokens, (Ids{106, 107, 108, 109, 110}));
  EXPECT_EQ(windows.window(3).pad_mask, (Mask{0, 0, 1, 1}));
  EXPECT_EQ(windows.window(4).tokens, (Ids{108, 109, 110, 0, 0}));
  EXPECT_EQ(windows.window(4).pad_mask, (Mask{0, 0, 0, 0}));
}

TEST(LmWindowsTest, OverlapOneAndLarge) {
  EXPECT_EQ(LmWindows(hundreds(), 4, 0, 1).size(), 10);
  EXPECT_EQ(LmWindows(hundreds(), 4, 0, 0).size(), 10);  // max(1, 0)
  const LmWindows wide(hundreds(), 4, 0, 32);
  ASSERT_EQ(wide.size(), 1);
  EXPECT_EQ(wide.window(0).pad_mask, (Mask{1, 1, 1, 1}));
}

TEST(LmWindowsTest, EveryTargetScoredOnce) {
  Ids tokens;
  for (std::int64_t t = 0; t < 37; ++t) tokens.push_back(t);
  for (std::int64_t ov : {1, 3, 5, 8}) {
    const LmWindows windows(tokens, 8, 0, ov);
    std::int64_t scored = 0;
    for (std::int64_t w = 0; w < windows.size(); ++w) {
      for (const auto bit : windows.window(w).pad_mask) scored += bit;
    }
    EXPECT_EQ(scored, 36) << "overlap " << ov;
  }
}

TEST(LambadaTest, OfficialVocabVectors) {
  const std::string bob = "He looked at the dog and said hello to Bob";
  for (const bool strict : {false, true}) {
    const LambadaExample e = lambada_example(bob, gpt2(), strict);
    EXPECT_EQ(e.context, (Ids{1544, 3114, 379, 262, 3290, 290, 531, 23748, 284}));
    EXPECT_EQ(e.target, (Ids{5811}));
  }
  const std::string anna = "She opened the door, smiling at Anna-Maria.";
  EXPECT_EQ(lambada_example(anna, gpt2(), false).target, (Ids{13}));
  const LambadaExample strict = lambada_example(anna, gpt2(), true);
  EXPECT_EQ(strict.context, (Ids{3347, 4721, 262, 3420, 11, 16755, 379}));
  EXPECT_EQ(strict.target, (Ids{11735, 12, 46827, 13}));
  const EvalSample sample = lambada_sample(strict, 12, 50256);
  EXPECT_EQ(sample.pad_mask, (Mask{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(sample.tokens,
            (Ids{3347, 4721, 262, 3420, 11, 16755, 379, 11735, 12, 46827, 13, 50256, 50256}));
  EXPECT_THROW(lambada_sample(strict, 9, 50256), base::Error);
}

TEST(LambadaTest, ReadsJsonLinesAndNamesBadLines) {
  testing_support::ScratchDir dir;
  const std::string root = dir.path().string();
  const std::string good = root + "/lambada.jsonl";
  testing_support::write_file(good,
                              "{\"text\": \"a b c\"}\r\n{\"text\": \"x y\"}\r{\"text\": \"z\"}");
  EXPECT_EQ(read_lambada(good, gpt2(), true).size(), 3u);
  const std::string bad = root + "/bad.jsonl";
  testing_support::write_file(bad, "{\"text\": \"a b\"}\n{\"text\": \"c\"\n");
  try {
    read_lambada(bad, gpt2(), false);
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2: invalid JSON"), std::string::npos)
        << e.what();
  }
  testing_support::write_file(bad, "{\"text\": \"a\"}\n\n");
  EXPECT_THROW(read_lambada(bad, gpt2(), false), base::Error);  // a blank line is not JSON
  testing_support::write_file(bad, "{\"txt\": \"a\"}\n");
  try {
    read_lambada(bad, gpt2(), false);
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:1: no key 'text'"), std::string::npos)
        << e.what();
  }
  testing_support::write_file(bad, "{\"text\": \" \"}\n");
  EXPECT_THROW(read_lambada(bad, gpt2(), true), base::Error);  // no word
}

TEST(WikitextTest, CountsAndDetokenizes) {
  testing_support::ScratchDir dir;
  const std::string root = dir.path().string();
  const std::string path = root + "/wiki.tokens";
  // strip() removes the outer whitespace; the count is 1 + spaces (double spaces count twice).
  testing_support::write_file(path, " \n a , b  c \n");
  const WikitextData data = read_wikitext(path, gpt2());
  EXPECT_EQ(data.num_original_tokens, 5);
  const std::vector<std::int32_t> want = gpt2().encode("\na, b  c\n");  // detokenized
  EXPECT_EQ(data.tokens, Ids(want.begin(), want.end()));
  EXPECT_EQ(data.num_tokenized_tokens, static_cast<std::int64_t>(want.size()));
  const std::string other = root + "/other.txt";
  testing_support::write_file(other, "a b c");
  EXPECT_THROW(read_wikitext(other, gpt2()), base::Error);  // no detokenizer for the path
  EXPECT_THROW(read_wikitext(root + "/wiki-missing.txt", gpt2()), base::Error);
}

}  // namespace
}  // namespace mds::tasks
