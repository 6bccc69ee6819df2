#include "train/optimizer_memory.h"

#include <algorithm>

#include "tensor/dtype.h"
#include "train/collective_staging.h"
#include "train/mixed_precision_optimizer.h"
#include "train/overlapped_reduce_to_owners.h"
#include "train/zero_partition.h"

namespace mds::train {
namespace {

using tensor::DType;

std::size_t bytes_of(std::int64_t numel, DType dtype) {
  return static_cast<std::size_t>(numel) * tensor::dtype_size(dtype);
}

DType weight_dtype(Precision precision) {
  return precision == Precision::kBf16   ? DType::kBFloat16
         : precision == Precision::kFp16 ? DType::kFloat16
                                         : DType::kFloat32;
}

// The three staging slots after a step: the largest request each slot served.
std::size_t staging_bytes(const ZeroLayout& layout, std::int64_t buffer_numel,
                          const OptimizerOptions& options, bool partitioned) {
  const std::int64_t d = layout.dp_size();
  const CollectiveStaging chunks(options.collective_chunk_numel, tensor::Device{});
  const std::int64_t chunk = zero_chunk_numel(layout, chunks);
  const DType comm = options.communication_dtype;
  const DType accumulator =
      options.precision == Precision::kFp16 ? DType::kFloat16 : DType::kFloat32;
  std::size_t collective = 0, widened = 0, fresh = 0;
  // overlap_comm: the stage-0/1 all-reduce is staged in the micro-batch gradients themselves;
  // stage 2 reduces pieces to their owners through a pool of its own (overlap_staging), widening
  // them in the widened slot as the reduce-scatter would.
  const bool overlapped = options.overlap_reduction && d > 1;
  if (options.zero_stage == 0 && d > 1 && comm != accumulator && !overlapped) {
    collective = bytes_of(std::min(chunks.all_reduce_chunk(d), buffer_numel), comm);
  }
  if (options.zero_stage >= 1 && !(overlapped && options.zero_stage == 1)) {
    // the reduce-scatter
    if (!overlapped) collective = std::max(collective, bytes_of(d * chunk, comm));
    if (comm != DType::kFloat32) widened = bytes_of(chunk, DType::kFloat32);
    if (options.zero_stage == 1 && accumulator != DType::kFloat32) {
      fresh = bytes_of(chunk, accumulator);
    }
  }
  if (partitioned) {  // the all-gather of the updated weights
    collective = std::max(collective, bytes_of(d * chunk, weight_dtype(options.precision)));
  }
  return collective + widened + fresh;
}

}  // namespace

std::vector<BufferBytes> plan_optimizer_memory(const model::ParamTable& table, std::int64_t dp_size,
                                               const OptimizerOptions& options) {
  const ZeroLayout layout(table, dp_size);
  const std::int64_t whole = table.buffer_numel();
  const std::int64_t partition = layout.partition_numel();
  const bool partitioned = options.precision == Precision::kBf16 || options.zero_stage >= 1;
  const bool fp16 = options.precision == Precision::kFp16;
  const DType accumulator = fp16 ? DType::kFloat16 : DType::kFloat32;
  // Unpartitioned state is a table-layout buffer, partitioned state this rank's partitions.
  const std::int64_t state = partitioned ? partition : whole;

  std::vector<BufferBytes> buffers;
  const auto add = [&buffers](std::string_view name, std::size_t bytes) {
    if (bytes > 0) buffers.push_back({name, bytes});
  };
  add("weights", bytes_of(whole, weight_dtype(options.precision)));
  if (options.precision != Precision::kFp32 && options.fp32_compute_copy) {
    add("compute", bytes_of(whole, DType::kFloat32));
  }
  add("micro_grads", bytes_of(partitioned ? std::max(whole, partition) : whole, DType::kFloat32));
  if (options.zero_stage < 2) add("grad_accumulator", bytes_of(whole, accumulator));
  if (options.zero_stage == 2) {
    add("partition_accumulator", bytes_of(std::max<std::int64_t>(partition, 1), accumulator));
  }
  if (partitioned || fp16) add("master", bytes_of(state, DType::kFloat32));
  add("exp_avg", bytes_of(state, DType::kFloat32));
  add("exp_avg_sq", bytes_of(state, DType::kFloat32));
  add("staging", staging_bytes(layout, whole, options, partitioned));
  if (options.overlap_reduction && options.zero_stage == 2 && dp_size > 1) {
    const CollectiveStaging chunks(options.collective_chunk_numel, tensor::Device{});
    add("overlap_staging",
        OverlappedReduceToOwners::pool_bytes(options.communication_dtype,
                                             zero_chunk_numel(layout, chunks), kOverlapSlots));
  }
  return buffers;
}

std::size_t total_bytes(const std::vector<BufferBytes>& buffers) {
  std::size_t total = 0;
  for (const BufferBytes& buffer : buffers) total += buffer.bytes;
  return total;
}

}  // namespace mds::train
