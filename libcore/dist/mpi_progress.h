#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"

// Machinery of MpiCommunicator: operations built from nonblocking point-to-point transfers, and
// the loop that advances them with a deadline. Every transfer knows its peer, so a timeout can name
// the rank that never answered.
namespace mds::dist::detail {

// What one communicator is; shared by the communicator and its in-flight operations.
struct CommState {
  std::string name;
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;  // group rank -> MPI_COMM_WORLD rank
  double timeout_s = 300;
  MPI_Comm collectives = MPI_COMM_NULL;  // collectives and point-to-point use separate contexts
  MPI_Comm point_to_point = MPI_COMM_NULL;
  int next_tag = 0;  // collectives are started in the same order on every member
  CommStats stats;

  CommState() = default;
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  ~CommState();
};

// One started operation: transfers in flight plus the steps to run, in order, each once all
// transfers posted before it have completed (a step may post further transfers).
class MpiOp {
 public:
  // Counts one call of `op` carrying `message_bytes` (CommStats::message_bytes).
  MpiOp(std::shared_ptr<CommState> comm, CommOp op, std::uint64_t message_bytes);
  MpiOp(const MpiOp&) = delete;
  MpiOp& operator=(const MpiOp&) = delete;

  // Counts `bytes` as sent by this operation's kind.
  void post_send(MPI_Comm comm, const void* data, std::size_t bytes, int peer, int tag);
  void post_recv(MPI_Comm comm, void* data, std::size_t bytes, int peer, int tag);
  void then(std::function<void(MpiOp&)> step) { steps_.push_back(std::move(step)); }

  // Tests the transfers and runs ready steps; true once nothing is left.
  bool advance();
  bool done() const { return done_; }
  // One line: what timed out, where, and which peer it waited for.
  std::string timeout_message(double waited_s) const;

  CommState& comm() { return *comm_; }
  CommOp kind() const { return op_; }
  std::vector<std::byte> scratch;

 private:
  struct Transfer {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;
    bool is_send = false;
  };

  std::shared_ptr<CommState> comm_;
  CommOp op_;
  std::vector<Transfer> transfers_;
  std::deque<std::function<void(MpiOp&)>> steps_;
  bool done_ = false;
};

// All operations in flight in this process, over every communicator. Waiting on one advances all,
// so an unfinished asynchronous operation never stalls a peer that waits on something else.
class ProgressEngine {
 public:
  void add(std::shared_ptr<MpiOp> op);
  void progress();
  // Returns once `op` is done, adding the time blocked to its kind's CommStats::wait_seconds;
  // past its communicator's timeout, prints the op's timeout line to stderr and calls MPI_Abort
  // (the job exits non-zero).
  void wait(MpiOp& op);

 private:
  std::vector<std::shared_ptr<MpiOp>> pending_;
};

// Request backed by an MpiOp.
class MpiRequest final : public RequestImpl {
 public:
  MpiRequest(std::shared_ptr<ProgressEngine> engine, std::shared_ptr<MpiOp> op)
      : engine_(std::move(engine)), op_(std::move(op)) {}
  void wait() override { engine_->wait(*op_); }
  bool test() override;

 private:
  std::shared_ptr<ProgressEngine> engine_;
  std::shared_ptr<MpiOp> op_;
};

}  // namespace mds::dist::detail
