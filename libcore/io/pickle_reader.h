#pragma once
#include <string_view>

#include "io/pickle_value.h"

namespace mds::io {

// A safe unpickler for checkpoint files: it interprets the pickle opcodes torch.save and Python's
// pickler emit (protocol 2, plus the protocol 3-5 opcodes a newer writer may use) and builds a
// Value tree. It executes nothing: a GLOBAL names a class, and only the classes on an explicit
// allow-list (tensors, storages, OrderedDict, argparse.Namespace, the DeepSpeed/Megatron classes of
// checkpoints.md §5) may appear; anything else is refused by name. Tensors come back as TensorRef,
// checked against their storage's declared size. Malformed input fails with base::Error naming
// `source` and the byte offset.
Value read_pickle(std::string_view bytes, std::string_view source);

// Whether `module.name` may appear in a GLOBAL (exposed for tests and error messages).
bool is_allowed_global(std::string_view module, std::string_view name);

}  // namespace mds::io
