#include "dist/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "dist/cuda/nccl_library.h"
#include "tensor/buffer.h"
#include "tensor/device_memory.h"

namespace mds::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

// One group's NCCL communicator, its stream and what its operations share.
struct NcclState {
  std::shared_ptr<const detail::NcclLibrary> nccl;
  std::unique_ptr<Communicator> host;
  tensor::Device device;
  double timeout_s = 300;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the legacy default stream before each operation
  tensor::Buffer barrier_word;  // one int32 on the device: barrier() all-reduces it
  CommStats own;                // the device operations

  NcclState() = default;
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState() {
    // Destructors report to no one; every Request was waited for before the communicator died.
    if (comm != nullptr) (void)nccl->comm_destroy(comm);
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

std::string where(const NcclState& s) {
  return "group '" + s.host->name() + "' (rank " + std::to_string(s.host->rank()) + " of " +
         std::to_string(s.host->size()) + ", " + tensor::device_name(s.device) + ")";
}

void check_cuda(cudaError_t status, const NcclState& s, const char* call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    base::fail("dist: NCCL communicator of ", where(s), ": ", call, ": ",
               cudaGetErrorString(status));
  }
}

void check_nccl(ncclResult_t status, const NcclState& s, std::string_view what) {
  if (status == ncclSuccess) return;
  const char* last = s.comm != nullptr ? s.nccl->get_last_error(s.comm) : nullptr;
  base::fail("dist: NCCL ", what, " on ", where(s), ": ", s.nccl->get_error_string(status),
             last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string());
}

ncclDataType_t reduction_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kInt64:
      return ncclInt64;
    case DType::kInt32:
      return ncclInt32;
    default:
      break;
  }
  base::fail("dist: NCCL cannot reduce dtype ", tensor::dtype_name(dtype));
}

ncclRedOp_t reduction_op(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : ncclMax;
}

bool on_host(const Tensor& t) {
  return t.device().kind == tensor::DeviceKind::kCpu;
}

std::uint64_t bytes_of(const Tensor& t, std::int64_t elements) {
  return static_cast<std::uint64_t>(elements) * tensor::dtype_size(t.dtype());
}

// Completes when the event recorded after the operation on the communicator's stream has.
class NcclRequest final : public RequestImpl {
 public:
  NcclRequest(std::shared_ptr<NcclState> state, CommOp op, cudaEvent_t done)
      : state_(std::move(state)), op_(op), done_(done) {}
  ~NcclRequest() override { (void)cudaEventDestroy(done_); }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;

