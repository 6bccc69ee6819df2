// The .pt reader (zip directory + safe unpickler) on arbitrary bytes, also fed straight to the
// unpickler: each must either fail with base::Error or return a tree whose tensors lie inside their
// storages; writing that tree back and reading it again must give the same tree (everything the
// reader accepts, the writer can reproduce).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/pickle_reader.h"
#include "io/pickle_writer.h"
#include "io/torch_file.h"

namespace {

[[noreturn]] void invariant_broken(const char* what) {
  std::fprintf(stderr, "pt_reader_fuzz: invariant broken: %s\n", what);
  std::abort();
}

bool has_storage(const mds::io::Value& v) {
  if (v.is(mds::io::Value::Kind::kStorage)) return true;
  for (const auto* group : {&v.keys(), &v.items(), &v.args()}) {
    for (const auto& child : *group) {
      if (has_storage(child)) return true;
    }
  }
  return v.state() && has_storage(*v.state());
}

void check_round_trip(const mds::io::Value& value) {
  if (has_storage(value)) return;  // bare storages are readable but not writable
  std::string again;
  try {
    again = mds::io::write_pickle(value);
  } catch (const mds::base::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    invariant_broken("an accepted tree cannot be written");
  }
  try {
    if (!(mds::io::read_pickle(again, "again") == value))
      invariant_broken("write(read(x)) reads differently");
  } catch (const mds::base::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    invariant_broken("write(read(x)) does not read");
  }
}

void visit_tensors(const mds::io::TorchFile& file, const mds::io::Value& v) {
  if (v.is(mds::io::Value::Kind::kTensor)) {
    const auto& t = v.as_tensor();
    const std::string bytes = file.tensor_bytes(t);  // bounds-checked; ASan catches overreads
    if (bytes.size() != static_cast<std::size_t>(t.numel()) * mds::tensor::dtype_size(t.dtype)) {
      invariant_broken("tensor_bytes size");
    }
    return;
  }
  for (const auto* group : {&v.keys(), &v.items(), &v.args()}) {
    for (const auto& child : *group) visit_tensors(file, child);
  }
  if (v.state()) visit_tensors(file, *v.state());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto file = mds::io::TorchFile::from_bytes(bytes, "fuzz.pt");
    visit_tensors(file, file.root());
    check_round_trip(file.root());
    try {
      file.verify_checksums();
    } catch (const mds::base::Error&) {
    }
  } catch (const mds::base::Error&) {
  }
  try {
    check_round_trip(mds::io::read_pickle(bytes, "fuzz.pkl"));
  } catch (const mds::base::Error&) {
  }
  return 0;
}
