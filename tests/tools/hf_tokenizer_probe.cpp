// Test-only program for tests/e2e/hf_tokenizer_oracle_test.py: runs the PretrainedFromHF
// tokenizer over JSON lines so the test can compare it with transformers.
//   hf_tokenizer_probe NAME_OR_PATH IN.jsonl OUT.jsonl [EXTRA_IDS]
// (EXTRA_IDS: --vocab-extra-ids, upstream's <extra_id_i> additional special tokens)
// IN holds {"text": ..., "ids": [...]} lines; OUT gets a first line {"vocab_size": N, "eod": ID
// or null}, then for each input line {"ids": encode(text), "decoded": decode(ids)}.
//   hf_tokenizer_probe --classes OUT.bin
// writes the class the GPT-2 regex gives each code point 0..0x10FFFF under Oniguruma's Unicode
// (one byte: 0 other, 1 letter, 2 number, 3 space).
#include <fstream>
#include <string>

#include "base/error.h"
#include "base/program.h"
#include "config/json_document.h"
#include "text/hf_tokenizer_files.h"
#include "text/unicode_classes.h"

namespace {

using mds::config::JsonValue;

std::string ids_json(const std::vector<std::int32_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

void write_classes(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    out.put(static_cast<char>(mds::text::char_class_unicode14(cp)));
  }
  if (!out.good()) mds::base::fail("cannot write ", path);
}

void run(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--classes") {
    write_classes(argv[2]);
    return;
  }
  if (argc != 4 && argc != 5) {
    mds::base::fail("usage: hf_tokenizer_probe NAME_OR_PATH IN.jsonl OUT.jsonl [EXTRA_IDS]");
  }
  const std::int64_t extra_ids = argc == 5 ? std::stoll(argv[4]) : 0;
  const auto tokenizer =
      mds::text::load_hf_tokenizer(argv[1], mds::text::extra_id_tokens(extra_ids));
  std::ifstream in(argv[2], std::ios::binary);
  std::ofstream out(argv[3], std::ios::binary);
  if (!in || !out) mds::base::fail("cannot open ", argv[2], " or ", argv[3]);
  const auto eod = tokenizer->eod();
  out << "{\"vocab_size\": " << tokenizer->vocab_size()
      << ", \"eod\": " << (eod ? std::to_string(*eod) : std::string("null")) << "}\n";
  const auto encoder = tokenizer->make_encoder();
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const JsonValue record =
        mds::config::parse_json(line, std::string(argv[2]) + ":" + std::to_string(number));
    std::vector<std::int32_t> ids;
    encoder->encode(record.find("text")->as_string(), ids);
    std::vector<std::int32_t> to_decode;
    for (const JsonValue& id : record.find("ids")->items()) {
      to_decode.push_back(static_cast<std::int32_t>(id.as_int64()));
    }
    out << "{\"ids\": " << ids_json(ids)
        << ", \"decoded\": " << mds::config::json_quote(tokenizer->decode(to_decode)) << "}\n";
  }
  if (!out.good()) mds::base::fail("cannot write ", argv[3]);
}

}  // namespace

int main(int argc, char** argv) {
  return mds::base::run_program("hf_tokenizer_probe", [&] { run(argc, argv); });
}
