#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mds::dist {

enum class ReduceOp { kSum, kMax };

// Operation kinds, for byte counting and error lines.
enum class CommOp : std::uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kReduce,
};
inline constexpr std::size_t kNumCommOps = 8;
std::string_view comm_op_name(CommOp op);  // "all_reduce", "reduce_scatter", ..., "reduce"

// Per communicator (= per group), per operation kind: how many calls were started and how many
// payload bytes THIS rank handed to the transport as sends (tensor bytes only: no headers, no
// zero-byte synchronisation messages, nothing received). The volumes per call, for n ranks and
// element size s, are written out in docs/parallelism.md; e.g. reduce_scatter of n·k elements and
// all_gather of k elements each send (n−1)·k·s bytes.
// message_bytes sums DeepSpeed's comms_logger msg_size over the calls: the bytes of the tensor
// argument (all_reduce, reduce, broadcast, send, recv), of the input (k elements for all_gather,
// n·k for reduce_scatter), 0 for barrier.
// wait_seconds: wall time this rank spent blocked in wait() (the blocking forms and a dropped
// unfinished Request wait too) until the operation completed, charged to the operation waited on.
// Each started operation is waited on at most once; time spent starting it, or in test(), is not
// counted. Waiting advances every operation in flight, so work of another operation that completes
// meanwhile is charged to the one waited on.
struct CommStats {
  std::array<std::uint64_t, kNumCommOps> bytes_sent{};
  std::array<std::uint64_t, kNumCommOps> calls{};
  std::array<std::uint64_t, kNumCommOps> message_bytes{};
  std::array<double, kNumCommOps> wait_seconds{};
  std::uint64_t bytes(CommOp op) const { return bytes_sent[static_cast<std::size_t>(op)]; }
  std::uint64_t count(CommOp op) const { return calls[static_cast<std::size_t>(op)]; }
  std::uint64_t message(CommOp op) const { return message_bytes[static_cast<std::size_t>(op)]; }
  double seconds(CommOp op) const { return wait_seconds[static_cast<std::size_t>(op)]; }
  std::uint64_t total_bytes() const;
  double total_seconds() const;
};

// How an implementation completes one started operation.
class RequestImpl {
 public:
  virtual ~RequestImpl() = default;
  // Blocks until done, or stops the job with one line naming group, operation and peer once the
  // communicator's timeout passes without completion.
  virtual void wait() = 0;
  // Advances the operation without blocking; true once it is complete.
  virtual bool test() = 0;
};

// Handle of an asynchronous operation. The buffers passed to the call must stay alive and untouched
// until wait() returns (or test() returned true). A default Request is already complete. Dropping
// an unfinished Request waits for it.
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<RequestImpl> impl) : impl_(std::move(impl)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  ~Request();

  void wait();
  bool test();

 private:
  std::unique_ptr<RequestImpl> impl_;
};

// A group of ranks that talk to each other. Ranks here are group ranks (0 .. size()-1);
// world_rank() maps them for messages. Every member must call the same collectives in the same
// order with matching shapes. Reductions are deterministic: element i of the result is
// ((x_0[i] ⊕ x_1[i]) ⊕ x_2[i]) ⊕ … in group-rank order on every rank, whatever the algorithm, so
// all members get bit-identical results, equal to a serial left fold.
// Supported reduction dtypes: float32, float64, bfloat16, float16 (each step rounded to the dtype,
// computed in float), int64, int32. Gathers, broadcasts and point-to-point take any dtype.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const std::string& name() const = 0;  // "world", "tp", "dp", "pp", "mp", "embedding"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int world_rank(int group_rank) const = 0;

  // In place: every rank ends with the reduction of all ranks' `data`.
  virtual Request all_reduce_async(tensor::Tensor data, ReduceOp op) = 0;
  // In place on `root` only: it ends with the reduction of all ranks' `data` (the same left fold
  // in group-rank order); the other ranks' `data` is left as it was. Every non-root rank sends its
  // whole tensor to the root.
  virtual Request reduce_async(tensor::Tensor data, ReduceOp op, int root) = 0;
  // input holds size()·k elements (flat, viewed as size() equal slices); rank r gets the reduction
  // of slice r into `output` (k elements). `output` may alias input's slice r.
  virtual Request reduce_scatter_async(tensor::Tensor input, tensor::Tensor output,
                                       ReduceOp op) = 0;
  // input holds k elements; `output` (size()·k) gets rank r's input at slice r. `input` may be
  // output's own slice (in place, as ZeRO's flat buffers do).
  virtual Request all_gather_async(tensor::Tensor input, tensor::Tensor output) = 0;
  virtual Request broadcast_async(tensor::Tensor data, int root) = 0;
  // Point to point; messages between two ranks with the same tag arrive in order. 0 <= tag < 32768.
  virtual Request send_async(tensor::Tensor data, int peer, int tag) = 0;
  virtual Request recv_async(tensor::Tensor data, int peer, int tag) = 0;
  virtual Request barrier_async() = 0;

  virtual const CommStats& stats() const = 0;
  virtual void reset_stats() = 0;

  // Blocking forms.
  void all_reduce(tensor::Tensor data, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(data, op).wait();
  }
  void reduce(tensor::Tensor data, int root, ReduceOp op = ReduceOp::kSum) {
    reduce_async(data, op, root).wait();
  }
  void reduce_scatter(tensor::Tensor input, tensor::Tensor output, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(input, output, op).wait();
  }
  void all_gather(tensor::Tensor input, tensor::Tensor output) {
    all_gather_async(input, output).wait();
  }
  void broadcast(tensor::Tensor data, int root) { broadcast_async(data, root).wait(); }
  void send(tensor::Tensor data, int peer, int tag = 0) { send_async(data, peer, tag).wait(); }
  void recv(tensor::Tensor data, int peer, int tag = 0) { recv_async(data, peer, tag).wait(); }
  void barrier() { barrier_async().wait(); }
};

// How all_reduce splits `count` elements over n ranks (each rank reduces one chunk, then the
// chunks are gathered): chunk i has ⌊count/n⌋ elements plus one for i < count mod n.
struct Chunk {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};
Chunk all_reduce_chunk(std::int64_t count, int ranks, int index);

// Shape/dtype checks shared by implementations; fail with one line naming group and operation.
void check_reduce_dtype(std::string_view group, CommOp op, tensor::DType dtype);
void check_same_dtype(std::string_view group, CommOp op, const tensor::Tensor& a,
                      const tensor::Tensor& b);

}  // namespace mds::dist
