#include "io/pickle_reader.h"
#include "io/pickle_value.h"

namespace mds::io {
namespace {

struct AllowedGlobal {
  std::string_view module;
  std::string_view name;
};

// Everything a Megatron/DeepSpeed checkpoint may name (checkpoints.md §5.2-5.4). The reader never
// calls these; it only records the names, so allowing one means "expected in a checkpoint".
constexpr AllowedGlobal kAllowed[] = {
    {"torch._utils", "_rebuild_tensor_v2"},
    {"torch._utils", "_rebuild_parameter"},
    {"torch", "Size"},
    {"torch", "float32"},
    {"torch", "float16"},
    {"torch", "bfloat16"},
    {"torch", "float64"},
    {"torch", "int64"},
    {"torch", "int32"},
    {"torch", "int16"},
    {"torch", "int8"},
    {"torch", "uint8"},
    {"torch", "bool"},
    {"collections", "OrderedDict"},
    {"collections", "deque"},
    {"argparse", "Namespace"},
    {"__builtin__", "set"},
    {"builtins", "set"},
    {"__builtin__", "bytes"},
    {"builtins", "bytes"},
    // Python >= 3.11 pickles enum members as getattr(EnumClass, "name"); the class must itself be
    // allowed, and nothing is looked up.
    {"__builtin__", "getattr"},
    {"builtins", "getattr"},
    {"_codecs", "encode"},
    {"deepspeed.utils.tensor_fragment", "fragment_address"},
    {"deepspeed.runtime.bf16_optimizer", "fragment_address"},
    {"deepspeed.runtime.zero.config", "ZeroStageEnum"},
    {"deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"},
    {"deepspeed.runtime.fp16.loss_scaler", "LossScaler"},
    {"megatron.enums", "PositionEmbeddingType"},
    {"numpy.core.multiarray", "_reconstruct"},
    {"numpy._core.multiarray", "_reconstruct"},
    {"numpy", "ndarray"},
    {"numpy", "dtype"},
};

}  // namespace

bool is_allowed_global(std::string_view module, std::string_view name) {
  for (const auto& entry : kAllowed) {
    if (entry.module == module && entry.name == name) return true;
  }
  return module == "torch" && dtype_from_storage_class(name).has_value();
}

}  // namespace mds::io
