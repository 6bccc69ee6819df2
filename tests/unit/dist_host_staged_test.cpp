// HostStagedCommunicator on the host: host tensors pass straight to the wrapped communicator, the
// argument checks fail with one line before anything moves. Device tensors are staged in
// tests/gpu/communicators_test.cpp.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "dist/host_staged_communicator.h"
#include "tensor/device_memory.h"
#include "test_support.h"
#include "thread_communicator.h"

namespace mds {
namespace {

using dist::CommOp;
using dist::HostStagedCommunicator;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;

// Records the tensors each call receives, so a test can see what the wrapper handed over.
class RecordingCommunicator final : public dist::Communicator {
 public:
  struct Call {
    CommOp op;
    std::vector<Tensor> tensors;
    int peer_or_root = -1;
  };

  const std::string& name() const override { return name_; }
  int rank() const override { return 1; }
  int size() const override { return 3; }
  int world_rank(int group_rank) const override { return 10 + group_rank; }

  dist::Request all_reduce_async(Tensor data, dist::ReduceOp) override {
    return record(CommOp::kAllReduce, {data});
  }
  dist::Request reduce_async(Tensor data, dist::ReduceOp, int root) override {
    return record(CommOp::kReduce, {data}, root);
  }
  dist::Request reduce_scatter_async(Tensor input, Tensor output, dist::ReduceOp) override {
    return record(CommOp::kReduceScatter, {input, output});
  }
  dist::Request all_gather_async(Tensor input, Tensor output) override {
    return record(CommOp::kAllGather, {input, output});
  }
  dist::Request broadcast_async(Tensor data, int root) override {
    return record(CommOp::kBroadcast, {data}, root);
  }
  dist::Request send_async(Tensor data, int peer, int) override {
    return record(CommOp::kSend, {data}, peer);
  }
  dist::Request recv_async(Tensor data, int peer, int) override {
    return record(CommOp::kRecv, {data}, peer);
  }
  dist::Request barrier_async() override { return record(CommOp::kBarrier, {}); }
  const dist::CommStats& stats() const override { return stats_; }
  void reset_stats() override { stats_.calls[0] = 0; }

  std::vector<Call> calls;
  dist::CommStats stats_;

