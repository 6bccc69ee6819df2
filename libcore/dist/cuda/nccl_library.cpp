#include "dist/cuda/nccl_library.h"

#include <dlfcn.h>

#include "base/error.h"

namespace mds::dist::detail {
namespace {

constexpr const char* kLibrary = "libnccl.so.2";

template <typename Function>
void resolve(void* handle, const char* symbol, Function& out) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr) {
    base::fail("dist: ", kLibrary, " has no ", symbol, " (NCCL 2.13 or newer is needed)");
  }
  out = reinterpret_cast<Function>(address);
}

}  // namespace

std::shared_ptr<const NcclLibrary> load_nccl_library() {
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    base::fail("dist: --distributed-backend nccl needs ", kLibrary, ", which cannot be loaded (",
               why != nullptr ? why : "unknown error",
               "); add its folder to LD_LIBRARY_PATH, or use --distributed-backend gloo");
  }
  auto nccl = std::make_shared<NcclLibrary>();
  resolve(handle, "ncclGetUniqueId", nccl->get_unique_id);
  resolve(handle, "ncclCommInitRank", nccl->comm_init_rank);
  resolve(handle, "ncclCommDestroy", nccl->comm_destroy);
  resolve(handle, "ncclCommAbort", nccl->comm_abort);
  resolve(handle, "ncclCommGetAsyncError", nccl->comm_get_async_error);
  resolve(handle, "ncclGetErrorString", nccl->get_error_string);
  resolve(handle, "ncclGetLastError", nccl->get_last_error);
  resolve(handle, "ncclAllReduce", nccl->all_reduce);
  resolve(handle, "ncclReduce", nccl->reduce);
  resolve(handle, "ncclReduceScatter", nccl->reduce_scatter);
  resolve(handle, "ncclAllGather", nccl->all_gather);
  resolve(handle, "ncclBroadcast", nccl->broadcast);
  resolve(handle, "ncclSend", nccl->send);
  resolve(handle, "ncclRecv", nccl->recv);
  resolve(handle, "ncclGroupStart", nccl->group_start);
  resolve(handle, "ncclGroupEnd", nccl->group_end);
  return nccl;
}

}  // namespace mds::dist::detail
