// The device communicators on CUDA tensors. HostStagedCommunicator: two ranks on threads sharing
// cuda:0 over an in-process host group, every result bit-identical to the same operation on host
// tensors (the left fold). NcclCommunicator: one rank (a group of one: identity collectives,
// counters, host pass-through), two ranks only where two GPUs exist (sums within a tolerance: NCCL
// does not fold in rank order), and the one-line refusal of two ranks on one GPU (checked before
// NCCL is loaded). Without libnccl.so.2 the NCCL tests that need it are skipped, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "../unit/thread_communicator.h"
#include "base/error.h"
#include "dist/cuda/nccl_library.h"
#include "dist/host_staged_communicator.h"
#include "dist/nccl_communicator.h"
#include "tensor/buffer.h"
#include "tensor/device_memory.h"

namespace mds {
namespace {

using dist::CommOp;
using dist::Communicator;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

constexpr tensor::Device kCuda0{tensor::DeviceKind::kCuda, 0};

// A device copy of host values.
struct OnDevice {
  OnDevice(const std::vector<float>& values, tensor::Device device)
      : buffer(values.size() * sizeof(float), device),
        t(buffer.as(DType::kFloat32, Shape{static_cast<std::int64_t>(values.size())})) {
    tensor::copy(t, Tensor(const_cast<float*>(values.data()), DType::kFloat32, t.shape()));
  }
  std::vector<float> download() const {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    tensor::copy(Tensor(out.data(), DType::kFloat32, t.shape()), t);
    return out;
  }
  tensor::Buffer buffer;
  Tensor t;
};

// Values whose sums depend on the order of the additions.
std::vector<float> values_of(int rank, std::size_t n) {
  std::mt19937 rng(1234u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng) * std::pow(10.0f, static_cast<float>(rng() % 7) - 3.0f);
  return v;
}

Tensor host_view(std::vector<float>& v) {
  return Tensor(v.data(), DType::kFloat32, Shape{static_cast<std::int64_t>(v.size())});
}

// Runs body(rank, host group of `size`) on one thread per rank.
void on_ranks(int size, const std::function<void(int, std::unique_ptr<Communicator>)>& body) {
  auto mail = std::make_shared<test::Mailboxes>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, std::make_unique<test::ThreadCommunicator>("dp", mail, r, size));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

TEST(HostStagedOnDevice, TwoRanksOnOneGpuGetTheHostResultsExactly) {
  constexpr std::size_t kN = 4099;
  std::vector<std::vector<float>> host_sum(2), device_sum(2), host_gather(2), device_gather(2),
      received(2), broadcast(2), device_scatter(2), host_scatter(2), device_reduce(2),
      host_reduce(2), unreduced(2);
  on_ranks(2, [&](int r, std::unique_ptr<Communicator> host_group) {
    dist::HostStagedCommunicator c(std::move(host_group));
    const auto i = static_cast<std::size_t>(r);
    // all_reduce: the device result is the host fold, bit for bit.
    std::vector<float> x = values_of(r, kN);
    OnDevice d(x, kCuda0);
    c.all_reduce(host_view(x));
    host_sum[i] = x;
    dist::Request pending = c.all_reduce_async(d.t, dist::ReduceOp::kSum);
    pending.wait();
    device_sum[i] = d.download();
    // all_gather in place into the output's own slice.
    std::vector<float> all(2 * 5, -1.0f);
    for (std::size_t k = 0; k < 5; ++k) all[i * 5 + k] = static_cast<float>(10 * r) + 0.5f * k;
    OnDevice gathered(all, kCuda0);
    c.all_gather(gathered.t.narrow(r * 5, 5), gathered.t);
    std::vector<float> own(all.begin() + static_cast<std::ptrdiff_t>(i * 5),
                           all.begin() + static_cast<std::ptrdiff_t>(i * 5 + 5));
    c.all_gather(host_view(own), host_view(all));
    host_gather[i] = all;
    device_gather[i] = gathered.download();
    // reduce_scatter into the input's own slice, against the host's.
    std::vector<float> halves = values_of(10 + r, 2 * 257);
    OnDevice scatter(halves, kCuda0);
    c.reduce_scatter(scatter.t, scatter.t.narrow(r * 257, 257));
    std::vector<float> own_half(257);
    c.reduce_scatter(host_view(halves), host_view(own_half));
    const std::vector<float> device_whole = scatter.download();
    device_scatter[i].assign(device_whole.begin() + static_cast<std::ptrdiff_t>(i * 257),
                             device_whole.begin() + static_cast<std::ptrdiff_t>(i * 257 + 257));
    host_scatter[i] = own_half;
    // reduce to rank 1: its device result is the host fold; rank 0's data stays as it was.
    unreduced[i] = values_of(20 + r, 131);
    OnDevice to_root(unreduced[i], kCuda0);
    c.reduce(to_root.t, 1);
    host_reduce[i] = unreduced[i];
    c.reduce(host_view(host_reduce[i]), 1);
    device_reduce[i] = to_root.download();
    // broadcast from rank 1, then a message from rank 0 to rank 1.
    OnDevice b(std::vector<float>(3, static_cast<float>(r + 7)), kCuda0);
    c.broadcast(b.t, 1);
    broadcast[i] = b.download();
    OnDevice m(std::vector<float>(257, r == 0 ? 3.25f : 0.0f), kCuda0);
    if (r == 0) c.send(m.t, 1, 5);
    if (r == 1) c.recv(m.t, 0, 5);
    received[i] = m.download();
  });
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(device_sum[r], host_sum[r]) << "rank " << r;
    EXPECT_EQ(device_gather[r], host_gather[r]) << "rank " << r;
    EXPECT_EQ(device_scatter[r], host_scatter[r]) << "rank " << r;
    EXPECT_EQ(device_reduce[r], host_reduce[r]) << "rank " << r;
    EXPECT_EQ(broadcast[r], std::vector<float>(3, 8.0f)) << "rank " << r;
  }
  EXPECT_EQ(device_reduce[0], unreduced[0]);
  EXPECT_NE(device_reduce[1], unreduced[1]);
  EXPECT_EQ(device_sum[0], device_sum[1]);
  EXPECT_EQ(received[1], std::vector<float>(257, 3.25f));
}

// Why NCCL cannot be tested here ("" when it can): libnccl.so.2 is opened at run time, and a GPU
// machine without it reports these tests as skipped, not passed.
std::string nccl_missing() {
  try {
    dist::detail::load_nccl_library();
    return "";
  } catch (const base::Error& e) {
    return e.what();
  }
}

TEST(NcclOnDevice, OneRankGroupIsTheIdentityAndCountsItsCalls) {
  if (const std::string why = nccl_missing(); !why.empty()) GTEST_SKIP() << why;
  auto c = dist::make_nccl_communicator(
      std::make_unique<test::ThreadCommunicator>("tp", std::make_shared<test::Mailboxes>(), 0, 1),
      kCuda0, 60.0);
  EXPECT_EQ(c->name(), "tp");
  EXPECT_EQ(c->size(), 1);
  const std::vector<float> x = values_of(0, 65537);
  OnDevice d(x, kCuda0);
  c->all_reduce(d.t);
  EXPECT_EQ(d.download(), x);
  c->all_reduce(d.t, dist::ReduceOp::kMax);
  EXPECT_EQ(d.download(), x);
  OnDevice out(std::vector<float>(x.size(), 0.0f), kCuda0);
  c->reduce_scatter(d.t, out.t);
  EXPECT_EQ(out.download(), x);
  OnDevice gathered(std::vector<float>(x.size(), 0.0f), kCuda0);
  c->all_gather(d.t, gathered.t);
  EXPECT_EQ(gathered.download(), x);
  c->broadcast(d.t, 0);
  c->barrier();
  EXPECT_EQ(d.download(), x);
  const dist::CommStats& stats = c->stats();
  EXPECT_EQ(stats.count(CommOp::kAllReduce), 2u);
  EXPECT_EQ(stats.count(CommOp::kReduceScatter), 1u);
  EXPECT_EQ(stats.count(CommOp::kAllGather), 1u);
  EXPECT_EQ(stats.count(CommOp::kBarrier), 1u);
  EXPECT_EQ(stats.message(CommOp::kAllReduce), 2 * x.size() * sizeof(float));
  EXPECT_EQ(stats.total_bytes(), 0u);  // one rank sends nothing
  // Host tensors go to the host group.
  std::vector<float> h{1.0f, 2.0f};
  c->all_reduce(host_view(h));
  EXPECT_EQ(h, (std::vector<float>{1.0f, 2.0f}));
  c->reset_stats();
  EXPECT_EQ(c->stats().count(CommOp::kAllReduce), 0u);
  // A device tensor and a host one in one operation.
  try {
    c->all_gather(d.t, host_view(h));
    FAIL() << "no error";
  } catch (const base::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "dist: all_gather on group 'tp': input on cuda:0 and output on cpu; both must be on "
              "one device");
  }
}

