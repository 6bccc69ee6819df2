// How a backward op treats the gradient it writes (ops/matmul.h's gradient convention: `+=`).
#pragma once

namespace mds::ops {

// Add into the gradient's old values (as every gradient op here does), or overwrite them (as
// adding to zeros would, without the zeros: on a device no fill beforehand and no read of the
// old values).
enum class Dx { kAccumulate, kOverwrite };

}  // namespace mds::ops
