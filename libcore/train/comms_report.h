// DeepSpeed's comms logger ("comms_logger" in the DeepSpeed config; deepspeed.comm.log_summary) for
// a training run: what each communicator moved and how long this rank waited for it, as one table
// at the end of training (docs/performance.md, "Multi-rank scaling", says where it differs from
// DeepSpeed's).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/log.h"
#include "config/deepspeed_config.h"
#include "dist/communicator.h"
#include "dist/grid_communicators.h"

namespace mds::train {

// One communicator's counters over the measured window.
struct GroupTraffic {
  std::string name;  // "tp", "dp", ...
  int size = 1;      // ranks in the group
  dist::CommStats stats;
};

// What the summary is computed from: every group's traffic plus the window it was counted in.
struct CommsWindow {
  std::vector<GroupTraffic> groups;
  double seconds = 0.0;         // wall time of the window (training)
  std::int64_t iterations = 0;  // iterations trained in it
  int rank = 0;                 // world rank whose counters these are
  int world_size = 1;
};

// DeepSpeed's convert_size: "0B" for 0, else the value in the largest unit of 1024 that keeps it
// >= 1, rounded to 2 decimals and printed as Python prints a float ("512.0 B", "1.5 KB", "24.03
// MB").
std::string format_message_size(double bytes);

// DeepSpeed's calc_bw_log for `seconds` of one op kind moving `message_bytes` (DeepSpeed's
// msg_size) over a group of `group_size` ranks, in Gbps (10^9 bits/s). all_reduce: algbw 2·S/t,
// busbw S/t·2(n−1)/n; all_gather: S·n/t and S·n/t·(n−1)/n; reduce_scatter: S/t and S/t·(n−1)/n
// (S is already the n·k input: DeepSpeed multiplies it by n once more); broadcast, send, recv,
// barrier: S/t for both. 0 when t is 0.
struct Bandwidth {
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
};
Bandwidth comms_bandwidth(dist::CommOp op, int group_size, double message_bytes, double seconds);

// Whether `op` is in the summary: prof_all, or its name (or a DeepSpeed name of the same
// operation, e.g. "all_gather_into_tensor", "isend") is in prof_ops.
bool comms_op_profiled(const config::CommsLoggerConfig& config, dist::CommOp op);

// The summary rank 0 prints: a header line, DeepSpeed's table (one record per group and op kind
// with calls, over the profiled ops) with two more columns (bytes this rank sent per iteration,
// share of the window's wall time), then one "comms_logger group ..." line per group and a
// "comms_logger total: ..." line. Each line ends with '\n'.
std::string format_comms_summary(const CommsWindow& window,
                                 const config::CommsLoggerConfig& config);

// Counts a training window: remembers every communicator's counters and the clock when built;
// window() returns the differences since then.
class CommsLogger {
 public:
  // `world` may be null (one process), as may the groups.
  CommsLogger(config::CommsLoggerConfig config, const dist::GridCommunicators& groups,
              const dist::Communicator* world, std::int64_t start_iteration);

  CommsWindow window(std::int64_t end_iteration) const;
  // Writes the summary to `log` when comms_logger is enabled; nothing otherwise.
  void report(const base::Log& log, std::int64_t end_iteration) const;

 private:
  struct Tracked {
    const dist::Communicator* comm = nullptr;
    dist::CommStats start;
  };
  config::CommsLoggerConfig config_;
  std::vector<Tracked> tracked_;
  int rank_ = 0;
  int world_size_ = 1;
  std::chrono::steady_clock::time_point start_time_;
  std::int64_t start_iteration_ = 0;
};

}  // namespace mds::train
