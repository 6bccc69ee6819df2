#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/document_encoder.h"
#include "io/indexed_dataset.h"
#include "text/tokenizer.h"

namespace mds::data {

struct PreprocessOptions {
  std::vector<std::string> inputs;  // JSON-lines files, plain or compressed; "-" = stdin
  std::vector<std::string> json_keys = {"text"};
  std::string output_prefix;
  bool append_eod = false;
  io::DatasetImpl dataset_impl = io::DatasetImpl::kMmap;
  std::size_t workers = 1;
  std::uint64_t log_interval = 100;
  bool skip_invalid_lines = false;
};

struct PreprocessResult {
  struct Output {
    std::string key;
    std::string prefix;  // "<output-prefix>_<key>_document"
    std::uint64_t documents = 0;
    std::uint64_t tokens = 0;
  };
  std::vector<Output> outputs;
  io::DType dtype = io::DType::kUInt16;
  std::uint64_t lines = 0;
  std::uint64_t input_bytes = 0;
  std::uint64_t skipped_lines = 0;
  std::optional<std::string> first_skipped;  // "file:line: reason"
  double seconds = 0;
};

// "<output_prefix>_<key>_document", the name upstream gives each key's dataset.
std::string output_prefix_for_key(const std::string& output_prefix, const std::string& key);

// Tokenizes every input line into one dataset per JSON key, written atomically. The bytes written
// depend only on the inputs and options, never on the number of workers. A bad line stops the run
// with "<file>:<line>: <reason>" and leaves no dataset behind, unless skip_invalid_lines is set.
PreprocessResult preprocess(const PreprocessOptions& options, const text::Tokenizer& tokenizer);

}  // namespace mds::data
