#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mds::text {

// A SentencePiece model (--tokenizer-model) through libsentencepiece. Not an upstream type: the
// fork reaches SentencePiece only through Hugging Face (PretrainedFromHF); ids equal those of
// sentencepiece's own Encode, without BOS/EOS.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_file);
  ~SentencePieceTokenizer() override;

  std::string_view type_name() const override { return "SentencePieceTokenizer"; }
  std::int64_t vocab_size() const override { return vocab_size_; }
  // The model's </s> id, if it has one.
  std::optional<std::int32_t> eod() const override { return eod_; }
  std::unique_ptr<Encoder> make_encoder() const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

 private:
  std::string model_file_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::int64_t vocab_size_ = 0;
  std::optional<std::int32_t> eod_;
};

}  // namespace mds::text
