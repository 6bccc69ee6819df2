#include "ops/gemm_tuning_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/text.h"

namespace mds::ops {
namespace {

constexpr const char* kPlatform = "platform = ";
constexpr const char* kSeparator = " | ";

}  // namespace

GemmTuningFile::GemmTuningFile(std::string path, std::string platform)
    : path_(std::move(path)), platform_(std::move(platform)) {
  if (platform_.find('\n') != std::string::npos) {
    base::fail("GEMM tuning file ", path_, ": the platform name has a line break");
  }
  load();
}

void GemmTuningFile::load() {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::file_status status = fs::status(path_, ignored);
  if (!fs::exists(status)) {  // nothing chosen yet; a choice will be written there
    const fs::path folder = fs::path(path_).parent_path();
    if (!folder.empty() && !fs::is_directory(folder, ignored)) {
      base::fail("GEMM tuning file ", path_, ": its folder ", folder.string(), " does not exist");
    }
    return;
  }
  if (!fs::is_regular_file(status)) base::fail("GEMM tuning file ", path_, ": not a regular file");
  std::ifstream in(path_);
  if (!in) base::fail("GEMM tuning file ", path_, ": cannot be read");
  std::string line;
  bool platform_seen = false;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = path_ + ":" + std::to_string(number) + ": ";
    line = base::trimmed(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(kPlatform, 0) == 0) {
      const std::string platform = line.substr(std::string(kPlatform).size());
      if (platform != platform_) {
        base::fail(where, "these choices were made on \"", platform, "\", this is \"", platform_,
                   "\" (another device or cuBLASLt names other algorithms): remove the file to "
                   "tune again");
      }
      platform_seen = true;
      continue;
    }
    if (!platform_seen) base::fail(where, "a choice before the \"platform = …\" line");
    const std::size_t first = line.find(kSeparator);
    const std::size_t second =
        first == std::string::npos ? first : line.find(kSeparator, first + 3);
    if (second == std::string::npos) {
      base::fail(where, "expected \"index | GEMM | times\", got \"", line, "\"");
    }
    const std::string index_text = line.substr(0, first);
    std::size_t used = 0;
    int index = -1;
    try {
      index = std::stoi(index_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != index_text.size() || index < 0) {
      base::fail(where, "the algorithm index \"", index_text, "\" is not a number >= 0");
    }
    const std::string key = line.substr(first + 3, second - first - 3);
    if (key.empty()) base::fail(where, "an empty GEMM description");
    if (!choices_.emplace(key, Choice{index, line.substr(second + 3)}).second) {
      base::fail(where, "a second choice for ", key);
    }
  }
  if (!platform_seen) base::fail(path_, ": no \"platform = …\" line");
}

std::optional<int> GemmTuningFile::find(const std::string& key) const {
  const auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  return it->second.index;
}

void GemmTuningFile::record(const std::string& key, int index, const std::vector<float>& times_ms) {
  if (key.empty() || key.find('\n') != std::string::npos ||
      key.find(kSeparator) != std::string::npos) {
    base::fail("GEMM tuning file ", path_, ": cannot keep the GEMM description \"", key, "\"");
  }
  std::ostringstream times;
  for (std::size_t i = 0; i < times_ms.size(); ++i) {
    char number[32];
    std::snprintf(number, sizeof number, "%s%.4f", i == 0 ? "" : " ", times_ms[i]);
    times << number;
  }
  choices_[key] = Choice{index, times.str()};
  save();
}

void GemmTuningFile::save() const {
  std::ostringstream text;
  text << "# mds GEMM algorithm choices (pretrain --gemm-tuning-file): index in cuBLASLt's\n"
       << "# heuristic order | the GEMM | ms a call of each candidate when chosen.\n"
       << "# Remove the file to tune again.\n"
       << kPlatform << platform_ << "\n";
  for (const auto& [key, choice] : choices_) {
    text << choice.index << kSeparator << key << kSeparator << choice.times << "\n";
  }
  const std::string bytes = text.str();
  base::AtomicFile file(path_);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace mds::ops
