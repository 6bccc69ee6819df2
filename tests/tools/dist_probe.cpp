// dist_probe: exercises mds::dist under mpirun for tests/e2e/dist_mpi_test.sh.
//   dist_probe collectives       every collective on the world and on the groups of every TP×PP
//                                grid the world size allows, against serial computations, plus
//                                async forms, determinism and byte counters; exit 1 on a mismatch
//   dist_probe timeout OP        group rank 0 withholds its part of OP (all_reduce on "tp", or
//                                recv on "world"); the waiting rank must stop the job
// The communication timeout comes from MDS_DIST_TIMEOUT_S (default 300 s).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "dist/grid_communicators.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "dist/process_grid.h"

namespace {

using mds::dist::Chunk;
using mds::dist::CommOp;
using mds::dist::Communicator;
using mds::dist::ReduceOp;
using mds::tensor::BFloat16;
using mds::tensor::DType;
using mds::tensor::Tensor;

struct Checker {
  int world_rank = 0;
  std::int64_t checks = 0;
  std::int64_t failures = 0;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "world rank %d: FAIL: %s\n", world_rank, what.c_str());
  }
};

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Contribution of world rank `who` to test `seed`, element i: deterministic, non-integer floats so
// that summation order matters.
template <typename T>
T value(std::uint64_t seed, int who, std::int64_t i) {
  const std::uint64_t h = mix(seed * 1000003u + static_cast<std::uint64_t>(who) * 7919u +
                              static_cast<std::uint64_t>(i));
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return static_cast<std::int64_t>(h % 2001) - 1000;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return mds::tensor::to_bfloat16(static_cast<float>(h >> 40) / 16777216.0f * 8.0f - 4.0f);
  } else {
    return static_cast<T>(static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

template <typename T>
std::vector<T> contribution(std::uint64_t seed, int who, std::int64_t count) {
  std::vector<T> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = value<T>(seed, who, i);
  return v;
}

template <typename T>
T combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const float x = mds::tensor::to_float(a), y = mds::tensor::to_float(b);
    return mds::tensor::to_bfloat16(op == ReduceOp::kSum ? x + y : (y > x ? y : x));
  } else {
    return op == ReduceOp::kSum ? static_cast<T>(a + b) : (b > a ? b : a);
  }
}

// The serial reference: left fold over group ranks 0..n-1.
template <typename T>
std::vector<T> serial_reduce(const Communicator& comm, std::uint64_t seed, std::int64_t count,
                             ReduceOp op) {
  std::vector<T> acc = contribution<T>(seed, comm.world_rank(0), count);
  for (int r = 1; r < comm.size(); ++r) {
    const std::vector<T> x = contribution<T>(seed, comm.world_rank(r), count);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = combine(op, acc[i], x[i]);
  }
  return acc;
}

