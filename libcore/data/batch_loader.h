// Micro-batches for one data-parallel rank, as upstream's MegatronPretrainingSampler + DataLoader
// + get_batch_pipe produce them (data.md §5.10–§5.11, training.md §1.1 batch function, §5.11).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "data/train_datasets.h"

namespace mds::data {

// How a row of tokens becomes masks and positions. (--reset-attention-mask has no effect in
// DeepSpeed mode: every layer uses the causal mask, training.md §1.1.)
struct BatchOptions {
  std::int64_t eod_token = -1;      // tokenizer.eod; used by the two flags below
  bool eod_mask_loss = false;       // --eod-mask-loss
  bool reset_position_ids = false;  // --reset-position-ids
};

struct BatchLoaderOptions {
  std::int64_t micro_batch_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t data_parallel_rank = 0;
  // Samples the whole data-parallel group already took (consumed_train_samples of a checkpoint,
  // or consumed_valid_samples for the validation loader).
  std::int64_t consumed_samples = 0;
  std::int64_t seq_length = 0;  // each sample holds seq_length + 1 tokens
  BatchOptions batch;
  std::size_t prefetch = 2;  // micro-batches prepared ahead on a worker thread; 0: none, no thread
};

// One micro-batch of b samples, row-major [b, s] host arrays it owns.
struct MicroBatchArrays {
  std::int64_t batch_size = 0;
  std::int64_t seq_length = 0;
  std::vector<std::int64_t> sample_indices;  // dataset indices of the b rows
  std::vector<std::int64_t> tokens;          // text[:, :-1]
  std::vector<std::int64_t> labels;          // text[:, 1:]
  std::vector<float> loss_mask;              // 0 where the input token is EOD (--eod-mask-loss)
  std::vector<std::int64_t> position_ids;    // restart after each EOD (--reset-position-ids)
};

// get_ltor_masks_and_position_ids for one row of input tokens: writes loss_mask and
// position_ids (both tokens.size() long).
void ltor_row(std::span<const std::int64_t> tokens, const BatchOptions& options,
              std::span<float> loss_mask, std::span<std::int64_t> position_ids);

// Walks sample indices consumed_samples, consumed_samples + 1, ... in blocks of b·D and yields
// this rank's b of each block (positions [rank·b, (rank+1)·b)); a partial last block is dropped.
// The order is the same with or without prefetching; an error met while preparing a batch is
// thrown by the next() call that would have returned it.
class BatchLoader {
 public:
  // Fails when no full block is left (upstream's "no samples left to consume").
  BatchLoader(SampleSource source, BatchLoaderOptions options);
  // One data-parallel rank of one (D = 1), prefetching 2 micro-batches.
  BatchLoader(SampleSource source, std::int64_t micro_batch_size, std::int64_t seq_length,
              std::int64_t consumed_samples, const BatchOptions& batch);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next micro-batch; fails naming the dataset once no full block is left.
  MicroBatchArrays next();
  // Full blocks not yet returned by next().
  std::int64_t remaining() const;
  // consumed_samples plus b·D for every micro-batch returned so far.
  std::int64_t consumed_samples() const;

 private:
  struct Slot {
    std::optional<MicroBatchArrays> batch;
    std::exception_ptr error;
  };
  MicroBatchArrays make_batch(std::int64_t block) const;
  void work();

  SampleSource source_;
  BatchLoaderOptions options_;
  std::int64_t num_blocks_ = 0;   // full blocks of b·D from consumed_samples to the end
  std::int64_t next_block_ = 0;   // the block next() returns next (caller's side)
  std::int64_t built_block_ = 0;  // the block the worker prepares next (worker's side)

  mutable std::mutex mutex_;
  std::condition_variable ready_;  // worker → caller: a slot was queued
  std::condition_variable space_;  // caller → worker: a slot was taken, or stop
  std::deque<Slot> queue_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace mds::data
