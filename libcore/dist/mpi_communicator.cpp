#include "dist/mpi_communicator.h"

#include <cstring>

#include "base/error.h"
#include "dist/mpi_progress.h"
#include "dist/reduce.h"

namespace mds::dist {
namespace {

using detail::CommState;
using detail::MpiOp;

// Tags 0..32765 (MPI guarantees at least 32767); a collective uses tag and tag + 1.
int take_tag(CommState& state) {
  const int tag = state.next_tag;
  state.next_tag = (state.next_tag + 2) % 32766;
  return tag;
}

void check_host(const CommState& state, CommOp op, const tensor::Tensor& t) {
  if (t.device().kind != tensor::DeviceKind::kCpu) {
    base::fail("dist: ", comm_op_name(op), " on group '", state.name,
               "': the MPI communicator moves host memory; device tensors need a device "
               "communicator");
  }
}

void check_peer(const CommState& state, CommOp op, int peer) {
  if (peer < 0 || peer >= state.size) {
    base::fail("dist: ", comm_op_name(op), " on group '", state.name, "': rank ", peer,
               " outside [0, ", state.size, ")");
  }
}

std::byte* at(const tensor::Tensor& t, std::int64_t element) {
  return static_cast<std::byte*>(t.raw()) +
         element * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

std::size_t bytes_of(const tensor::Tensor& t, std::int64_t elements) {
  return static_cast<std::size_t>(elements) * dtype_size(t.dtype());
}

// Sends slice p of `input` (slices given by `slice`) to every rank p, receives everyone's slice of
// our own into op.scratch (slot per rank, our own copied in), then folds the slots in rank order
// into `out`. `out` may alias our own input slice.
template <typename SliceOf>
void post_reduce_to_owner(MpiOp& op, const tensor::Tensor& input, std::byte* out, ReduceOp rop,
                          int tag, SliceOf slice) {
  CommState& c = op.comm();
  const Chunk own = slice(c.rank);
  const std::size_t slot = bytes_of(input, own.count);
  op.scratch.resize(slot * static_cast<std::size_t>(c.size));
  if (slot > 0) {  // memcpy wants non-null pointers even for 0 bytes
    std::memcpy(op.scratch.data() + slot * static_cast<std::size_t>(c.rank), at(input, own.offset),
                slot);
  }
  for (int p = 0; p < c.size; ++p) {
    if (p == c.rank) continue;
    op.post_recv(c.collectives, op.scratch.data() + slot * static_cast<std::size_t>(p), slot, p,
                 tag);
    const Chunk theirs = slice(p);
    op.post_send(c.collectives, at(input, theirs.offset), bytes_of(input, theirs.count), p, tag);
  }
  const tensor::DType dtype = input.dtype();
  op.then([out, slot, dtype, rop, count = own.count](MpiOp& self) {
    if (slot == 0) return;
    std::memcpy(out, self.scratch.data(), slot);
    for (int r = 1; r < self.comm().size; ++r) {
      reduce_into(dtype, rop, out, self.scratch.data() + slot * static_cast<std::size_t>(r), count);
    }
  });
}

}  // namespace

MpiSession::MpiSession() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  owns_ = true;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(std::shared_ptr<CommState> state,
                                 std::shared_ptr<detail::ProgressEngine> engine)
    : state_(std::move(state)), engine_(std::move(engine)) {}

MpiCommunicator::~MpiCommunicator() = default;

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(double timeout_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) base::fail("dist: MPI is not initialized (create an MpiSession first)");
  auto state = std::make_shared<CommState>();
  state->name = "world";
  state->timeout_s = timeout_s;
  MPI_Comm_dup(MPI_COMM_WORLD, &state->collectives);
  MPI_Comm_dup(MPI_COMM_WORLD, &state->point_to_point);
  MPI_Comm_rank(state->collectives, &state->rank);
  MPI_Comm_size(state->collectives, &state->size);
  for (int r = 0; r < state->size; ++r) state->world_ranks.push_back(r);
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(std::move(state), std::make_shared<detail::ProgressEngine>()));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(std::string name, int color, int key) {
  barrier();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(state_->collectives, color < 0 ? MPI_UNDEFINED : color, key, &comm);
  if (comm == MPI_COMM_NULL) return nullptr;
  auto state = std::make_shared<CommState>();
  state->name = std::move(name);
  state->timeout_s = state_->timeout_s;
  state->collectives = comm;
  MPI_Comm_dup(comm, &state->point_to_point);
  MPI_Comm_rank(comm, &state->rank);
  MPI_Comm_size(comm, &state->size);
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> ranks(static_cast<std::size_t>(state->size));
  for (int r = 0; r < state->size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  state->world_ranks.resize(ranks.size());
  MPI_Group_translate_ranks(group, state->size, ranks.data(), world_group,
                            state->world_ranks.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(state), engine_));
}

const std::string& MpiCommunicator::name() const {
  return state_->name;
}
int MpiCommunicator::rank() const {
  return state_->rank;
}
int MpiCommunicator::size() const {
  return state_->size;
}
double MpiCommunicator::timeout_s() const {
  return state_->timeout_s;
}
int MpiCommunicator::world_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= state_->size) {
    base::fail("dist: group '", state_->name, "' has no rank ", group_rank, " (size ", state_->size,
               ")");
  }
  return state_->world_ranks[static_cast<std::size_t>(group_rank)];
}
const CommStats& MpiCommunicator::stats() const {
  return state_->stats;
}
void MpiCommunicator::reset_stats() {
  state_->stats = {};
}

