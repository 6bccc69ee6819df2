// NCCL opened at run time (dist/cuda/nccl_library.h), in CUDA builds: every function resolves, and
// the two that need no GPU answer (a unique id is made from the host's network interfaces alone).
// The collectives themselves need devices: tests/gpu/communicators_test.cpp.
#include <gtest/gtest.h>

#if defined(MDS_WITH_CUDA)
#include <cstring>
#include <string>

#include "base/error.h"
#include "dist/cuda/nccl_library.h"

namespace mds {
namespace {

TEST(NcclLibrary, ResolvesEveryFunctionAndMakesUniqueIdsWithoutADevice) {
  std::shared_ptr<const dist::detail::NcclLibrary> nccl;
  try {
    nccl = dist::detail::load_nccl_library();
  } catch (const base::Error& e) {
    GTEST_SKIP() << e.what();  // this machine has no libnccl.so.2
  }
  const dist::detail::NcclLibrary& f = *nccl;
  for (const void* function :
       {reinterpret_cast<const void*>(f.get_unique_id),
        reinterpret_cast<const void*>(f.comm_init_rank),
        reinterpret_cast<const void*>(f.comm_destroy), reinterpret_cast<const void*>(f.comm_abort),
        reinterpret_cast<const void*>(f.comm_get_async_error),
        reinterpret_cast<const void*>(f.get_error_string),
        reinterpret_cast<const void*>(f.get_last_error),
        reinterpret_cast<const void*>(f.all_reduce),
        reinterpret_cast<const void*>(f.reduce_scatter),
        reinterpret_cast<const void*>(f.all_gather), reinterpret_cast<const void*>(f.broadcast),
        reinterpret_cast<const void*>(f.send), reinterpret_cast<const void*>(f.recv),
        reinterpret_cast<const void*>(f.group_start), reinterpret_cast<const void*>(f.group_end)}) {
    EXPECT_NE(function, nullptr);
  }
  ncclUniqueId a{}, b{};
  ASSERT_EQ(f.get_unique_id(&a), ncclSuccess);
  ASSERT_EQ(f.get_unique_id(&b), ncclSuccess);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_EQ(std::string(f.get_error_string(ncclSuccess)), "no error");
  EXPECT_NE(std::string(f.get_error_string(ncclInvalidArgument)), "no error");
  // Loading twice gives a working second table (dlopen counts references).
  ncclUniqueId c{};
  EXPECT_EQ(dist::detail::load_nccl_library()->get_unique_id(&c), ncclSuccess);
}

}  // namespace
}  // namespace mds
#endif