template <typename T>
Tensor view(std::vector<T>& v) {
  return Tensor(v.data(), mds::tensor::dtype_of<T>(), {static_cast<std::int64_t>(v.size())});
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

class Suite {
 public:
  Suite(Communicator& comm, Checker& check, std::uint64_t seed)
      : comm_(comm), check_(check), seed_(seed), n_(comm.size()), r_(comm.rank()) {}

  std::string where(const std::string& what) const {
    return "group '" + comm_.name() + "' (rank " + std::to_string(r_) + " of " +
           std::to_string(n_) + "): " + what;
  }

  void expect_bytes(CommOp op, std::uint64_t expected, const std::string& what) {
    const std::uint64_t got = comm_.stats().bytes(op);
    check_.expect(got == expected, where(what + ": bytes sent " + std::to_string(got) +
                                         ", expected " + std::to_string(expected)));
  }

  template <typename T>
  void all_reduce(std::int64_t count, ReduceOp op) {
    const std::uint64_t seed = next_seed();
    const std::string what =
        "all_reduce " + std::string(mds::tensor::dtype_name(mds::tensor::dtype_of<T>())) +
        (op == ReduceOp::kSum ? " sum" : " max") + " of " + std::to_string(count);
    const std::vector<T> expected = serial_reduce<T>(comm_, seed, count, op);
    comm_.reset_stats();
    std::vector<T> first;
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<T> data = contribution<T>(seed, comm_.world_rank(r_), count);
      comm_.all_reduce(view(data), op);
      check_.expect(same_bits(data, expected), where(what + ": differs from the serial fold"));
      if (repeat == 0) first = data;
      check_.expect(same_bits(data, first), where(what + ": repeat not bit-identical"));
    }
    const Chunk own = mds::dist::all_reduce_chunk(count, n_, r_);
    const std::uint64_t per_call =
        n_ == 1
            ? 0
            : static_cast<std::uint64_t>((count - own.count) + (n_ - 1) * own.count) * sizeof(T);
    expect_bytes(CommOp::kAllReduce, 3 * per_call, what);
    check_.expect(comm_.stats().count(CommOp::kAllReduce) == 3, where(what + ": call count"));
  }

  // The root ends with the serial fold, the others with their own data; every non-root sends its
  // tensor once. Several in flight at once, to different roots, completed in reverse order.
  template <typename T>
  void reduce(std::int64_t count, ReduceOp op) {
    const std::string what =
        "reduce " + std::string(mds::tensor::dtype_name(mds::tensor::dtype_of<T>())) +
        (op == ReduceOp::kSum ? " sum" : " max") + " of " + std::to_string(count);
    std::vector<std::uint64_t> seeds;
    std::vector<std::vector<T>> data;
    for (int root = 0; root < n_; ++root) {
      seeds.push_back(next_seed());
      data.push_back(contribution<T>(seeds.back(), comm_.world_rank(r_), count));
    }
    comm_.reset_stats();
    std::vector<mds::dist::Request> pending;
    for (int root = 0; root < n_; ++root) {
      pending.push_back(comm_.reduce_async(view(data[static_cast<std::size_t>(root)]), op, root));
    }
    for (auto request = pending.rbegin(); request != pending.rend(); ++request) request->wait();
    for (int root = 0; root < n_; ++root) {
      const std::size_t k = static_cast<std::size_t>(root);
      const std::vector<T> expected = root == r_
                                          ? serial_reduce<T>(comm_, seeds[k], count, op)
                                          : contribution<T>(seeds[k], comm_.world_rank(r_), count);
      check_.expect(same_bits(data[k], expected),
                    where(what + " to root " + std::to_string(root) +
                          (root == r_ ? ": differs from the serial fold" : ": data changed")));
    }
    // This rank sends its tensor to every root but itself.
    expect_bytes(CommOp::kReduce, static_cast<std::uint64_t>((n_ - 1) * count) * sizeof(T), what);
    check_.expect(comm_.stats().count(CommOp::kReduce) == static_cast<std::uint64_t>(n_),
                  where(what + ": call count"));
  }

  void reduce_scatter(std::int64_t k, bool in_place) {
    const std::uint64_t seed = next_seed();
    const std::string what =
        "reduce_scatter of " + std::to_string(k) + " per rank" + (in_place ? " in place" : "");
    const std::vector<float> full = serial_reduce<float>(comm_, seed, k * n_, ReduceOp::kSum);
    std::vector<float> input = contribution<float>(seed, comm_.world_rank(r_), k * n_);
    std::vector<float> out(static_cast<std::size_t>(k));
    comm_.reset_stats();
    if (in_place) {
      Tensor in = view(input);
      comm_.reduce_scatter(in, in.narrow(r_ * k, k));
      out.assign(input.begin() + r_ * k, input.begin() + (r_ + 1) * k);
    } else {
      comm_.reduce_scatter(view(input), view(out));
    }
    const std::vector<float> mine(full.begin() + r_ * k, full.begin() + (r_ + 1) * k);
    check_.expect(same_bits(out, mine), where(what + ": differs from the serial fold"));
    expect_bytes(CommOp::kReduceScatter, static_cast<std::uint64_t>((n_ - 1) * k) * 4, what);
  }

  template <typename T>
  void all_gather(std::int64_t k, bool in_place) {
    const std::uint64_t seed = next_seed();
    const std::string what = "all_gather of " + std::to_string(k) + (in_place ? " in place" : "");
    std::vector<T> expected;
    for (int r = 0; r < n_; ++r) {
      const std::vector<T> x = contribution<T>(seed, comm_.world_rank(r), k);
      expected.insert(expected.end(), x.begin(), x.end());
    }
    std::vector<T> mine = contribution<T>(seed, comm_.world_rank(r_), k);
    std::vector<T> out(static_cast<std::size_t>(k * n_));
    comm_.reset_stats();
    if (in_place) {
      std::copy(mine.begin(), mine.end(), out.begin() + r_ * k);
      Tensor o = view(out);
      comm_.all_gather(o.narrow(r_ * k, k), o);
    } else {
      comm_.all_gather(view(mine), view(out));
    }
    check_.expect(same_bits(out, expected), where(what + ": wrong data"));
    expect_bytes(CommOp::kAllGather, static_cast<std::uint64_t>((n_ - 1) * k) * sizeof(T), what);
  }

  void broadcast(int root, std::int64_t count) {
    const std::uint64_t seed = next_seed();
    const std::string what = "broadcast from " + std::to_string(root);
    std::vector<double> data = r_ == root
                                   ? contribution<double>(seed, comm_.world_rank(root), count)
                                   : std::vector<double>(static_cast<std::size_t>(count));
    comm_.reset_stats();
    comm_.broadcast(view(data), root);
    check_.expect(same_bits(data, contribution<double>(seed, comm_.world_rank(root), count)),
                  where(what + ": wrong data"));
    expect_bytes(CommOp::kBroadcast,
                 r_ == root ? static_cast<std::uint64_t>((n_ - 1) * count) * 8 : 0, what);
  }

  void ring_send_recv(std::int64_t count) {
    const std::uint64_t seed = next_seed();
    const int next = (r_ + 1) % n_, prev = (r_ + n_ - 1) % n_;
    std::vector<float> out = contribution<float>(seed, comm_.world_rank(r_), count);
    std::vector<float> in(static_cast<std::size_t>(count));
    comm_.reset_stats();
    mds::dist::Request receive = comm_.recv_async(view(in), prev, 7);
    comm_.send(view(out), next, 7);
    receive.wait();
    check_.expect(same_bits(in, contribution<float>(seed, comm_.world_rank(prev), count)),
                  where("ring send/recv: wrong data"));
    expect_bytes(CommOp::kSend, static_cast<std::uint64_t>(count) * 4, "send");
    expect_bytes(CommOp::kRecv, 0, "recv");
  }

  void barrier() {
    comm_.reset_stats();
    comm_.barrier();
    comm_.barrier_async().wait();
    check_.expect(comm_.stats().count(CommOp::kBarrier) == 2, where("barrier call count"));
    expect_bytes(CommOp::kBarrier, 0, "barrier");
  }

  // Several operations in flight at once, completed in reverse order.
  void async_mix() {
    const std::uint64_t s1 = next_seed(), s2 = next_seed(), s3 = next_seed();
    std::vector<float> a = contribution<float>(s1, comm_.world_rank(r_), 37);
    std::vector<std::int64_t> b = contribution<std::int64_t>(s2, comm_.world_rank(r_), 11);
    std::vector<float> g = contribution<float>(s3, comm_.world_rank(r_), 3);
    std::vector<float> gathered(static_cast<std::size_t>(3 * n_));
    mds::dist::Request ra = comm_.all_reduce_async(view(a), ReduceOp::kSum);
    mds::dist::Request rb = comm_.all_reduce_async(view(b), ReduceOp::kMax);
    mds::dist::Request rg = comm_.all_gather_async(view(g), view(gathered));
    rg.wait();
    while (!rb.test()) std::this_thread::yield();
    ra.wait();
    check_.expect(same_bits(a, serial_reduce<float>(comm_, s1, 37, ReduceOp::kSum)),
                  where("async all_reduce sum"));
    check_.expect(same_bits(b, serial_reduce<std::int64_t>(comm_, s2, 11, ReduceOp::kMax)),
                  where("async all_reduce max int64"));
    bool gather_ok = true;
    for (int r = 0; r < n_; ++r) {
      const std::vector<float> x = contribution<float>(s3, comm_.world_rank(r), 3);
      gather_ok = gather_ok && std::memcmp(x.data(), gathered.data() + 3 * r, 12) == 0;
    }
    check_.expect(gather_ok, where("async all_gather"));
  }

  // ZeRO-1 step volume on a flat buffer: pad to a multiple of 2·D, reduce-scatter the gradients,
  // all-gather the updated partitions: 2·(D−1)·partition elements sent per rank.
  void zero_volume(std::int64_t params) {
    const std::int64_t align = 2 * n_;
    const std::int64_t padded = (params + align - 1) / align * align;
    const std::int64_t partition = padded / n_;
    std::vector<float> grads = contribution<float>(next_seed(), comm_.world_rank(r_), padded);
    std::vector<float> weights(static_cast<std::size_t>(padded), 1.0f);
    comm_.reset_stats();
    Tensor g = view(grads), w = view(weights);
    comm_.reduce_scatter(g, g.narrow(r_ * partition, partition));
    comm_.all_gather(w.narrow(r_ * partition, partition), w);
    const std::uint64_t expected = 2 * static_cast<std::uint64_t>((n_ - 1) * partition) * 4;
    check_.expect(comm_.stats().total_bytes() == expected,
                  where("ZeRO-1 volume: " + std::to_string(comm_.stats().total_bytes()) +
                        " bytes, expected " + std::to_string(expected)));
  }

  void run_all(bool full) {
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5},
                               std::int64_t{3 * n_ + 1}, std::int64_t{1000}}) {
      all_reduce<float>(count, ReduceOp::kSum);
    }
    all_reduce<float>(257, ReduceOp::kMax);
    all_reduce<double>(100, ReduceOp::kSum);
    all_reduce<std::int64_t>(100, ReduceOp::kSum);
    all_reduce<std::int64_t>(100, ReduceOp::kMax);
    all_reduce<BFloat16>(100, ReduceOp::kSum);
    reduce<float>(0, ReduceOp::kSum);
    reduce<float>(37, ReduceOp::kSum);
    reduce<BFloat16>(19, ReduceOp::kSum);
    reduce<std::int64_t>(5, ReduceOp::kMax);
    reduce_scatter(7, false);
    reduce_scatter(7, true);
    all_gather<float>(6, false);
    all_gather<BFloat16>(6, true);
    broadcast(n_ - 1, 33);
    ring_send_recv(19);
    barrier();
    async_mix();
    zero_volume(1001);
    if (full) {
      reduce_scatter(0, false);
      broadcast(0, 100000);
      all_reduce<float>(300000, ReduceOp::kSum);
    }
  }

 private:
  std::uint64_t next_seed() { return seed_ = mix(seed_); }

  Communicator& comm_;
  Checker& check_;
  std::uint64_t seed_;
  int n_;
  int r_;
};