  bool test() override {
    if (complete_) return true;
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, *state_, "cudaEventQuery");
    complete_ = true;
    return true;
  }

  void wait() override {
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (!test()) {
      NcclState& s = *state_;
      ncclResult_t async = ncclSuccess;
      check_nccl(s.nccl->comm_get_async_error(s.comm, &async), s, "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress) {
        check_nccl(async, s, comm_op_name(op_));
      }
      if (elapsed() > s.timeout_s) abort_on_timeout(elapsed());
      std::this_thread::yield();
    }
    state_->own.wait_seconds[static_cast<std::size_t>(op_)] += elapsed();
  }

 private:
  [[noreturn]] void abort_on_timeout(double waited_s) {
    NcclState& s = *state_;
    // Aborting frees the kernels spinning on the peers that never came, so the process can exit.
    (void)s.nccl->comm_abort(s.comm);
    s.comm = nullptr;
    base::fail("dist: timeout: ", comm_op_name(op_), " on ", where(s), " over NCCL waited ",
               waited_s, " s; stopping the job (MDS_DIST_TIMEOUT_S sets the limit)");
  }

  std::shared_ptr<NcclState> state_;
  CommOp op_;
  cudaEvent_t done_;
  bool complete_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<NcclState> state) : state_(std::move(state)) {}

  const std::string& name() const override { return state_->host->name(); }
  int rank() const override { return state_->host->rank(); }
  int size() const override { return state_->host->size(); }
  int world_rank(int group_rank) const override { return state_->host->world_rank(group_rank); }

  Request all_reduce_async(Tensor data, ReduceOp op) override {
    if (on_host(data)) return state_->host->all_reduce_async(data, op);
    check_reduce_dtype(name(), CommOp::kAllReduce, data.dtype());
    check_device(CommOp::kAllReduce, data);
    const int n = size();
    const Chunk own = all_reduce_chunk(data.numel(), n, rank());
    count(CommOp::kAllReduce, data.bytes(),
          bytes_of(data, data.numel() - own.count) + bytes_of(data, own.count * (n - 1)));
    begin();
    if (data.numel() > 0) {
      check_nccl(state_->nccl->all_reduce(
                     data.raw(), data.raw(), static_cast<std::size_t>(data.numel()),
                     reduction_type(data.dtype()), reduction_op(op), state_->comm, state_->stream),
                 *state_, "all_reduce");
    }
    return finish(CommOp::kAllReduce);
  }

  // In place on every rank (NCCL allows it); only the root's buffer receives the result.
  Request reduce_async(Tensor data, ReduceOp op, int root) override {
    if (on_host(data)) return state_->host->reduce_async(data, op, root);
    check_reduce_dtype(name(), CommOp::kReduce, data.dtype());
    check_device(CommOp::kReduce, data);
    check_peer(CommOp::kReduce, root);
    count(CommOp::kReduce, data.bytes(), rank() == root ? 0 : data.bytes());
    begin();
    if (data.numel() > 0) {
      check_nccl(
          state_->nccl->reduce(data.raw(), data.raw(), static_cast<std::size_t>(data.numel()),
                               reduction_type(data.dtype()), reduction_op(op), root, state_->comm,
                               state_->stream),
          *state_, "reduce");
    }
    return finish(CommOp::kReduce);
  }

  Request reduce_scatter_async(Tensor input, Tensor output, ReduceOp op) override {
    check_same_kind(CommOp::kReduceScatter, input, output);
    if (on_host(input)) return state_->host->reduce_scatter_async(input, output, op);
    check_same_dtype(name(), CommOp::kReduceScatter, input, output);
    check_reduce_dtype(name(), CommOp::kReduceScatter, input.dtype());
    check_device(CommOp::kReduceScatter, input);
    check_device(CommOp::kReduceScatter, output);
    const std::int64_t k = output.numel();
    if (input.numel() != k * size()) {
      base::fail("dist: reduce_scatter on group '", name(), "': input has ", input.numel(),
                 " elements, expected ", size(), " ranks x ", k, " output elements");
    }
    count(CommOp::kReduceScatter, input.bytes(), bytes_of(input, k * (size() - 1)));
    begin();
    if (k > 0) {
      check_nccl(state_->nccl->reduce_scatter(
                     input.raw(), output.raw(), static_cast<std::size_t>(k),
                     reduction_type(input.dtype()), reduction_op(op), state_->comm, state_->stream),
                 *state_, "reduce_scatter");
    }
    return finish(CommOp::kReduceScatter);
  }

  Request all_gather_async(Tensor input, Tensor output) override {
    check_same_kind(CommOp::kAllGather, input, output);
    if (on_host(input)) return state_->host->all_gather_async(input, output);
    check_same_dtype(name(), CommOp::kAllGather, input, output);
    check_device(CommOp::kAllGather, input);
    check_device(CommOp::kAllGather, output);
    const std::int64_t k = input.numel();
    if (output.numel() != k * size()) {
      base::fail("dist: all_gather on group '", name(), "': output has ", output.numel(),
                 " elements, expected ", size(), " ranks x ", k, " input elements");
    }
    count(CommOp::kAllGather, input.bytes(), bytes_of(input, k * (size() - 1)));
    begin();
    if (k > 0) {
      check_nccl(state_->nccl->all_gather(input.raw(), output.raw(), input.bytes(), ncclUint8,
                                          state_->comm, state_->stream),
                 *state_, "all_gather");
    }
    return finish(CommOp::kAllGather);
  }

  Request broadcast_async(Tensor data, int root) override {
    if (on_host(data)) return state_->host->broadcast_async(data, root);
    check_device(CommOp::kBroadcast, data);
    check_peer(CommOp::kBroadcast, root);
    count(CommOp::kBroadcast, data.bytes(),
          rank() == root ? data.bytes() * static_cast<std::uint64_t>(size() - 1) : 0);
    begin();
    if (data.bytes() > 0) {
      check_nccl(state_->nccl->broadcast(data.raw(), data.raw(), data.bytes(), ncclUint8, root,
                                         state_->comm, state_->stream),
                 *state_, "broadcast");
    }
    return finish(CommOp::kBroadcast);
  }

  Request send_async(Tensor data, int peer, int tag) override {
    if (on_host(data)) return state_->host->send_async(data, peer, tag);
    return point_to_point(CommOp::kSend, data, peer, tag);
  }

  Request recv_async(Tensor data, int peer, int tag) override {
    if (on_host(data)) return state_->host->recv_async(data, peer, tag);
    return point_to_point(CommOp::kRecv, data, peer, tag);
  }

  // NCCL has no barrier: an all-reduce of one device word, which no rank can finish before all
  // have started it.
  Request barrier_async() override {
    count(CommOp::kBarrier, 0, 0);
    begin();
    check_nccl(state_->nccl->all_reduce(state_->barrier_word.data(), state_->barrier_word.data(), 1,
                                        ncclInt32, ncclSum, state_->comm, state_->stream),
               *state_, "barrier");
    return finish(CommOp::kBarrier);
  }

  const CommStats& stats() const override {
    const CommStats& host = state_->host->stats();
    const CommStats& own = state_->own;
    for (std::size_t i = 0; i < kNumCommOps; ++i) {
      combined_.bytes_sent[i] = own.bytes_sent[i] + host.bytes_sent[i];
      combined_.calls[i] = own.calls[i] + host.calls[i];
      combined_.message_bytes[i] = own.message_bytes[i] + host.message_bytes[i];
      combined_.wait_seconds[i] = own.wait_seconds[i] + host.wait_seconds[i];
    }
    return combined_;
  }

  void reset_stats() override {
    state_->own = {};
    state_->host->reset_stats();
  }

 private:
  Request point_to_point(CommOp kind, Tensor data, int peer, int tag) {
    check_device(kind, data);
    check_peer(kind, peer);
    if (tag < 0 || tag > 32767) {
      base::fail("dist: ", comm_op_name(kind), " on group '", name(), "': tag ", tag,
                 " outside [0, 32767]");
    }
    count(kind, data.bytes(), kind == CommOp::kSend ? data.bytes() : 0);
    begin();
    if (data.bytes() > 0) {
      NcclState& s = *state_;
      check_nccl(s.nccl->group_start(), s, "ncclGroupStart");
      const ncclResult_t status =
          kind == CommOp::kSend
              ? s.nccl->send(data.raw(), data.bytes(), ncclUint8, peer, s.comm, s.stream)
              : s.nccl->recv(data.raw(), data.bytes(), ncclUint8, peer, s.comm, s.stream);
      check_nccl(status, s, comm_op_name(kind));
      check_nccl(s.nccl->group_end(), s, "ncclGroupEnd");
    }
    return finish(kind);
  }

  void check_device(CommOp op, const Tensor& t) const {
    if (!(t.device() == state_->device)) {
      base::fail("dist: ", comm_op_name(op), " on group '", name(), "': a tensor on ",
                 tensor::device_name(t.device()), ", but the NCCL communicator is on ",
                 tensor::device_name(state_->device));
    }
  }

  void check_same_kind(CommOp op, const Tensor& input, const Tensor& output) const {
    if (on_host(input) != on_host(output)) {
      base::fail("dist: ", comm_op_name(op), " on group '", name(), "': input on ",
                 tensor::device_name(input.device()), " and output on ",
                 tensor::device_name(output.device()), "; both must be on one device");
    }
  }

  void check_peer(CommOp op, int peer) const {
    if (peer < 0 || peer >= size()) {
      base::fail("dist: ", comm_op_name(op), " on group '", name(), "': rank ", peer,
                 " outside [0, ", size(), ")");
    }
  }

  void count(CommOp op, std::uint64_t message_bytes, std::uint64_t sent_bytes) {
    const auto i = static_cast<std::size_t>(op);
    CommStats& own = state_->own;
    ++own.calls[i];
    own.message_bytes[i] += message_bytes;
    if (size() > 1) own.bytes_sent[i] += sent_bytes;
  }

  // Orders the operation after the work already queued on the legacy default stream, which
  // itself waits for every blocking stream.
  void begin() {
    NcclState& s = *state_;
    if (s.comm == nullptr) base::fail("dist: NCCL communicator of ", where(s), " was aborted");
    check_cuda(cudaSetDevice(s.device.index), s, "cudaSetDevice");
    check_cuda(cudaEventRecord(s.ready, cudaStreamLegacy), s, "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(s.stream, s.ready, 0), s, "cudaStreamWaitEvent");
  }

  Request finish(CommOp op) {
    NcclState& s = *state_;
    cudaEvent_t done = nullptr;
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), s, "cudaEventCreate");
    const cudaError_t recorded = cudaEventRecord(done, s.stream);
    if (recorded != cudaSuccess) (void)cudaEventDestroy(done);
    check_cuda(recorded, s, "cudaEventRecord");
    return Request(std::make_unique<NcclRequest>(state_, op, done));
  }

  std::shared_ptr<NcclState> state_;
  mutable CommStats combined_;
};

