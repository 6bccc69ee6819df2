#include "train/pipeline_schedule.h"

#include <algorithm>

#include "base/error.h"

namespace mds::train {
namespace {

void check_shape(const char* what, std::int64_t micro_batches, std::int64_t stages,
                 std::int64_t stage_id) {
  if (micro_batches <= 0) base::fail(what, ": micro_batches must be positive, got ", micro_batches);
  if (stages <= 0) base::fail(what, ": stages must be positive, got ", stages);
  if (stage_id < 0 || stage_id >= stages) {
    base::fail(what, ": stage_id ", stage_id, " is outside [0, ", stages, ")");
  }
}

bool is_even(std::int64_t value) {
  return value % 2 == 0;
}

struct Slot {
  std::int64_t micro_batch;
  bool forward;
};

// TrainSchedule._step_to_micro_batch: a stage runs forwards on steps of its own parity and
// backwards on the others; the offsets make each backward wait for the next stage's one.
Slot step_slot(std::int64_t step, std::int64_t stages, std::int64_t stage) {
  const std::int64_t half_stage = stage / 2;
  if (is_even(step) == is_even(stage)) {
    const std::int64_t base = is_even(step) ? step / 2 : (step - 1) / 2;
    return {base - half_stage, true};
  }
  if (is_even(step)) return {step / 2 - stages + (stage + 1) / 2, false};
  return {(step - 1) / 2 - stages + 1 + half_stage, false};
}

Instruction make(InstructionKind kind, std::int64_t buffer, std::int64_t micro_batch) {
  return Instruction{kind, buffer, micro_batch};
}

}  // namespace

std::int64_t num_pipe_buffers(std::int64_t micro_batches, std::int64_t stages,
                              std::int64_t stage_id) {
  check_shape("num_pipe_buffers", micro_batches, stages, stage_id);
  return std::max<std::int64_t>(2, std::min(stages - stage_id, micro_batches));
}

PipeSchedule train_schedule(std::int64_t micro_batches, std::int64_t stages,
                            std::int64_t stage_id) {
  check_shape("train_schedule", micro_batches, stages, stage_id);
  const std::int64_t buffers = num_pipe_buffers(micro_batches, stages, stage_id);
  const auto valid = [&](std::int64_t mb) { return mb >= 0 && mb < micro_batches; };
  const auto buf = [&](std::int64_t mb) { return mb % buffers; };
  const bool has_prev = stage_id > 0;
  const bool has_next = stage_id < stages - 1;
  const bool loads = stage_id == 0 || stage_id == stages - 1;

  const std::int64_t total_steps = 2 * (micro_batches + stages - 1);
  PipeSchedule schedule(static_cast<std::size_t>(total_steps));
  std::int64_t prev = -1;
  for (std::int64_t step = 0; step < total_steps; ++step) {
    const Slot slot = step_slot(step, stages, stage_id);
    const std::int64_t mb = slot.micro_batch;
    PipeStep& cmds = schedule[static_cast<std::size_t>(step)];
    // The order (send before receive on forward steps, receive before send on backward steps)
    // is DeepSpeed 0.8.x's; both neighbours agree on it, so blocking calls pair up.
    if (slot.forward) {
      if (valid(prev) && has_prev)
        cmds.push_back(make(InstructionKind::kSendGrad, buf(prev), prev));
      if (valid(mb) && has_prev)
        cmds.push_back(make(InstructionKind::kRecvActivation, buf(mb), mb));
    } else {
      if (valid(mb) && has_next) cmds.push_back(make(InstructionKind::kRecvGrad, buf(mb), mb));
      if (valid(prev) && has_next) {
        cmds.push_back(make(InstructionKind::kSendActivation, buf(prev), prev));
      }
    }
    if (loads && slot.forward && valid(mb)) {
      cmds.push_back(make(InstructionKind::kLoadMicroBatch, buf(mb), mb));
    }
    if (valid(mb)) {
      const auto kind =
          slot.forward ? InstructionKind::kForwardPass : InstructionKind::kBackwardPass;
      cmds.push_back(make(kind, buf(mb), mb));
    }
    if (step == total_steps - 1) {
      cmds.push_back(make(InstructionKind::kReduceTiedGrads, -1, -1));
      cmds.push_back(make(InstructionKind::kReduceGrads, -1, -1));
      cmds.push_back(make(InstructionKind::kOptimizerStep, -1, -1));
    }
    prev = mb;
  }
  return schedule;
}

PipeSchedule inference_schedule(std::int64_t micro_batches, std::int64_t stages,
                                std::int64_t stage_id) {
  check_shape("inference_schedule", micro_batches, stages, stage_id);
  const auto valid = [&](std::int64_t mb) { return mb >= 0 && mb < micro_batches; };
  const bool has_prev = stage_id > 0;
  const bool has_next = stage_id < stages - 1;
  const bool loads = stage_id == 0 || stage_id == stages - 1;

  const std::int64_t total_steps = micro_batches + stages - 1;
  PipeSchedule schedule(static_cast<std::size_t>(total_steps));
  for (std::int64_t step = 0; step < total_steps; ++step) {
    const std::int64_t mb = step - stage_id;
    // Two buffers alternate; neighbours use opposite phases so that what one sends from
    // is what the other receives into.
    const std::int64_t phase = is_even(stage_id) ? 0 : 1;
    const std::int64_t recv_buf = (step + phase) % kInferenceBuffers;
    const std::int64_t send_buf = (step + 1 + phase) % kInferenceBuffers;
    PipeStep& cmds = schedule[static_cast<std::size_t>(step)];
    if (loads && valid(mb)) cmds.push_back(make(InstructionKind::kLoadMicroBatch, recv_buf, mb));
    const bool send = has_next && valid(mb - 1);
    const bool recv = has_prev && valid(mb);
    const Instruction send_cmd = make(InstructionKind::kSendActivation, send_buf, mb - 1);
    const Instruction recv_cmd = make(InstructionKind::kRecvActivation, recv_buf, mb);
    if (is_even(stage_id)) {
      if (send) cmds.push_back(send_cmd);
      if (recv) cmds.push_back(recv_cmd);
    } else {
      if (recv) cmds.push_back(recv_cmd);
      if (send) cmds.push_back(send_cmd);
    }
    if (valid(mb)) cmds.push_back(make(InstructionKind::kForwardPass, recv_buf, mb));
  }
  return schedule;
}

std::string to_string(const Instruction& instruction) {
  const std::string buffer = std::to_string(instruction.buffer);
  switch (instruction.kind) {
    case InstructionKind::kLoadMicroBatch:
      return "L" + buffer;
    case InstructionKind::kForwardPass:
      return "F" + buffer;
    case InstructionKind::kBackwardPass:
      return "B" + buffer;
    case InstructionKind::kSendActivation:
      return "SA" + buffer;
    case InstructionKind::kRecvActivation:
      return "RA" + buffer;
    case InstructionKind::kSendGrad:
      return "SG" + buffer;
    case InstructionKind::kRecvGrad:
      return "RG" + buffer;
    case InstructionKind::kReduceTiedGrads:
      return "RT";
    case InstructionKind::kReduceGrads:
      return "RD";
    case InstructionKind::kOptimizerStep:
      return "OS";
  }
  return "?";
}

std::string to_string(const PipeStep& step) {
  if (step.empty()) return "\u2013";
  std::string text;
  for (std::size_t i = 0; i < step.size(); ++i) {
    if (!text.empty()) text += ' ';
    const bool reduce_block = i + 2 < step.size() &&
                              step[i].kind == InstructionKind::kReduceTiedGrads &&
                              step[i + 1].kind == InstructionKind::kReduceGrads &&
                              step[i + 2].kind == InstructionKind::kOptimizerStep;
    if (reduce_block) {
      text += "R*";
      i += 2;
    } else {
      text += to_string(step[i]);
    }
  }
  return text;
}

}  // namespace mds::train
