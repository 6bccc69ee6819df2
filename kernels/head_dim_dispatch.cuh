// The head dims the attention kernels are compiled for, and the dispatch from a runtime head dim
// to the kernel instance: body(std::integral_constant<int, hn>{}).
#pragma once
#include <cstdint>
#include <type_traits>

#include "base/error.h"

namespace mds::kernels::detail {

template <typename Body>
void with_head_dim(std::int64_t hn, const char* op, Body body) {
  switch (hn) {
    case 8:
      return body(std::integral_constant<int, 8>{});
    case 16:
      return body(std::integral_constant<int, 16>{});
    case 32:
      return body(std::integral_constant<int, 32>{});
    case 64:
      return body(std::integral_constant<int, 64>{});
    case 96:
      return body(std::integral_constant<int, 96>{});
    case 128:
      return body(std::integral_constant<int, 128>{});
    default:
      base::fail("cuda: kernels::", op, ": head dim ", hn,
                 " has no kernel (8, 16, 32, 64, 96 or 128)");
  }
}

}  // namespace mds::kernels::detail
