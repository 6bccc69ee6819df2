#include "train/comms_report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "base/error.h"
#include "config/deepspeed_config.h"

namespace mds::train {
namespace {

using dist::CommOp;
using dist::CommStats;

std::size_t at(CommOp op) {
  return static_cast<std::size_t>(op);
}

// Counters set by the test; every operation fails (the logger only reads stats).
class CountingCommunicator final : public dist::Communicator {
 public:
  CountingCommunicator(std::string name, int rank, int size)
      : name_(std::move(name)), rank_(rank), size_(size) {}
  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank(int group_rank) const override { return group_rank; }
  dist::Request all_reduce_async(tensor::Tensor, dist::ReduceOp) override { return unused(); }
  dist::Request reduce_async(tensor::Tensor, dist::ReduceOp, int) override { return unused(); }
  dist::Request reduce_scatter_async(tensor::Tensor, tensor::Tensor, dist::ReduceOp) override {
    return unused();
  }
  dist::Request all_gather_async(tensor::Tensor, tensor::Tensor) override { return unused(); }
  dist::Request broadcast_async(tensor::Tensor, int) override { return unused(); }
  dist::Request send_async(tensor::Tensor, int, int) override { return unused(); }
  dist::Request recv_async(tensor::Tensor, int, int) override { return unused(); }
  dist::Request barrier_async() override { return unused(); }
  const CommStats& stats() const override { return stats_; }
  void reset_stats() override { stats_ = {}; }

  CommStats stats_;

 private:
  dist::Request unused() const { base::fail(name_, ": no operations in this test"); }
  std::string name_;
  int rank_, size_;
};

void add_calls(CommStats& s, CommOp op, std::uint64_t calls, std::uint64_t message,
               std::uint64_t sent, double seconds) {
  s.calls[at(op)] += calls;
  s.message_bytes[at(op)] += message;
  s.bytes_sent[at(op)] += sent;
  s.wait_seconds[at(op)] += seconds;
}

config::CommsLoggerConfig enabled() {
  config::CommsLoggerConfig c;
  c.enabled = true;
  return c;
}

TEST(CommsReport, MessageSizesPrintAsDeepSpeedsConvertSize) {
  EXPECT_EQ(format_message_size(0), "0B");
  EXPECT_EQ(format_message_size(512), "512.0 B");
  EXPECT_EQ(format_message_size(1536), "1.5 KB");
  EXPECT_EQ(format_message_size(1024.0 * 1024.0), "1.0 MB");
  EXPECT_EQ(format_message_size(25198592), "24.03 MB");  // 24.0312...
  EXPECT_EQ(format_message_size(3.0 * 1024 * 1024 * 1024), "3.0 GB");
  EXPECT_EQ(format_message_size(1023.999), "1024.0 B");  // rounds as Python's round(x, 2)
}

TEST(CommsReport, BandwidthFollowsDeepSpeedsFormulasWithTheGroupSize) {
  // 10^9 bytes in 1 s = 8 Gbps.
  Bandwidth bw = comms_bandwidth(CommOp::kAllReduce, 4, 1e9, 1.0);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 16.0);                  // 2·S/t
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 12.0);                  // S/t·2(n−1)/n
  bw = comms_bandwidth(CommOp::kAllGather, 4, 1e9, 2.0);  // S is one rank's input
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 16.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 12.0);
  bw = comms_bandwidth(CommOp::kReduceScatter, 2, 1e9, 1.0);  // S is already n·k
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 8.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 4.0);
  bw = comms_bandwidth(CommOp::kSend, 2, 1e9, 4.0);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 2.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 2.0);
  bw = comms_bandwidth(CommOp::kAllReduce, 4, 1e9, 0.0);  // never waited: no rate
  EXPECT_EQ(bw.algbw_gbps, 0.0);
  EXPECT_EQ(bw.busbw_gbps, 0.0);
}

TEST(CommsReport, ProfOpsSelectsOpsByOurOrDeepSpeedsName) {
  config::CommsLoggerConfig c = enabled();
  EXPECT_TRUE(comms_op_profiled(c, CommOp::kBarrier));  // prof_all
  c.prof_all = false;
  c.prof_ops = {"all_gather_into_tensor", "all_reduce", "isend"};
  EXPECT_TRUE(comms_op_profiled(c, CommOp::kAllGather));
  EXPECT_TRUE(comms_op_profiled(c, CommOp::kAllReduce));
  EXPECT_TRUE(comms_op_profiled(c, CommOp::kSend));
  EXPECT_FALSE(comms_op_profiled(c, CommOp::kRecv));
  EXPECT_FALSE(comms_op_profiled(c, CommOp::kReduceScatter));
}

