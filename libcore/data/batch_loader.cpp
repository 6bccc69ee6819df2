#include "data/batch_loader.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace mds::data {

void ltor_row(std::span<const std::int64_t> tokens, const BatchOptions& options,
              std::span<float> loss_mask, std::span<std::int64_t> position_ids) {
  // Upstream subtracts (i + 1 - previous EOD end) from every position after each EOD at i; the
  // result is the distance from the start of the current document.
  std::int64_t document_start = 0;
  for (std::size_t j = 0; j < tokens.size(); ++j) {
    const auto position = static_cast<std::int64_t>(j);
    const bool is_eod = tokens[j] == options.eod_token;
    position_ids[j] = options.reset_position_ids ? position - document_start : position;
    loss_mask[j] = (options.eod_mask_loss && is_eod) ? 0.0f : 1.0f;
    if (options.reset_position_ids && is_eod) document_start = position + 1;
  }
}

BatchLoader::BatchLoader(SampleSource source, BatchLoaderOptions options)
    : source_(std::move(source)), options_(options) {
  const auto& o = options_;
  const std::string& name = source_.name;
  if (!source_.sample) base::fail("dataset ", name, ": no sample function");
  if (o.micro_batch_size <= 0) base::fail("--micro-batch-size must be positive");
  if (o.data_parallel_size <= 0) base::fail("the data-parallel size must be positive");
  if (o.data_parallel_rank < 0 || o.data_parallel_rank >= o.data_parallel_size) {
    base::fail("data-parallel rank ", o.data_parallel_rank, " is not below the data-parallel size ",
               o.data_parallel_size);
  }
  if (o.seq_length <= 0) base::fail("--seq-length must be positive");
  if (o.consumed_samples < 0) base::fail("consumed samples must not be negative");
  if ((o.batch.eod_mask_loss || o.batch.reset_position_ids) && o.batch.eod_token < 0) {
    base::fail("--eod-mask-loss and --reset-position-ids need the tokenizer's EOD token");
  }
  if (source_.size <= 0) base::fail("dataset ", name, ": no sample to consume");
  if (o.consumed_samples >= source_.size) {
    base::fail("dataset ", name, ": no samples left to consume: ", o.consumed_samples,
               " consumed of ", source_.size);
  }
  const std::int64_t block = o.micro_batch_size * o.data_parallel_size;
  num_blocks_ = (source_.size - o.consumed_samples) / block;
  if (num_blocks_ == 0) {
    base::fail("dataset ", name, " is too small: ", source_.size - o.consumed_samples,
               " samples left after ", o.consumed_samples, ", fewer than one micro-batch of ",
               o.micro_batch_size, " × ", o.data_parallel_size, " data-parallel ranks");
  }
  if (o.prefetch > 0) worker_ = std::thread([this] { work(); });
}

BatchLoader::BatchLoader(SampleSource source, std::int64_t micro_batch_size,
                         std::int64_t seq_length, std::int64_t consumed_samples,
                         const BatchOptions& batch)
    : BatchLoader(std::move(source), BatchLoaderOptions{micro_batch_size, 1, 0, consumed_samples,
                                                        seq_length, batch, 2}) {}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::int64_t BatchLoader::remaining() const {
  return num_blocks_ - next_block_;
}

std::int64_t BatchLoader::consumed_samples() const {
  return options_.consumed_samples +
         next_block_ * options_.micro_batch_size * options_.data_parallel_size;
}

MicroBatchArrays BatchLoader::make_batch(std::int64_t block) const {
  const auto& o = options_;
  const std::int64_t b = o.micro_batch_size;
  const std::int64_t s = o.seq_length;
  const auto row_length = static_cast<std::size_t>(s);
  MicroBatchArrays batch;
  batch.batch_size = b;
  batch.seq_length = s;
  const auto cells = static_cast<std::size_t>(b * s);
  batch.tokens.resize(cells);
  batch.labels.resize(cells);
  batch.loss_mask.resize(cells);
  batch.position_ids.resize(cells);
  const std::int64_t first =
      o.consumed_samples + block * b * o.data_parallel_size + o.data_parallel_rank * b;
  for (std::int64_t r = 0; r < b; ++r) {
    const std::int64_t index = first + r;
    batch.sample_indices.push_back(index);
    const std::vector<std::int64_t> text = source_.sample(index);
    if (text.size() != row_length + 1) {
      base::fail("dataset ", source_.name, ": sample ", index, " has ", text.size(),
                 " tokens, expected seq_length + 1 = ", s + 1);
    }
    const auto offset = static_cast<std::size_t>(r) * row_length;
    std::copy(text.begin(), text.end() - 1, batch.tokens.begin() + static_cast<long>(offset));
    std::copy(text.begin() + 1, text.end(), batch.labels.begin() + static_cast<long>(offset));
    ltor_row(std::span(batch.tokens).subspan(offset, row_length), o.batch,
             std::span(batch.loss_mask).subspan(offset, row_length),
             std::span(batch.position_ids).subspan(offset, row_length));
  }
  return batch;
}

void BatchLoader::work() {
  while (true) {
    std::int64_t block = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] { return stop_ || queue_.size() < options_.prefetch; });
      if (stop_ || built_block_ == num_blocks_) return;
      block = built_block_++;
    }
    Slot slot;
    try {
      slot.batch = make_batch(block);
    } catch (...) {
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(slot));
    }
    ready_.notify_one();
    if (failed) return;  // the error stays queued; nothing after it is built
  }
}

MicroBatchArrays BatchLoader::next() {
  if (next_block_ >= num_blocks_) {
    base::fail("dataset ", source_.name, " is exhausted: ", consumed_samples(), " of its ",
               source_.size, " samples consumed, fewer than one micro-batch of ",
               options_.micro_batch_size, " × ", options_.data_parallel_size,
               " data-parallel ranks left");
  }
  if (!worker_.joinable()) {
    MicroBatchArrays batch = make_batch(next_block_);
    ++next_block_;
    return batch;
  }
  MicroBatchArrays batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty(); });
    // An error is left at the front, so every later call throws it again.
    if (queue_.front().error) std::rethrow_exception(queue_.front().error);
    batch = std::move(*queue_.front().batch);
    queue_.pop_front();
  }
  space_.notify_one();
  ++next_block_;
  return batch;
}

}  // namespace mds::data
