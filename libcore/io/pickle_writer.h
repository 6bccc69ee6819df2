#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "io/pickle_value.h"

namespace mds::io {

// Returns the number of elements of the storage a tensor points into (the 5th field of torch's
// persistent id). torch_file supplies it from the storages it writes.
using StorageNumel = std::function<std::int64_t(const TensorRef&)>;

// Serializes `root` as a protocol-2 pickle, opcode for opcode as Python's pickler called by
// torch.save would (memo puts after every object it memoizes, gets for repeated classes and for
// the strings torch reuses), so that files compare with torch's own. Without `storage_numel` the
// tensors' own storage_numel fields are used.
std::string write_pickle(const Value& root, const StorageNumel& storage_numel = {});

}  // namespace mds::io
