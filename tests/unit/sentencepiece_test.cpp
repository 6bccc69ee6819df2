#include "text/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "test_support.h"

namespace mds::text {
namespace {

using testing_support::read_file;
using testing_support::ScratchDir;
using testing_support::write_file;
using Ids = std::vector<std::int32_t>;

// Trains a tiny BPE model on the first ~200 KB of tinyshakespeare once for the whole suite.
class SentencePiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    const std::string input = dir_->file("corpus.txt");
    write_file(input, read_file(MDS_DATA_DIR "/corpora/tinyshakespeare.txt").substr(0, 200 * 1024));
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + input + " --model_prefix=" + dir_->file("tiny") +
        " --vocab_size=500 --model_type=bpe --character_coverage=1.0 --minloglevel=2");
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model() { return dir_->file("tiny.model"); }

  static ScratchDir* dir_;
};
ScratchDir* SentencePiece::dir_ = nullptr;

const std::vector<std::string> kSamples = {
    "First Citizen: Before we proceed any further, hear me speak.",
    "All: Speak, speak.",
    "You are all resolved rather to die than to famish?",
    "What authority surfeits on would relieve us.",
    "",
};

TEST_F(SentencePiece, MatchesTheProcessor) {
  const SentencePieceTokenizer tokenizer(model());
  sentencepiece::SentencePieceProcessor processor;
  ASSERT_TRUE(processor.Load(model()).ok());
  EXPECT_EQ(tokenizer.type_name(), "SentencePieceTokenizer");
  EXPECT_EQ(tokenizer.vocab_size(), 500);
  EXPECT_EQ(tokenizer.eod(), processor.eos_id());
  const auto encoder = tokenizer.make_encoder();
  for (const std::string& sample : kSamples) {
    Ids ids = {42};  // encode appends
    encoder->encode(sample, ids);
    const std::vector<int> expected = processor.EncodeAsIds(sample);
    ASSERT_EQ(ids.size(), expected.size() + 1);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), ids.begin() + 1)) << sample;
    EXPECT_EQ(tokenizer.decode(std::span(ids).subspan(1)), sample);
  }
}

TEST_F(SentencePiece, EncodersRunInParallel) {
  const SentencePieceTokenizer tokenizer(model());
  std::string text;
  for (int i = 0; i < 50; ++i) text += kSamples[static_cast<std::size_t>(i) % 4] + " ";
  const Ids expected = tokenizer.encode(text);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&tokenizer, &text, &result] {
      const auto encoder = tokenizer.make_encoder();
      for (int i = 0; i < 20; ++i) {
        result.clear();
        encoder->encode(text, result);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, expected);
}

TEST_F(SentencePiece, Errors) {
  const SentencePieceTokenizer tokenizer(model());
  try {
    tokenizer.decode(Ids{500});
    FAIL() << "decoding id 500 should fail";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("token id 500"), std::string::npos) << error.what();
  }
  for (const std::string& path :
       {std::string("/nonexistent/model.model"), std::string(MDS_DATA_DIR "/gpt2/merges.txt")}) {
    try {
      SentencePieceTokenizer bad(path);
      FAIL() << "loading " << path << " should fail";
    } catch (const base::Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("sentencepiece model " + path + ": cannot load"), std::string::npos)
          << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace mds::text
