#include "io/merge_datasets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "base/error.h"
#include "base/mapped_file.h"
#include "io/indexed_dataset.h"

namespace mds::io {
namespace {

using base::fail;

// A read-only descriptor closed on every path out, including errors.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) base::fail_errno("cannot open " + path);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  std::uint64_t size(const std::string& path) const {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) base::fail_errno("cannot stat " + path);
    return static_cast<std::uint64_t>(info.st_size);
  }

 private:
  int fd_;
};

// Parses "<prefix>.idx" against the size of the open "<prefix>.bin".
DatasetIndex read_index(const std::string& prefix, const InputFile& bin) {
  const base::MappedFile idx(idx_path(prefix));
  return parse_index(idx.bytes(), idx.path(), bin.size(bin_path(prefix)));
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

std::filesystem::path normalized(const std::string& path) {
  std::error_code error;
  std::filesystem::path result = std::filesystem::weakly_canonical(path, error);
  return error ? std::filesystem::path(path).lexically_normal() : result;
}

// Writing over an input would work (inputs are read before the rename), but it destroys the
// input; a merge that was meant to go elsewhere is far more likely than one meant to do that.
void refuse_output_as_input(const std::vector<std::string>& prefixes, const std::string& output) {
  for (const std::string& prefix : prefixes) {
    if (normalized(prefix) == normalized(output) || same_file(bin_path(prefix), bin_path(output)) ||
        same_file(idx_path(prefix), idx_path(output))) {
      fail("output prefix ", output, " is also the input dataset ", prefix,
           "; write the merged dataset to a new prefix");
    }
  }
}

}  // namespace

MergeSummary merge_datasets(const std::vector<std::string>& prefixes,
                            const std::string& output_prefix, const MergeObserver& observer) {
  if (prefixes.empty()) fail("no datasets to merge");
  if (output_prefix.empty()) fail("the output prefix is empty");
  refuse_output_as_input(prefixes, output_prefix);

  // Format checks first, for every input, as upstream does before reading any index.
  for (const std::string& prefix : prefixes) require_dataset_files(prefix);
  const std::string& first = prefixes.front();
  const std::optional<DatasetImpl> impl = infer_dataset_impl(first);
  if (!impl) {
    fail(idx_path(first), ": unknown dataset implementation (the file starts with neither ",
         "MMIDIDX nor TNTIDX)");
  }
  for (const std::string& prefix : prefixes) {
    const std::optional<DatasetImpl> other = infer_dataset_impl(prefix);
    if (other != impl) {
      fail("Dataset type '", other ? dataset_impl_name(*other) : "unknown", "' in file '", prefix,
           "' does not match type '", dataset_impl_name(*impl), "' from file '", first, "'");
    }
  }

  // Every index is parsed and checked against its .bin before the output exists, so a bad input
  // late in the list fails in seconds instead of after gigabytes were copied. Indexes are small
  // next to their .bin (12 bytes per sequence), and only one is held at a time.
  DType dtype = DType::kInt32;  // the legacy builder writes int32 whatever the inputs hold
  for (std::size_t k = 0; k < prefixes.size(); ++k) {
    const InputFile bin(bin_path(prefixes[k]));
    const DatasetIndex index = read_index(prefixes[k], bin);
    if (k == 0 && *impl == DatasetImpl::kMmap) dtype = index.dtype;
    if (index.dtype != dtype) {
      fail("dataset ", prefixes[k], " has dtype ", dtype_name(index.dtype), " but the merged ",
           "dataset has dtype ", dtype_name(dtype),
           *impl == DatasetImpl::kMmap ? base::cat(" (from ", first, ")")
                                       : std::string(" (legacy datasets are always int32)"),
           "; all inputs must have the same dtype");
    }
  }

  IndexedDatasetBuilder builder(output_prefix, dtype, *impl);
  for (std::size_t k = 0; k < prefixes.size(); ++k) {
    const InputFile bin(bin_path(prefixes[k]));
    const DatasetIndex index = read_index(prefixes[k], bin);
    builder.append_raw(index, bin.fd(), bin_path(prefixes[k]));
    if (observer) observer(k, prefixes[k], builder.num_sequences());
  }
  builder.finalize();

  MergeSummary summary;
  summary.datasets = prefixes.size();
  summary.documents = builder.num_documents();
  summary.sequences = builder.num_sequences();
  summary.tokens = builder.num_tokens();
  summary.bin_bytes = builder.num_tokens() * dtype_size(dtype);
  return summary;
}

}  // namespace mds::io
