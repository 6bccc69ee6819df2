#include "tasks/replica_items.h"

#include <vector>

namespace mds::tasks {

namespace {

// One tag per kind of message: between two ranks they arrive in order.
constexpr int kLengthTag = 71;
constexpr int kTextTag = 72;

tensor::Tensor int64_view(std::int64_t& value) {
  return tensor::Tensor(&value, tensor::DType::kInt64, {1});
}

tensor::Tensor byte_view(std::string& text) {
  return tensor::Tensor(text.data(), tensor::DType::kUInt8,
                        {static_cast<std::int64_t>(text.size())});
}

void send_text(dist::Communicator& dp, std::string text) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  dp.send(int64_view(length), 0, kLengthTag);
  if (length > 0) dp.send(byte_view(text), 0, kTextTag);
}

std::string receive_text(dist::Communicator& dp, int from) {
  std::int64_t length = 0;
  dp.recv(int64_view(length), from, kLengthTag);
  std::string text(static_cast<std::size_t>(length), '\0');
  if (length > 0) dp.recv(byte_view(text), from, kTextTag);
  return text;
}

}  // namespace

void run_items_on_replicas(
    const InferenceComms& comms, std::int64_t items,
    const std::function<std::string(std::int64_t item)>& run_item,
    const std::function<void(std::int64_t item, const std::string& text)>& write) {
  const std::int64_t replicas = comms.dp_size;
  const bool gathers = comms.tp_rank == 0 && comms.pp_rank == 0;
  for (std::int64_t first = 0; first < items; first += replicas) {
    const std::int64_t mine = first + comms.dp_rank;
    std::string text;
    if (mine < items) text = run_item(mine);
    if (!gathers) continue;
    if (comms.dp_rank != 0) {
      if (mine < items) send_text(*comms.dp, std::move(text));
      continue;
    }
    write(mine, text);
    for (std::int64_t r = 1; r < replicas && first + r < items; ++r) {
      write(first + r, receive_text(*comms.dp, static_cast<int>(r)));
    }
  }
}

}  // namespace mds::tasks
