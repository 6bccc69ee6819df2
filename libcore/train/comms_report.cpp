#include "train/comms_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

namespace mds::train {
namespace {

using dist::CommOp;
using dist::CommStats;

// DeepSpeed's own names for our op kinds (its log names and the torch functions it wraps).
struct OpAlias {
  CommOp op;
  std::string_view name;
};
constexpr OpAlias kAliases[] = {
    {CommOp::kAllReduce, "all_reduce_coalesced"},
    {CommOp::kAllReduce, "inference_all_reduce"},
    {CommOp::kAllGather, "all_gather_into_tensor"},
    {CommOp::kAllGather, "all_gather_base"},
    {CommOp::kAllGather, "allgather_fn"},
    {CommOp::kReduceScatter, "reduce_scatter_tensor"},
    {CommOp::kReduceScatter, "reduce_scatter_base"},
    {CommOp::kReduceScatter, "reduce_scatter_fn"},
    {CommOp::kSend, "isend"},
    {CommOp::kRecv, "irecv"},
};

constexpr int kColumn = 20;  // DeepSpeed's f"{...: <20}"

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Left-aligned in a 20-wide column; longer text runs on, as Python's format does.
std::string column(const std::string& text) {
  if (text.size() >= static_cast<std::size_t>(kColumn)) return text;
  return text + std::string(static_cast<std::size_t>(kColumn) - text.size(), ' ');
}

std::string percent(double part, double whole) {
  return fixed(whole > 0.0 ? 100.0 * part / whole : 0.0, 2) + "%";
}

std::string per_iteration(double value, std::int64_t iterations) {
  return iterations > 0 ? format_message_size(value / static_cast<double>(iterations)) : "n/a";
}

CommStats difference(const CommStats& now, const CommStats& before) {
  CommStats out;
  for (std::size_t i = 0; i < dist::kNumCommOps; ++i) {
    out.bytes_sent[i] = now.bytes_sent[i] - before.bytes_sent[i];
    out.calls[i] = now.calls[i] - before.calls[i];
    out.message_bytes[i] = now.message_bytes[i] - before.message_bytes[i];
    out.wait_seconds[i] = now.wait_seconds[i] - before.wait_seconds[i];
  }
  return out;
}

// Drops the padding after the last column.
std::string rstrip(std::string text) {
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

std::string format_message_size(double bytes) {
  if (bytes == 0.0) return "0B";
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  int unit = static_cast<int>(std::floor(std::log(bytes) / std::log(1024.0)));
  unit = std::clamp(unit, 0, 8);
  const double rounded = std::round(bytes / std::pow(1024.0, unit) * 100.0) / 100.0;
  // Python's str(float) of a value rounded to 2 decimals: the shortest form, at least one decimal.
  std::string text = fixed(rounded, 2);
  if (text.back() == '0') text.pop_back();
  return text + " " + kUnits[unit];
}

Bandwidth comms_bandwidth(CommOp op, int group_size, double message_bytes, double seconds) {
  if (!(seconds > 0.0)) return {};
  const double n = static_cast<double>(std::max(group_size, 1));
  const double rate = message_bytes / seconds;
  Bandwidth bw;
  switch (op) {
    case CommOp::kAllReduce:
      bw = {2.0 * rate, rate * 2.0 * (n - 1.0) / n};
      break;
    case CommOp::kAllGather:
      bw = {rate * n, rate * n * (n - 1.0) / n};
      break;
    case CommOp::kReduceScatter:
      bw = {rate, rate * (n - 1.0) / n};
      break;
    case CommOp::kBroadcast:
    case CommOp::kReduce:
    case CommOp::kSend:
    case CommOp::kRecv:
    case CommOp::kBarrier:
      bw = {rate, rate};
      break;
  }
  bw.algbw_gbps *= 8.0 / 1e9;
  bw.busbw_gbps *= 8.0 / 1e9;
  return bw;
}

bool comms_op_profiled(const config::CommsLoggerConfig& config, CommOp op) {
  if (config.prof_all) return true;
  for (const std::string& name : config.prof_ops) {
    if (name == dist::comm_op_name(op)) return true;
    for (const OpAlias& alias : kAliases) {
      if (alias.op == op && alias.name == name) return true;
    }
  }
  return false;
}

std::string format_comms_summary(const CommsWindow& window,
                                 const config::CommsLoggerConfig& config) {
  const double ms_per_iteration =
      window.iterations > 0 ? 1e3 * window.seconds / static_cast<double>(window.iterations) : 0.0;
  std::string out = "comms_logger: world rank " + std::to_string(window.rank) + " of " +
                    std::to_string(window.world_size) + ", " + std::to_string(window.iterations) +
                    " iterations in " + fixed(window.seconds, 3) + " s (" +
                    fixed(ms_per_iteration, 1) + " ms/iteration); latency = time blocked in wait\n";
  out +=
      rstrip(column("Comm. Op") + column("Message Size") + column("Count") +
             column("Total Latency(ms)") + column("Avg Latency(ms)") + column("tput_avg (Gbps)") +
             column("busbw_avg (Gbps)") + column("Sent/iteration") + "Time share") +
      "\n";
  std::string group_lines;
  double total_seconds = 0.0;
  double total_bytes = 0.0;
  for (const GroupTraffic& group : window.groups) {
    std::uint64_t calls = 0;
    double seconds = 0.0;
    double sent = 0.0;
    for (std::size_t i = 0; i < dist::kNumCommOps; ++i) {
      const auto op = static_cast<CommOp>(i);
      const std::uint64_t count = group.stats.count(op);
      if (count == 0 || !comms_op_profiled(config, op)) continue;
      const double op_seconds = group.stats.seconds(op);
      const double message = static_cast<double>(group.stats.message(op));
      const double avg_message = message / static_cast<double>(count);
      const Bandwidth bw = comms_bandwidth(op, group.size, message, op_seconds);
      out += std::string(dist::comm_op_name(op)) + " | [Group: " + group.name + ", " +
             std::to_string(group.size) + " ranks]\n";
      out += rstrip(column("") + column(format_message_size(avg_message)) +
                    column(std::to_string(count)) + column(fixed(1e3 * op_seconds, 2)) +
                    column(fixed(1e3 * op_seconds / static_cast<double>(count), 2)) +
                    column(fixed(bw.algbw_gbps, 2)) + column(fixed(bw.busbw_gbps, 2)) +
                    column(per_iteration(static_cast<double>(group.stats.bytes(op)),
                                         window.iterations)) +
                    percent(op_seconds, window.seconds)) +
             "\n";
      calls += count;
      seconds += op_seconds;
      sent += static_cast<double>(group.stats.bytes(op));
    }
    if (calls == 0) continue;
    const double sent_per_iteration =
        window.iterations > 0 ? sent / static_cast<double>(window.iterations) : 0.0;
    group_lines += "comms_logger group " + group.name + " (" + std::to_string(group.size) +
                   " ranks): " + std::to_string(calls) + " calls, " + fixed(sent_per_iteration, 0) +
                   " bytes sent per iteration (" + per_iteration(sent, window.iterations) + "), " +
                   fixed(seconds, 3) + " s blocked (" + percent(seconds, window.seconds) +
                   " of the time)\n";
    total_seconds += seconds;
    total_bytes += sent;
  }
  out += group_lines;
  const double bytes_per_iteration =
      window.iterations > 0 ? total_bytes / static_cast<double>(window.iterations) : 0.0;
  out += "comms_logger total: " + fixed(total_seconds, 3) + " s blocked in communication, " +
         percent(total_seconds, window.seconds) + " of " + fixed(window.seconds, 3) + " s; " +
         fixed(bytes_per_iteration, 0) + " bytes sent per iteration\n";
  return out;
}

CommsLogger::CommsLogger(config::CommsLoggerConfig config, const dist::GridCommunicators& groups,
                         const dist::Communicator* world, std::int64_t start_iteration)
    : config_(std::move(config)), start_iteration_(start_iteration) {
  const dist::Communicator* const all[] = {groups.tp.get(), groups.pp.get(),        groups.dp.get(),
                                           groups.mp.get(), groups.embedding.get(), world};
  for (const dist::Communicator* comm : all) {
    if (comm != nullptr) tracked_.push_back({comm, comm->stats()});
  }
  if (world != nullptr) {
    rank_ = world->rank();
    world_size_ = world->size();
  }
  start_time_ = std::chrono::steady_clock::now();
}

CommsWindow CommsLogger::window(std::int64_t end_iteration) const {
  CommsWindow out;
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  out.iterations = end_iteration - start_iteration_;
  out.rank = rank_;
  out.world_size = world_size_;
  for (const Tracked& t : tracked_) {
    out.groups.push_back({t.comm->name(), t.comm->size(), difference(t.comm->stats(), t.start)});
  }
  return out;
}

void CommsLogger::report(const base::Log& log, std::int64_t end_iteration) const {
  if (!config_.enabled) return;
  std::string text = format_comms_summary(window(end_iteration), config_);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  log.info(text);
}

}  // namespace mds::train
