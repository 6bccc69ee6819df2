// DeepSpeed's pipeline schedules as data (training.md §3.3): for one stage, the instructions of
// every step of one optimizer step (TrainSchedule, 1F1B) or of one eval batch
// (InferenceSchedule). An executor runs them in order; sends and receives are blocking and a
// send at step t is matched by the neighbour's receive at the same step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mds::train {

enum class InstructionKind : std::uint8_t {
  kLoadMicroBatch,  // first stage: inputs, last stage: labels
  kForwardPass,
  kBackwardPass,
  kSendActivation,   // to stage + 1
  kRecvActivation,   // from stage - 1
  kSendGrad,         // to stage - 1
  kRecvGrad,         // from stage + 1
  kReduceTiedGrads,  // all-reduce of the tied embedding gradient (first and last stage)
  kReduceGrads,      // data-parallel gradient reduction
  kOptimizerStep,
};

struct Instruction {
  InstructionKind kind = InstructionKind::kForwardPass;
  // Pipe buffer slot (micro_batch % num_pipe_buffers); -1 for the reduce/step instructions.
  std::int64_t buffer = -1;
  // Micro-batch the instruction concerns (0-based within the optimizer step); -1 for the
  // reduce/step instructions. Upstream does not carry it; the buffer alone is ambiguous.
  std::int64_t micro_batch = -1;

  bool operator==(const Instruction&) const = default;
};

using PipeStep = std::vector<Instruction>;
using PipeSchedule = std::vector<PipeStep>;  // one entry per step, empty steps included

// Buffers stage `stage_id` needs in TrainSchedule: the forwards it can have in flight,
// max(2, min(stages - stage_id, micro_batches)).
std::int64_t num_pipe_buffers(std::int64_t micro_batches, std::int64_t stages,
                              std::int64_t stage_id);

// TrainSchedule of DeepSpeed 0.8.x: 2 * (micro_batches + stages - 1) steps.
PipeSchedule train_schedule(std::int64_t micro_batches, std::int64_t stages, std::int64_t stage_id);

// InferenceSchedule (eval_batch): forward only, micro_batches + stages - 1 steps, two buffers
// used alternately; even stages send before they receive, odd stages the other way round.
inline constexpr std::int64_t kInferenceBuffers = 2;
PipeSchedule inference_schedule(std::int64_t micro_batches, std::int64_t stages,
                                std::int64_t stage_id);

// The notation of training.md §10: "RG0 SA1 B0", "L0 F0", "R*" for ReduceTiedGrads,
// ReduceGrads, OptimizerStep in a row, "–" (U+2013) for an empty step.
std::string to_string(const PipeStep& step);
// One instruction: "L0", "F1", "SA0", ...; "RT", "RD", "OS" for the reduce/step ones.
std::string to_string(const Instruction& instruction);

}  // namespace mds::train
