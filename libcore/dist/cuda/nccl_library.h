#pragma once
#include <nccl.h>

#include <memory>

namespace mds::dist::detail {

// NCCL's functions, from libnccl.so.2 opened at run time: programs start (and train on the host,
// or with the host-staged backend) where NCCL is not installed, as on GPU machines whose CUDA
// toolkit lacks it; only asking for the NCCL backend needs it. The library stays loaded for the
// rest of the process (NCCL keeps threads of its own).
struct NcclLibrary {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclGetLastError) get_last_error;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclReduce) reduce;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
};

// Opens libnccl.so.2 (the loader's search path: LD_LIBRARY_PATH, then the system's) and resolves
// every function; fails with one line naming what is missing.
std::shared_ptr<const NcclLibrary> load_nccl_library();

}  // namespace mds::dist::detail