CommsWindow two_group_window() {
  CommsWindow w;
  w.seconds = 10.0;
  w.iterations = 4;
  w.rank = 0;
  w.world_size = 4;
  GroupTraffic tp{"tp", 2, {}};
  add_calls(tp.stats, CommOp::kAllReduce, 8, 8 * 1048576, 8 * 524288, 0.5);
  GroupTraffic dp{"dp", 2, {}};
  add_calls(dp.stats, CommOp::kAllReduce, 4, 4 * 16777216, 4 * 8388608, 2.0);
  add_calls(dp.stats, CommOp::kBarrier, 2, 0, 0, 0.25);
  GroupTraffic pp{"pp", 1, {}};  // no calls: left out
  w.groups = {tp, dp, pp};
  return w;
}

TEST(CommsReport, SummaryHasDeepSpeedsTableAndGroupTotals) {
  const std::string expected =
      "comms_logger: world rank 0 of 4, 4 iterations in 10.000 s (2500.0 ms/iteration); "
      "latency = time blocked in wait\n"
      "Comm. Op            Message Size        Count               Total Latency(ms)   "
      "Avg Latency(ms)     tput_avg (Gbps)     busbw_avg (Gbps)    Sent/iteration      "
      "Time share\n"
      "all_reduce | [Group: tp, 2 ranks]\n"
      "                    1.0 MB              8                   500.00              "
      "62.50               0.27                0.13                1.0 MB              5.00%\n"
      "all_reduce | [Group: dp, 2 ranks]\n"
      "                    16.0 MB             4                   2000.00             "
      "500.00              0.54                0.27                8.0 MB              20.00%\n"
      "barrier | [Group: dp, 2 ranks]\n"
      "                    0B                  2                   250.00              "
      "125.00              0.00                0.00                0B                  2.50%\n"
      "comms_logger group tp (2 ranks): 8 calls, 1048576 bytes sent per iteration (1.0 MB), "
      "0.500 s blocked (5.00% of the time)\n"
      "comms_logger group dp (2 ranks): 6 calls, 8388608 bytes sent per iteration (8.0 MB), "
      "2.250 s blocked (22.50% of the time)\n"
      "comms_logger total: 2.750 s blocked in communication, 27.50% of 10.000 s; 9437184 bytes "
      "sent per iteration\n";
  EXPECT_EQ(format_comms_summary(two_group_window(), enabled()), expected);
}

TEST(CommsReport, SummaryLeavesOutOpsNotProfiled) {
  config::CommsLoggerConfig c = enabled();
  c.prof_all = false;
  c.prof_ops = {"barrier"};
  const std::string text = format_comms_summary(two_group_window(), c);
  EXPECT_EQ(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("barrier | [Group: dp, 2 ranks]"), std::string::npos) << text;
  EXPECT_EQ(text.find("group tp"), std::string::npos) << text;
  EXPECT_NE(text.find("comms_logger group dp (2 ranks): 2 calls, 0 bytes sent per iteration (0B), "
                      "0.250 s blocked (2.50% of the time)"),
            std::string::npos)
      << text;
}

TEST(CommsReport, SummaryOfOneProcessHasNoRecords) {
  CommsWindow w;
  w.seconds = 2.0;
  w.iterations = 0;
  const std::string text = format_comms_summary(w, enabled());
  EXPECT_NE(text.find("0 iterations in 2.000 s (0.0 ms/iteration)"), std::string::npos) << text;
  EXPECT_NE(text.find("comms_logger total: 0.000 s blocked in communication, 0.00% of 2.000 s; 0 "
                      "bytes sent per iteration\n"),
            std::string::npos)
      << text;
}