int run_collectives(mds::dist::MpiCommunicator& world, Checker& check) {
  const mds::dist::LaunchInfo launch =
      mds::dist::detect_and_check_launch(world, mds::dist::process_env());
  check.expect(launch.launcher == mds::dist::Launcher::kMpirun, "launched by mpirun");
  check.expect(world.name() == "world", "world name");

  Suite(world, check, 1).run_all(true);
  const int n = world.size();
  int grids = 0;
  for (int tp = 1; tp <= n; ++tp) {
    for (int pp = 1; tp * pp <= n; ++pp) {
      if (n % (tp * pp) != 0) continue;
      ++grids;
      const mds::dist::ProcessGrid grid(n, tp, pp);
      const mds::dist::GridCommunicators comms = mds::dist::make_grid_communicators(world, grid);
      for (mds::dist::GroupKind kind :
           {mds::dist::GroupKind::kTensor, mds::dist::GroupKind::kData,
            mds::dist::GroupKind::kPipeline, mds::dist::GroupKind::kModel,
            mds::dist::GroupKind::kEmbedding}) {
        Communicator* comm = comms.get(kind);
        const std::vector<int> members = grid.group_of(kind, world.rank());
        const std::string label = "grid TP=" + std::to_string(tp) + " PP=" + std::to_string(pp) +
                                  " group " + std::string(mds::dist::group_name(kind));
        if (members.empty()) {
          check.expect(comm == nullptr, label + ": a non-member got a communicator");
          continue;
        }
        if (comm == nullptr) {
          check.expect(false, label + ": missing communicator");
          continue;
        }
        bool layout = comm->name() == mds::dist::group_name(kind) &&
                      comm->size() == static_cast<int>(members.size()) &&
                      comm->rank() == grid.membership(kind, world.rank()).position;
        for (int r = 0; r < comm->size(); ++r) {
          layout = layout && comm->world_rank(r) == members[static_cast<std::size_t>(r)];
        }
        check.expect(layout, label + ": communicator ranks differ from the ProcessGrid table");
        Suite(*comm, check, 1000u * static_cast<unsigned>(grids) + static_cast<unsigned>(kind))
            .run_all(false);
      }
    }
  }
  std::vector<std::int64_t> totals{check.checks, check.failures};
  world.all_reduce(view(totals), ReduceOp::kSum);
  if (world.rank() == 0) {
    std::printf("dist_probe: world %d, %d grids, %lld checks, %lld failed\n", n, grids,
                static_cast<long long>(totals[0]), static_cast<long long>(totals[1]));
  }
  return totals[1] == 0 ? 0 : 1;
}