TEST(NcclOnDevice, TwoRanksOnOneGpuAreRefusedWithOneLine) {
  std::vector<std::string> errors(2);
  auto mail = std::make_shared<test::Mailboxes>();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        dist::make_nccl_communicator(std::make_unique<test::ThreadCommunicator>("dp", mail, r, 2),
                                     kCuda0, 60.0);
      } catch (const base::Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& error : errors) {
    EXPECT_EQ(error,
              "dist: NCCL cannot run group 'dp': its ranks 0 and 1 (world ranks 0 and 1) use the "
              "same GPU, and NCCL needs one GPU per rank; start at most one rank per GPU, or pass "
              "--distributed-backend gloo to stage device tensors through host memory");
  }
}

TEST(NcclOnDevice, TwoRanksOnTwoGpusSumWithinATolerance) {
  if (tensor::cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  if (const std::string why = nccl_missing(); !why.empty()) GTEST_SKIP() << why;
  constexpr std::size_t kN = 65537;
  std::vector<float> expected = values_of(0, kN);
  const std::vector<float> second = values_of(1, kN);
  for (std::size_t k = 0; k < kN; ++k) expected[k] += second[k];
  std::vector<std::vector<float>> sums(2), received(2), scattered(2);
  on_ranks(2, [&](int r, std::unique_ptr<Communicator> host_group) {
    const tensor::Device device{tensor::DeviceKind::kCuda, r};
    auto c = dist::make_nccl_communicator(std::move(host_group), device, 60.0);
    const auto i = static_cast<std::size_t>(r);
    OnDevice d(values_of(r, kN), device);
    c->all_reduce(d.t);
    sums[i] = d.download();
    OnDevice m(std::vector<float>(1000, r == 0 ? 1.5f : 0.0f), device);
    if (r == 0) c->send(m.t, 1, 0);
    if (r == 1) c->recv(m.t, 0, 0);
    received[i] = m.download();
    OnDevice whole(values_of(r, 8), device), part(std::vector<float>(4, 0.0f), device);
    c->reduce_scatter(whole.t, part.t);
    scattered[i] = part.download();
    c->barrier();
  });
  EXPECT_EQ(sums[0], sums[1]);
  for (std::size_t k = 0; k < kN; ++k) {
    ASSERT_NEAR(sums[0][k], expected[k], 1e-6 * (std::fabs(expected[k]) + 1e-3)) << k;
  }
  EXPECT_EQ(received[1], std::vector<float>(1000, 1.5f));
  const std::vector<float> a = values_of(0, 8), b = values_of(1, 8);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(scattered[0][k], a[k] + b[k], 1e-6);
    EXPECT_NEAR(scattered[1][k], a[k + 4] + b[k + 4], 1e-6);
  }
}

}  // namespace
}  // namespace mds