// NCCL cannot put two ranks of one communicator on one GPU; say so before ncclCommInitRank does
// in its own words. The devices are compared by UUID, so ranks on other nodes never collide.
void refuse_shared_gpus(const NcclState& s) {
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, s.device.index), s, "cudaGetDeviceProperties");
  constexpr std::int64_t kUuid = sizeof properties.uuid.bytes;
  const int n = s.host->size();
  std::vector<std::uint8_t> mine(kUuid), all(static_cast<std::size_t>(kUuid * n));
  std::memcpy(mine.data(), properties.uuid.bytes, kUuid);
  s.host->all_gather(Tensor(mine.data(), DType::kUInt8, tensor::Shape{kUuid}),
                     Tensor(all.data(), DType::kUInt8, tensor::Shape{kUuid * n}));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (std::memcmp(all.data() + a * kUuid, all.data() + b * kUuid, kUuid) != 0) continue;
      base::fail("dist: NCCL cannot run group '", s.host->name(), "': its ranks ", a, " and ", b,
                 " (world ranks ", s.host->world_rank(a), " and ", s.host->world_rank(b),
                 ") use the same GPU, and NCCL needs one GPU per rank; start at most one rank per "
                 "GPU, or pass --distributed-backend gloo to stage device tensors through host "
                 "memory");
    }
  }
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     tensor::Device device, double timeout_s) {
  if (!host) base::fail("dist: make_nccl_communicator needs the group's host communicator");
  if (device.kind != tensor::DeviceKind::kCuda) {
    base::fail("dist: the NCCL communicator of group '", host->name(),
               "' needs a CUDA device, got ", tensor::device_name(device));
  }
  auto state = std::make_shared<NcclState>();
  state->host = std::move(host);
  state->device = device;
  state->timeout_s = timeout_s;
  NcclState& s = *state;
  check_cuda(cudaSetDevice(device.index), s, "cudaSetDevice");
  refuse_shared_gpus(s);
  s.nccl = detail::load_nccl_library();
  ncclUniqueId id{};
  if (s.host->rank() == 0) check_nccl(s.nccl->get_unique_id(&id), s, "ncclGetUniqueId");
  s.host->broadcast(Tensor(&id, DType::kUInt8, tensor::Shape{sizeof id}), 0);
  check_nccl(s.nccl->comm_init_rank(&s.comm, s.host->size(), id, s.host->rank()), s,
             "ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), s, "cudaStreamCreate");
  check_cuda(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), s, "cudaEventCreate");
  s.barrier_word = tensor::Buffer(sizeof(std::int32_t), device);
  return std::make_unique<NcclCommunicator>(std::move(state));
}

}  // namespace mds::dist