int run_timeout(mds::dist::MpiCommunicator& world, const std::string& op) {
  if (world.size() < 2 || world.size() % 2 != 0) mds::base::fail("timeout needs an even world");
  std::vector<float> data(64, 1.0f);
  bool withhold = false;
  if (op == "all_reduce") {
    const mds::dist::ProcessGrid grid(world.size(), 2, 1);
    const mds::dist::GridCommunicators comms = mds::dist::make_grid_communicators(world, grid);
    withhold = world.rank() == 0;
    if (!withhold) comms.tp->all_reduce(view(data));
  } else if (op == "recv") {
    withhold = world.rank() == 0;
    if (world.rank() == 1) world.recv(view(data), 0, 3);
  } else {
    mds::base::fail("unknown timeout operation '", op, "' (all_reduce or recv)");
  }
  // Everyone else idles outside MPI; the waiting rank must stop the whole job well before this.
  std::this_thread::sleep_for(std::chrono::seconds(120));
  std::fprintf(stderr, "world rank %d: the job was not stopped%s\n", world.rank(),
               withhold ? " (withholding rank)" : "");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    mds::dist::MpiSession session;
    const double timeout = mds::dist::timeout_seconds_from_env(mds::dist::process_env(), 300);
    int rc = 2;
    {
      std::unique_ptr<mds::dist::MpiCommunicator> world =
          mds::dist::MpiCommunicator::world(timeout);
      Checker check;
      check.world_rank = world->rank();
      if (mode == "collectives") {
        rc = run_collectives(*world, check);
      } else if (mode == "timeout" && argc > 2) {
        rc = run_timeout(*world, argv[2]);
      } else {
        std::fprintf(stderr, "usage: dist_probe collectives | timeout all_reduce|recv\n");
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_probe: %s\n", e.what());
    return 1;
  }
}