Request MpiCommunicator::all_reduce_async(tensor::Tensor data, ReduceOp rop) {
  CommState& c = *state_;
  check_host(c, CommOp::kAllReduce, data);
  check_reduce_dtype(c.name, CommOp::kAllReduce, data.dtype());
  auto op = std::make_shared<MpiOp>(state_, CommOp::kAllReduce, data.bytes());
  if (c.size > 1) {
    const int tag = take_tag(c);
    const std::int64_t count = data.numel();
    const int n = c.size;
    auto slice = [count, n](int r) { return all_reduce_chunk(count, n, r); };
    const Chunk own = slice(c.rank);
    post_reduce_to_owner(*op, data, at(data, own.offset), rop, tag, slice);
    // Then every owner sends its reduced chunk to all.
    op->then([data, slice, tag](MpiOp& self) {
      CommState& s = self.comm();
      const Chunk mine = slice(s.rank);
      for (int p = 0; p < s.size; ++p) {
        if (p == s.rank) continue;
        const Chunk theirs = slice(p);
        self.post_recv(s.collectives, at(data, theirs.offset), bytes_of(data, theirs.count), p,
                       tag + 1);
        self.post_send(s.collectives, at(data, mine.offset), bytes_of(data, mine.count), p,
                       tag + 1);
      }
    });
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

// The root receives every other rank's tensor into a slot of op.scratch (its own copied in) and
// folds the slots in rank order into `data` once all have arrived.
Request MpiCommunicator::reduce_async(tensor::Tensor data, ReduceOp rop, int root) {
  CommState& c = *state_;
  check_host(c, CommOp::kReduce, data);
  check_reduce_dtype(c.name, CommOp::kReduce, data.dtype());
  check_peer(c, CommOp::kReduce, root);
  auto op = std::make_shared<MpiOp>(state_, CommOp::kReduce, data.bytes());
  if (c.size > 1) {
    const int tag = take_tag(c);
    const std::size_t slot = data.bytes();
    if (c.rank != root && slot > 0) {
      op->post_send(c.collectives, data.raw(), slot, root, tag);
    } else if (slot > 0) {
      op->scratch.resize(slot * static_cast<std::size_t>(c.size));
      std::memcpy(op->scratch.data() + slot * static_cast<std::size_t>(c.rank), data.raw(), slot);
      for (int p = 0; p < c.size; ++p) {
        if (p == c.rank) continue;
        op->post_recv(c.collectives, op->scratch.data() + slot * static_cast<std::size_t>(p), slot,
                      p, tag);
      }
      op->then([data, rop, slot](MpiOp& self) {
        std::memcpy(data.raw(), self.scratch.data(), slot);
        for (int r = 1; r < self.comm().size; ++r) {
          reduce_into(data.dtype(), rop, data.raw(),
                      self.scratch.data() + slot * static_cast<std::size_t>(r), data.numel());
        }
      });
    }
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

Request MpiCommunicator::reduce_scatter_async(tensor::Tensor input, tensor::Tensor output,
                                              ReduceOp rop) {
  CommState& c = *state_;
  check_host(c, CommOp::kReduceScatter, input);
  check_host(c, CommOp::kReduceScatter, output);
  check_same_dtype(c.name, CommOp::kReduceScatter, input, output);
  check_reduce_dtype(c.name, CommOp::kReduceScatter, input.dtype());
  const std::int64_t k = output.numel();
  if (input.numel() != k * c.size) {
    base::fail("dist: reduce_scatter on group '", c.name, "': input has ", input.numel(),
               " elements, expected ", c.size, " ranks x ", k, " output elements");
  }
  auto op = std::make_shared<MpiOp>(state_, CommOp::kReduceScatter, input.bytes());
  const int tag = c.size > 1 ? take_tag(c) : 0;
  post_reduce_to_owner(*op, input, static_cast<std::byte*>(output.raw()), rop, tag, [k](int r) {
    return Chunk{r * k, k};
  });
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

Request MpiCommunicator::all_gather_async(tensor::Tensor input, tensor::Tensor output) {
  CommState& c = *state_;
  check_host(c, CommOp::kAllGather, input);
  check_host(c, CommOp::kAllGather, output);
  check_same_dtype(c.name, CommOp::kAllGather, input, output);
  const std::int64_t k = input.numel();
  if (output.numel() != k * c.size) {
    base::fail("dist: all_gather on group '", c.name, "': output has ", output.numel(),
               " elements, expected ", c.size, " ranks x ", k, " input elements");
  }
  std::byte* own = at(output, c.rank * k);
  if (own != input.raw() && k > 0) std::memmove(own, input.raw(), bytes_of(input, k));
  auto op = std::make_shared<MpiOp>(state_, CommOp::kAllGather, input.bytes());
  if (c.size > 1) {
    const int tag = take_tag(c);
    for (int p = 0; p < c.size; ++p) {
      if (p == c.rank) continue;
      op->post_recv(c.collectives, at(output, p * k), bytes_of(input, k), p, tag);
      op->post_send(c.collectives, own, bytes_of(input, k), p, tag);
    }
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

Request MpiCommunicator::broadcast_async(tensor::Tensor data, int root) {
  CommState& c = *state_;
  check_host(c, CommOp::kBroadcast, data);
  check_peer(c, CommOp::kBroadcast, root);
  auto op = std::make_shared<MpiOp>(state_, CommOp::kBroadcast, data.bytes());
  if (c.size > 1) {
    const int tag = take_tag(c);
    if (c.rank == root) {
      for (int p = 0; p < c.size; ++p) {
        if (p != root) op->post_send(c.collectives, data.raw(), data.bytes(), p, tag);
      }
    } else {
      op->post_recv(c.collectives, data.raw(), data.bytes(), root, tag);
    }
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

Request MpiCommunicator::send_async(tensor::Tensor data, int peer, int tag) {
  return point_to_point_async(CommOp::kSend, data, peer, tag);
}

Request MpiCommunicator::recv_async(tensor::Tensor data, int peer, int tag) {
  return point_to_point_async(CommOp::kRecv, data, peer, tag);
}

Request MpiCommunicator::point_to_point_async(CommOp kind, tensor::Tensor data, int peer, int tag) {
  CommState& c = *state_;
  check_host(c, kind, data);
  check_peer(c, kind, peer);
  if (tag < 0 || tag > 32767) {
    base::fail("dist: ", comm_op_name(kind), " on group '", c.name, "': tag ", tag,
               " outside [0, 32767]");
  }
  auto op = std::make_shared<MpiOp>(state_, kind, data.bytes());
  if (kind == CommOp::kSend) {
    op->post_send(c.point_to_point, data.raw(), data.bytes(), peer, tag);
  } else {
    op->post_recv(c.point_to_point, data.raw(), data.bytes(), peer, tag);
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

Request MpiCommunicator::barrier_async() {
  CommState& c = *state_;
  auto op = std::make_shared<MpiOp>(state_, CommOp::kBarrier, 0);
  if (c.size > 1) {
    // Everyone reports to rank 0, which releases everyone once all have arrived.
    const int tag = take_tag(c);
    if (c.rank == 0) {
      for (int p = 1; p < c.size; ++p) op->post_recv(c.collectives, nullptr, 0, p, tag);
      op->then([tag](MpiOp& self) {
        for (int p = 1; p < self.comm().size; ++p) {
          self.post_send(self.comm().collectives, nullptr, 0, p, tag + 1);
        }
      });
    } else {
      op->post_send(c.collectives, nullptr, 0, 0, tag);
      op->post_recv(c.collectives, nullptr, 0, 0, tag + 1);
    }
  }
  engine_->add(op);
  return Request(std::make_unique<detail::MpiRequest>(engine_, op));
}

LaunchInfo detect_and_check_launch(const MpiCommunicator& world, const EnvLookup& env) {
  const LaunchInfo info = detect_launch(env);
  check_launch_matches_mpi(info, world.world_rank(world.rank()), world.size());
  return info;
}

}  // namespace mds::dist