TEST(CommsReport, LoggerCountsOnlyTheWindowOfEveryGroup) {
  dist::GridCommunicators groups;
  auto dp = std::make_unique<CountingCommunicator>("dp", 1, 2);
  auto tp = std::make_unique<CountingCommunicator>("tp", 0, 1);
  CountingCommunicator world("world", 1, 2);
  add_calls(dp->stats_, CommOp::kBroadcast, 3, 300, 0, 1.0);  // before training: not counted
  add_calls(world.stats_, CommOp::kBarrier, 1, 0, 0, 0.5);
  CountingCommunicator* dp_raw = dp.get();
  groups.dp = std::move(dp);
  groups.tp = std::move(tp);

  const CommsLogger logger(enabled(), groups, &world, 7);
  add_calls(dp_raw->stats_, CommOp::kAllReduce, 2, 2000, 1000, 0.125);
  add_calls(dp_raw->stats_, CommOp::kBroadcast, 1, 100, 100, 0.0625);

  const CommsWindow w = logger.window(12);
  EXPECT_EQ(w.iterations, 5);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.world_size, 2);
  EXPECT_GE(w.seconds, 0.0);
  ASSERT_EQ(w.groups.size(), 3u);  // tp, dp, world (pp, mp, embedding are null)
  EXPECT_EQ(w.groups[0].name, "tp");
  EXPECT_EQ(w.groups[1].name, "dp");
  EXPECT_EQ(w.groups[2].name, "world");
  const CommStats& s = w.groups[1].stats;
  EXPECT_EQ(w.groups[1].size, 2);
  EXPECT_EQ(s.count(CommOp::kAllReduce), 2u);
  EXPECT_EQ(s.message(CommOp::kAllReduce), 2000u);
  EXPECT_EQ(s.bytes(CommOp::kAllReduce), 1000u);
  EXPECT_EQ(s.seconds(CommOp::kAllReduce), 0.125);
  EXPECT_EQ(s.count(CommOp::kBroadcast), 1u);
  EXPECT_EQ(s.message(CommOp::kBroadcast), 100u);
  EXPECT_EQ(s.seconds(CommOp::kBroadcast), 0.0625);
  EXPECT_EQ(s.total_seconds(), 0.1875);
  EXPECT_EQ(s.total_bytes(), 1100u);
  EXPECT_EQ(w.groups[2].stats.count(CommOp::kBarrier), 0u);
}

std::string logged(const CommsLogger& logger) {
  std::FILE* out = std::tmpfile();
  EXPECT_NE(out, nullptr);
  const base::Log log("test", out, out);
  logger.report(log, 3);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  return text;
}

TEST(CommsReport, ReportPrintsOnlyWhenEnabled) {
  dist::GridCommunicators groups;
  groups.dp = std::make_unique<CountingCommunicator>("dp", 0, 2);
  EXPECT_EQ(logged(CommsLogger({}, groups, nullptr, 0)), "");
  const std::string text = logged(CommsLogger(enabled(), groups, nullptr, 0));
  EXPECT_EQ(text.rfind("comms_logger: world rank 0 of 1, 3 iterations in ", 0), 0u) << text;
  EXPECT_NE(text.find("\ncomms_logger total: 0.000 s blocked"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

std::string config_error(const std::string& json) {
  try {
    config::parse_deepspeed_config(json, "ds.json");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CommsReport, DeepSpeedConfigReadsCommsLogger) {
  const std::string base = R"({"train_batch_size": 8, "comms_logger": )";
  config::DeepSpeedConfig c = config::parse_deepspeed_config(
      base + R"({"enabled": true, "verbose": false, "prof_all": true, "debug": false}})",
      "ds.json");
  EXPECT_TRUE(c.comms_logger.enabled);
  EXPECT_TRUE(c.comms_logger.prof_all);
  EXPECT_TRUE(c.comms_logger.prof_ops.empty());
  c = config::parse_deepspeed_config(
      base + R"({"enabled": true, "prof_all": false, "prof_ops": ["all_reduce", "barrier"]}})",
      "ds.json");
  EXPECT_FALSE(c.comms_logger.prof_all);
  EXPECT_EQ(c.comms_logger.prof_ops, (std::vector<std::string>{"all_reduce", "barrier"}));
  c = config::parse_deepspeed_config(R"({"train_batch_size": 8})", "ds.json");
  EXPECT_FALSE(c.comms_logger.enabled);

  EXPECT_EQ(config_error(base + R"({"verbose": true}})"),
            "ds.json: key 'comms_logger.verbose' is not supported yet (only the end-of-training "
            "summary is)");
  EXPECT_EQ(config_error(base + R"({"debug": true}})"),
            "ds.json: key 'comms_logger.debug' is not supported yet (only the end-of-training "
            "summary is)");
  EXPECT_EQ(config_error(base + R"({"prof_ops": "all_reduce"}})"),
            "ds.json: 'comms_logger.prof_ops' must be a list of operation names, got a string");
  EXPECT_EQ(config_error(base + R"({"prof_ops": [1]}})"),
            "ds.json: 'comms_logger.prof_ops' must be a string, got an integer");
  EXPECT_EQ(config_error(base + R"({"enable": true}})"),
            "ds.json: unknown key 'comms_logger.enable'");
  EXPECT_EQ(config_error(base + R"(true})"),
            "ds.json: 'comms_logger' must be an object, got a boolean");
}

}  // namespace
}  // namespace mds::train
