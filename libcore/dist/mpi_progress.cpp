#include "dist/mpi_progress.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "base/error.h"

namespace mds::dist::detail {
namespace {

// MPI counts are int: larger messages go as several pieces (both sides split identically, and
// messages with one tag between two ranks arrive in order).
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

std::size_t piece_count(std::size_t bytes) {
  return bytes == 0 ? 1 : (bytes + kMaxPiece - 1) / kMaxPiece;
}

}  // namespace

CommState::~CommState() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (collectives != MPI_COMM_NULL && collectives != MPI_COMM_WORLD) MPI_Comm_free(&collectives);
  if (point_to_point != MPI_COMM_NULL) MPI_Comm_free(&point_to_point);
}

MpiOp::MpiOp(std::shared_ptr<CommState> comm, CommOp op, std::uint64_t message_bytes)
    : comm_(std::move(comm)), op_(op) {
  comm_->stats.calls[static_cast<std::size_t>(op)] += 1;
  comm_->stats.message_bytes[static_cast<std::size_t>(op)] += message_bytes;
}

void MpiOp::post_send(MPI_Comm comm, const void* data, std::size_t bytes, int peer, int tag) {
  const auto* p = static_cast<const std::byte*>(data);
  for (std::size_t i = 0, n = piece_count(bytes); i < n; ++i) {
    const std::size_t piece = std::min(kMaxPiece, bytes - i * kMaxPiece);
    Transfer& t = transfers_.emplace_back();
    t.peer = peer;
    t.is_send = true;
    MPI_Isend(p + i * kMaxPiece, static_cast<int>(piece), MPI_BYTE, peer, tag, comm, &t.request);
  }
  comm_->stats.bytes_sent[static_cast<std::size_t>(op_)] += bytes;
}

void MpiOp::post_recv(MPI_Comm comm, void* data, std::size_t bytes, int peer, int tag) {
  auto* p = static_cast<std::byte*>(data);
  for (std::size_t i = 0, n = piece_count(bytes); i < n; ++i) {
    const std::size_t piece = std::min(kMaxPiece, bytes - i * kMaxPiece);
    Transfer& t = transfers_.emplace_back();
    t.peer = peer;
    MPI_Irecv(p + i * kMaxPiece, static_cast<int>(piece), MPI_BYTE, peer, tag, comm, &t.request);
  }
}

bool MpiOp::advance() {
  while (!done_) {
    for (Transfer& t : transfers_) {
      if (t.request == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&t.request, &flag, MPI_STATUS_IGNORE);
    }
    const bool busy = std::any_of(transfers_.begin(), transfers_.end(),
                                  [](const Transfer& t) { return t.request != MPI_REQUEST_NULL; });
    if (busy) return false;
    transfers_.clear();
    if (steps_.empty()) {
      done_ = true;
      break;
    }
    std::function<void(MpiOp&)> step = std::move(steps_.front());
    steps_.pop_front();
    step(*this);
  }
  return true;
}

std::string MpiOp::timeout_message(double waited_s) const {
  const CommState& c = *comm_;
  std::string what = "its own steps";
  // A missing message is the cause; an unfinished send only means its peer has not received yet.
  const Transfer* stuck = nullptr;
  for (const Transfer& t : transfers_) {
    if (t.request != MPI_REQUEST_NULL && (stuck == nullptr || (stuck->is_send && !t.is_send))) {
      stuck = &t;
    }
  }
  if (stuck != nullptr) {
    const std::string peer = base::cat("rank ", stuck->peer, " (world rank ",
                                       c.world_ranks[static_cast<std::size_t>(stuck->peer)], ")");
    what = stuck->is_send ? peer + " to receive a message" : "a message from " + peer;
  }
  return base::cat("mds dist: timeout: ", comm_op_name(op_), " on group '", c.name, "' (rank ",
                   c.rank, " of ", c.size, ", world rank ",
                   c.world_ranks[static_cast<std::size_t>(c.rank)], ") waited ", waited_s,
                   " s for ", what, "; stopping the job (MDS_DIST_TIMEOUT_S sets the limit)");
}

void ProgressEngine::add(std::shared_ptr<MpiOp> op) {
  if (!op->advance()) pending_.push_back(std::move(op));
}

void ProgressEngine::progress() {
  // Start order, so that steps posting new transfers do so in the same order on every rank.
  for (std::size_t i = 0; i < pending_.size(); ++i) pending_[i]->advance();
  std::erase_if(pending_, [](const std::shared_ptr<MpiOp>& op) { return op->done(); });
}

void ProgressEngine::wait(MpiOp& op) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(op.comm().timeout_s);
  for (long polls = 0;; ++polls) {
    progress();
    const std::chrono::duration<double> waited = Clock::now() - start;
    if (op.done()) {
      op.comm().stats.wait_seconds[static_cast<std::size_t>(op.kind())] += waited.count();
      return;
    }
    if (waited > limit) {
      std::fprintf(stderr, "%s\n", op.timeout_message(op.comm().timeout_s).c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    // Ranks may share cores (8 ranks on 2 in CI): give the CPU away while waiting.
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

bool MpiRequest::test() {
  engine_->progress();
  return op_->done();
}

}  // namespace mds::dist::detail
