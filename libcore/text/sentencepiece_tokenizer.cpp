#include "text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/error.h"

namespace mds::text {
namespace {

class SentencePieceEncoder final : public Encoder {
 public:
  SentencePieceEncoder(const sentencepiece::SentencePieceProcessor& processor,
                       const std::string& model_file)
      : processor_(processor), model_file_(model_file) {}

  void encode(std::string_view utf8, std::vector<std::int32_t>& ids) override {
    // Encode is const and thread-safe; the buffer is per encoder.
    const auto status = processor_.Encode(utf8, &buffer_);
    if (!status.ok()) {
      base::fail("sentencepiece model ", model_file_, ": cannot encode text: ", status.ToString());
    }
    ids.insert(ids.end(), buffer_.begin(), buffer_.end());
  }

 private:
  const sentencepiece::SentencePieceProcessor& processor_;
  const std::string& model_file_;
  std::vector<int> buffer_;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file)
    : model_file_(model_file),
      processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // libsentencepiece throws from its file reader on a directory, so look first.
  std::error_code error;
  if (!std::filesystem::is_regular_file(model_file, error)) {
    base::fail("sentencepiece model ", model_file, ": cannot load: ",
               std::filesystem::exists(model_file, error) ? "not a regular file" : "no such file");
  }
  sentencepiece::util::Status status;
  try {
    status = processor_->Load(model_file);
  } catch (const std::exception& exception) {
    base::fail("sentencepiece model ", model_file, ": cannot load: ", exception.what());
  }
  if (!status.ok()) {
    std::string message = status.ToString();
    while (!message.empty() && (message.back() == ' ' || message.back() == '\n'))
      message.pop_back();
    base::fail("sentencepiece model ", model_file, ": cannot load: ", message);
  }
  vocab_size_ = processor_->GetPieceSize();
  if (processor_->eos_id() >= 0) eod_ = processor_->eos_id();
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<Encoder> SentencePieceTokenizer::make_encoder() const {
  return std::make_unique<SentencePieceEncoder>(*processor_, model_file_);
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<int> pieces(ids.begin(), ids.end());
  for (const int id : pieces) {
    if (id < 0 || id >= vocab_size_) {
      base::fail("cannot decode token id ", id, ": not in the SentencePiece vocabulary of ",
                 model_file_, " (", vocab_size_, " pieces)");
    }
  }
  std::string text;
  const auto status = processor_->Decode(pieces, &text);
  if (!status.ok()) {
    base::fail("sentencepiece model ", model_file_, ": cannot decode: ", status.ToString());
  }
  return text;
}

}  // namespace mds::text
