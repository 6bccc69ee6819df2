#pragma once
#include <cstdint>

#include "dist/communicator.h"
#include "tensor/dtype.h"

namespace mds::dist {

// acc[i] = acc[i] ⊕ src[i] for i < count, where acc holds the fold of lower ranks. 16-bit floats
// are combined in float and rounded back at every step, as a chain of 16-bit adds would be. MAX
// propagates NaN. The dtype must pass check_reduce_dtype.
void reduce_into(tensor::DType dtype, ReduceOp op, void* acc, const void* src, std::int64_t count);

}  // namespace mds::dist