 private:
  dist::Request record(CommOp op, std::vector<Tensor> tensors, int peer = -1) {
    calls.push_back({op, std::move(tensors), peer});
    return {};
  }
  std::string name_ = "tp";
};

struct Wrapped {
  RecordingCommunicator* host;
  std::unique_ptr<HostStagedCommunicator> staged;
};

Wrapped wrap() {
  auto host = std::make_unique<RecordingCommunicator>();
  RecordingCommunicator* raw = host.get();
  return {raw, std::make_unique<HostStagedCommunicator>(std::move(host))};
}

TEST(HostStagedCommunicator, DescribesTheHostGroup) {
  Wrapped w = wrap();
  EXPECT_EQ(w.staged->name(), "tp");
  EXPECT_EQ(w.staged->rank(), 1);
  EXPECT_EQ(w.staged->size(), 3);
  EXPECT_EQ(w.staged->world_rank(2), 12);
  w.host->stats_.calls[0] = 5;
  EXPECT_EQ(&w.staged->stats(), &w.host->stats_);
  w.staged->reset_stats();
  EXPECT_EQ(w.host->stats_.calls[0], 0u);
}

TEST(HostStagedCommunicator, HandsHostTensorsOverUntouched) {
  Wrapped w = wrap();
  std::vector<float> a(6), b(2);
  const Tensor data(a.data(), DType::kFloat32, Shape{6});
  const Tensor out(b.data(), DType::kFloat32, Shape{2});
  w.staged->all_reduce(data);
  w.staged->reduce_scatter(data, out);
  w.staged->all_gather(out, data);
  w.staged->broadcast(data, 2);
  w.staged->send(out, 0, 7);
  w.staged->recv(out, 2, 7);
  w.staged->barrier();
  w.staged->reduce(data, 1);
  const std::vector<CommOp> expected{CommOp::kAllReduce, CommOp::kReduceScatter, CommOp::kAllGather,
                                     CommOp::kBroadcast, CommOp::kSend,          CommOp::kRecv,
                                     CommOp::kBarrier,   CommOp::kReduce};
  ASSERT_EQ(w.host->calls.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const RecordingCommunicator::Call& call = w.host->calls[i];
    EXPECT_EQ(call.op, expected[i]) << i;
    for (const Tensor& t : call.tensors) {
      EXPECT_TRUE(t.raw() == a.data() || t.raw() == b.data()) << comm_op_name(call.op);
    }
  }
  EXPECT_EQ(w.host->calls[3].peer_or_root, 2);
  EXPECT_EQ(w.host->calls[4].peer_or_root, 0);
  EXPECT_EQ(w.host->calls[5].peer_or_root, 2);
  EXPECT_EQ(w.host->calls[7].peer_or_root, 1);
}

TEST(HostStagedCommunicator, TwoTensorsMustShareOneDevice) {
  Wrapped w = wrap();
  std::vector<float> a(6), b(2);
  const Tensor host(a.data(), DType::kFloat32, Shape{6});
  // Host memory labelled cuda:0: the check must fail before anything reads it.
  const Tensor device(b.data(), DType::kFloat32, Shape{2}, {tensor::DeviceKind::kCuda, 0});
  EXPECT_EQ(testing_support::one_line_error([&] { w.staged->reduce_scatter(host, device); }),
            "dist: reduce_scatter on group 'tp': input on cpu and output on cuda:0; both must be "
            "on one device");
  EXPECT_EQ(testing_support::one_line_error([&] { w.staged->all_gather(device, host); }),
            "dist: all_gather on group 'tp': input on cuda:0 and output on cpu; both must be on "
            "one device");
  EXPECT_TRUE(w.host->calls.empty());
}

TEST(HostStagedCommunicator, DeviceTensorsWithoutADeviceFailWithOneLine) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  Wrapped w = wrap();
  std::vector<float> a(4);
  const Tensor device(a.data(), DType::kFloat32, Shape{4}, {tensor::DeviceKind::kCuda, 0});
  const std::string error = testing_support::one_line_error([&] { w.staged->all_reduce(device); });
  EXPECT_NE(error.find("cuda:0"), std::string::npos) << error;
  EXPECT_TRUE(w.host->calls.empty());
}

// Two ranks on threads: the results are the wrapped communicator's.
TEST(HostStagedCommunicator, HostCollectivesGiveTheHostResults) {
  auto mail = std::make_shared<test::Mailboxes>();
  std::vector<std::vector<float>> sums(2), gathered(2), received(2), scattered(2);
  auto rank_body = [&](int r) {
    HostStagedCommunicator c(std::make_unique<test::ThreadCommunicator>("dp", mail, r, 2));
    std::vector<float> x{1.0f + static_cast<float>(r), 0.5f * static_cast<float>(r)};
    c.all_reduce(Tensor(x.data(), DType::kFloat32, Shape{2}));
    sums[static_cast<std::size_t>(r)] = x;
    std::vector<float> own{static_cast<float>(r)}, all(2, -1.0f);
    c.all_gather(Tensor(own.data(), DType::kFloat32, Shape{1}),
                 Tensor(all.data(), DType::kFloat32, Shape{2}));
    gathered[static_cast<std::size_t>(r)] = all;
    std::vector<float> whole{1.0f, 2.0f, 3.0f + static_cast<float>(r), 4.0f}, half(2);
    c.reduce_scatter(Tensor(whole.data(), DType::kFloat32, Shape{4}),
                     Tensor(half.data(), DType::kFloat32, Shape{2}));
    scattered[static_cast<std::size_t>(r)] = half;
    std::vector<float> message{r == 0 ? 42.0f : 0.0f};
    const Tensor m(message.data(), DType::kFloat32, Shape{1});
    if (r == 0) c.send(m, 1, 3);
    if (r == 1) c.recv(m, 0, 3);
    received[static_cast<std::size_t>(r)] = message;
  };
  std::thread other(rank_body, 1);
  rank_body(0);
  other.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sums[static_cast<std::size_t>(r)], (std::vector<float>{3.0f, 0.5f}));
    EXPECT_EQ(gathered[static_cast<std::size_t>(r)], (std::vector<float>{0.0f, 1.0f}));
  }
  EXPECT_EQ(received[1], std::vector<float>{42.0f});
  EXPECT_EQ(scattered[0], (std::vector<float>{2.0f, 4.0f}));
  EXPECT_EQ(scattered[1], (std::vector<float>{7.0f, 8.0f}));
}

}  // namespace
}  // namespace mds
