// Builds (or loads) the GPT index maps of one split of an indexed dataset, writing the .npy cache
// files next to it, and prints one JSON object: the document range, the sample count, the cache
// paths and the first sample. Upstream's log lines go to stderr. tests/e2e/gpt_index_map_test.py
// checks the files with numpy.
// Usage: gpt_index_map_probe PREFIX SPLIT train|valid|test NUM_SAMPLES SEQ_LENGTH SEED
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "base/error.h"
#include "data/dataset_split.h"
#include "data/gpt_dataset.h"
#include "io/indexed_dataset.h"

namespace {

int run(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: gpt_index_map_probe PREFIX SPLIT train|valid|test NUM_SAMPLES SEQ_LENGTH "
                 "SEED\n";
    return 2;
  }
  const std::string name = argv[3];
  const int which = name == "train" ? 0 : name == "valid" ? 1 : name == "test" ? 2 : -1;
  if (which < 0) mds::base::fail("split name must be train, valid or test, got '", name, "'");
  auto data =
      std::make_shared<const mds::io::IndexedDataset>(mds::io::IndexedDataset::open(argv[1]));
  const auto ranges =
      mds::data::split_document_ranges(argv[2], static_cast<std::int64_t>(data->num_sequences()));
  mds::data::IndexMapRequest request;
  request.name = name;
  request.data_prefix = data->prefix();
  request.documents = ranges[static_cast<std::size_t>(which)];
  request.num_samples = std::stoll(argv[4]);
  request.seq_length = std::stoll(argv[5]);
  request.seed = std::stoll(argv[6]);
  const auto dataset = mds::data::GptDataset::create(
      data, request, [](const std::string& line) { std::cerr << line << '\n'; });
  const auto paths = mds::data::index_map_paths(request);
  std::cout << "{\"range\": [" << request.documents.begin << ", " << request.documents.end
            << "], \"size\": " << dataset.size() << ", \"doc_idx\": \"" << paths.doc_idx
            << "\", \"sample_idx\": \"" << paths.sample_idx << "\", \"shuffle_idx\": \""
            << paths.shuffle_idx << "\", \"sample0\": [";
  const auto tokens = dataset.sample(0);
  for (std::size_t i = 0; i < tokens.size(); ++i) std::cout << (i ? ", " : "") << tokens[i];
  std::cout << "]}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "gpt_index_map_probe: " << error.what() << '\n';
    return 1;
  }
}
