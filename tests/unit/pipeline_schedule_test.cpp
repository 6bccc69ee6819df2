#include "train/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"

namespace mds::train {
namespace {

using Kind = InstructionKind;

// "0 L0 F0 | 1 SA0 | ..." as in training.md §10: checks step numbering and each step's text.
void expect_schedule(const PipeSchedule& schedule, const std::string& expected) {
  std::vector<std::string> steps;
  std::size_t begin = 0;
  while (true) {
    const std::size_t bar = expected.find(" | ", begin);
    steps.push_back(expected.substr(begin, bar == std::string::npos ? bar : bar - begin));
    if (bar == std::string::npos) break;
    begin = bar + 3;
  }
  ASSERT_EQ(schedule.size(), steps.size());
  for (std::size_t t = 0; t < steps.size(); ++t) {
    const std::size_t space = steps[t].find(' ');
    ASSERT_EQ(steps[t].substr(0, space), std::to_string(t)) << steps[t];
    EXPECT_EQ(to_string(schedule[t]), steps[t].substr(space + 1)) << "step " << t;
  }
}

TEST(PipelineSchedule, SpecVectorM4P2Stage0) {
  EXPECT_EQ(num_pipe_buffers(4, 2, 0), 2);
  expect_schedule(train_schedule(4, 2, 0),
                  "0 L0 F0 | 1 SA0 | 2 L1 F1 | 3 RG0 SA1 B0 | 4 L0 F0 | 5 RG1 SA0 B1 | 6 L1 F1 | "
                  "7 RG0 SA1 B0 | 8 \u2013 | 9 RG1 B1 R*");
}

TEST(PipelineSchedule, SpecVectorM4P2Stage1) {
  expect_schedule(train_schedule(4, 2, 1),
                  "0 \u2013 | 1 RA0 L0 F0 | 2 B0 | 3 SG0 RA1 L1 F1 | 4 B1 | 5 SG1 RA0 L0 F0 | "
                  "6 B0 | 7 SG0 RA1 L1 F1 | 8 B1 | 9 SG1 R*");
}

TEST(PipelineSchedule, SpecVectorM4P4Stage1) {
  EXPECT_EQ(num_pipe_buffers(4, 4, 0), 4);
  EXPECT_EQ(num_pipe_buffers(4, 4, 1), 3);
  EXPECT_EQ(num_pipe_buffers(4, 4, 2), 2);
  EXPECT_EQ(num_pipe_buffers(4, 4, 3), 2);
  expect_schedule(train_schedule(4, 4, 1),
                  "0 \u2013 | 1 RA0 F0 | 2 SA0 | 3 RA1 F1 | 4 SA1 | 5 RA2 F2 | 6 RG0 SA2 B0 | "
                  "7 SG0 RA0 F0 | 8 RG1 SA0 B1 | 9 SG1 | 10 RG2 B2 | 11 SG2 | 12 RG0 B0 | "
                  "13 SG0 R*");
}

TEST(PipelineSchedule, SpecVectorM3P1) {
  expect_schedule(train_schedule(3, 1, 0), "0 L0 F0 | 1 B0 | 2 L1 F1 | 3 B1 | 4 L0 F0 | 5 B0 R*");
}

TEST(PipelineSchedule, InstructionsCarryTheMicroBatch) {
  const PipeSchedule schedule = train_schedule(4, 4, 1);
  // Step 7: SG0 RA0 F0 sends micro-batch 0's gradient and receives micro-batch 3 into buffer 0.
  EXPECT_EQ(schedule[7], (PipeStep{{Kind::kSendGrad, 0, 0},
                                   {Kind::kRecvActivation, 0, 3},
                                   {Kind::kForwardPass, 0, 3}}));
  EXPECT_EQ(schedule[13].back(), (Instruction{Kind::kOptimizerStep, -1, -1}));
}

TEST(PipelineSchedule, BadArgumentsAreErrors) {
  EXPECT_THROW(train_schedule(0, 2, 0), base::Error);
  EXPECT_THROW(train_schedule(2, 0, 0), base::Error);
  EXPECT_THROW(train_schedule(2, 2, 2), base::Error);
  EXPECT_THROW(inference_schedule(2, 2, -1), base::Error);
  EXPECT_THROW(num_pipe_buffers(2, 2, 5), base::Error);
}

// Per-step invariants of §10 for every small (M, P).
TEST(PipelineSchedule, InvariantsForAllSmallShapes) {
  for (std::int64_t m = 1; m <= 8; ++m) {
    for (std::int64_t p = 1; p <= 8; ++p) {
      SCOPED_TRACE("M=" + std::to_string(m) + " P=" + std::to_string(p));
      std::vector<PipeSchedule> stages;
      for (std::int64_t k = 0; k < p; ++k) stages.push_back(train_schedule(m, p, k));
      const auto steps = static_cast<std::size_t>(2 * (m + p - 1));
      // (kind, stage, step) -> micro-batch
      std::map<std::tuple<Kind, std::int64_t, std::size_t>, std::int64_t> comms;
      for (std::int64_t k = 0; k < p; ++k) {
        const PipeSchedule& schedule = stages[static_cast<std::size_t>(k)];
        ASSERT_EQ(schedule.size(), steps);
        std::vector<int> forwards(static_cast<std::size_t>(m)),
            backwards(static_cast<std::size_t>(m));
        const std::int64_t buffers = num_pipe_buffers(m, p, k);
        for (std::size_t t = 0; t < steps; ++t) {
          for (const Instruction& in : schedule[t]) {
            const bool reduce = in.kind == Kind::kReduceTiedGrads ||
                                in.kind == Kind::kReduceGrads || in.kind == Kind::kOptimizerStep;
            EXPECT_EQ(reduce, t + 1 == steps && in.micro_batch < 0);
            if (reduce) continue;
            ASSERT_GE(in.micro_batch, 0);
            ASSERT_LT(in.micro_batch, m);
            EXPECT_EQ(in.buffer, in.micro_batch % buffers);
            if (in.kind == Kind::kForwardPass) ++forwards[static_cast<std::size_t>(in.micro_batch)];
            if (in.kind == Kind::kBackwardPass)
              ++backwards[static_cast<std::size_t>(in.micro_batch)];
            const bool comm = in.kind == Kind::kSendActivation ||
                              in.kind == Kind::kRecvActivation || in.kind == Kind::kSendGrad ||
                              in.kind == Kind::kRecvGrad;
            if (comm) {
              EXPECT_TRUE(comms.emplace(std::tuple{in.kind, k, t}, in.micro_batch).second);
            }
          }
        }
        EXPECT_EQ(forwards, std::vector<int>(static_cast<std::size_t>(m), 1));
        EXPECT_EQ(backwards, std::vector<int>(static_cast<std::size_t>(m), 1));
        EXPECT_EQ(to_string(schedule.back()).ends_with("R*"), true);
      }
      // Every send has its receive on the neighbour at the same step, for the same micro-batch,
      // and every receive has its send.
      const std::map<Kind, std::pair<Kind, std::int64_t>> partner = {
          {Kind::kSendActivation, {Kind::kRecvActivation, +1}},
          {Kind::kRecvActivation, {Kind::kSendActivation, -1}},
          {Kind::kSendGrad, {Kind::kRecvGrad, -1}},
          {Kind::kRecvGrad, {Kind::kSendGrad, +1}}};
      for (const auto& [key, micro_batch] : comms) {
        const auto [kind, stage, step] = key;
        const auto [other_kind, offset] = partner.at(kind);
        const auto found = comms.find(std::tuple{other_kind, stage + offset, step});
        ASSERT_NE(found, comms.end()) << to_string(Instruction{kind, 0, micro_batch}) << " stage "
                                      << stage << " step " << step;
        EXPECT_EQ(found->second, micro_batch);
      }
    }
  }
}

// Runs all stages' schedules with blocking point-to-point semantics: a send waits until the
// neighbour's current instruction is the matching receive. Tracks what each buffer holds, so
// a schedule that reused a buffer too early, sent the wrong micro-batch or deadlocked fails.
// Lamport clocks give the happens-before order of forwards and backwards across stages.
class PipelineSimulator {
 public:
  PipelineSimulator(std::vector<PipeSchedule> schedules, std::int64_t micro_batches,
                    std::int64_t buffers_per_stage_hint, bool training)
      : micro_batches_(micro_batches), training_(training) {
    for (std::size_t k = 0; k < schedules.size(); ++k) {
      Stage stage;
      for (std::size_t t = 0; t < schedules[k].size(); ++t) {
        for (const Instruction& in : schedules[k][t]) stage.program.push_back({in, t});
      }
      const std::int64_t buffers =
          training ? num_pipe_buffers(micro_batches, static_cast<std::int64_t>(schedules.size()),
                                      static_cast<std::int64_t>(k))
                   : buffers_per_stage_hint;
      stage.input.assign(static_cast<std::size_t>(buffers), -1);
      stage.labels = stage.input;
      stage.output = stage.input;
      stage.input_grad = stage.input;
      stage.forward_clock.assign(static_cast<std::size_t>(micro_batches), -1);
      stage.backward_clock = stage.forward_clock;
      stages_.push_back(std::move(stage));
    }
  }

  // Runs until every stage is done or none can move; returns whether all finished.
  bool run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (std::size_t k = 0; k < stages_.size(); ++k) {
        Stage& stage = stages_[k];
        if (stage.pc >= stage.program.size()) continue;
        const Op& op = stage.program[stage.pc];
        const Kind kind = op.instruction.kind;
        if (kind == Kind::kRecvActivation || kind == Kind::kRecvGrad) continue;  // sender drives
        if (kind == Kind::kSendActivation || kind == Kind::kSendGrad) {
          progress |= try_send(k);
        } else {
          execute_local(k, op.instruction);
          ++stage.clock;
          ++stage.pc;
          progress = true;
        }
      }
    }
    for (const Stage& stage : stages_) {
      if (stage.pc < stage.program.size()) return false;
    }
    return true;
  }

  std::int64_t forward_clock(std::size_t stage, std::int64_t mb) const {
    return stages_[stage].forward_clock[static_cast<std::size_t>(mb)];
  }
  std::int64_t backward_clock(std::size_t stage, std::int64_t mb) const {
    return stages_[stage].backward_clock[static_cast<std::size_t>(mb)];
  }

 private:
  struct Op {
    Instruction instruction;
    std::size_t step;
  };
  struct Stage {
    std::vector<Op> program;
    std::size_t pc = 0;
    std::int64_t clock = 0;
    std::vector<std::int64_t> input, labels, output, input_grad;
    std::int64_t grad = -1;  // DeepSpeed receives gradients into one tensor, not per buffer
    std::int64_t loads = 0, forwards = 0, backwards = 0;
    std::vector<std::int64_t> forward_clock, backward_clock;
  };

  static std::int64_t& slot(std::vector<std::int64_t>& values, std::int64_t buffer) {
    return values.at(static_cast<std::size_t>(buffer));
  }

  void execute_local(std::size_t k, const Instruction& in) {
    Stage& s = stages_[k];
    const bool first = k == 0;
    const bool last = k + 1 == stages_.size();
    const std::int64_t mb = in.micro_batch;
    switch (in.kind) {
      case Kind::kLoadMicroBatch:
        EXPECT_TRUE(first || last);
        EXPECT_EQ(mb, s.loads++) << "data iterator order";
        if (first) slot(s.input, in.buffer) = mb;
        if (first) slot(s.input_grad, in.buffer) = -1;
        if (last) slot(s.labels, in.buffer) = mb;
        break;
      case Kind::kForwardPass:
        EXPECT_EQ(mb, s.forwards++) << "stage " << k;
        EXPECT_EQ(slot(s.input, in.buffer), mb) << "stage " << k << " input of mb " << mb;
        if (last) {
          EXPECT_EQ(slot(s.labels, in.buffer), mb) << "labels of mb " << mb;
        }
        slot(s.output, in.buffer) = mb;
        s.forward_clock[static_cast<std::size_t>(mb)] = s.clock;
        break;
      case Kind::kBackwardPass:
        EXPECT_TRUE(training_);
        EXPECT_EQ(mb, s.backwards++) << "stage " << k;
        EXPECT_EQ(slot(s.output, in.buffer), mb) << "stage " << k << " activations of mb " << mb;
        if (!last) {
          EXPECT_EQ(s.grad, mb) << "stage " << k << " gradient of mb " << mb;
        }
        slot(s.output, in.buffer) = -2;  // freed
        slot(s.input_grad, in.buffer) = mb;
        s.backward_clock[static_cast<std::size_t>(mb)] = s.clock;
        break;
      case Kind::kReduceTiedGrads:
      case Kind::kReduceGrads:
      case Kind::kOptimizerStep:
        EXPECT_TRUE(training_);
        EXPECT_EQ(s.forwards, micro_batches_);
        EXPECT_EQ(s.backwards, micro_batches_);
        break;
      default:
        ADD_FAILURE() << "not a local instruction";
    }
  }

  bool try_send(std::size_t k) {
    Stage& sender = stages_[k];
    const Op& send = sender.program[sender.pc];
    const bool activation = send.instruction.kind == Kind::kSendActivation;
    const std::size_t peer = activation ? k + 1 : k - 1;
    if (peer >= stages_.size()) {
      ADD_FAILURE() << "send off the pipeline end from stage " << k;
      return false;
    }
    Stage& receiver = stages_[peer];
    if (receiver.pc >= receiver.program.size()) return false;
    const Op& recv = receiver.program[receiver.pc];
    const Kind wanted = activation ? Kind::kRecvActivation : Kind::kRecvGrad;
    if (recv.instruction.kind != wanted) return false;  // blocked until the peer gets there

    const std::int64_t mb = send.instruction.micro_batch;
    EXPECT_EQ(recv.instruction.micro_batch, mb) << "stage " << k << " -> " << peer;
    EXPECT_EQ(recv.step, send.step) << "send and receive at different steps";
    if (activation) {
      EXPECT_EQ(slot(sender.output, send.instruction.buffer), mb) << "stage " << k;
      slot(receiver.input, recv.instruction.buffer) = mb;
      slot(receiver.input_grad, recv.instruction.buffer) = -1;
    } else {
      EXPECT_EQ(slot(sender.input_grad, send.instruction.buffer), mb) << "stage " << k;
      receiver.grad = mb;
    }
    const std::int64_t clock = std::max(sender.clock, receiver.clock) + 1;
    sender.clock = receiver.clock = clock;
    ++sender.pc;
    ++receiver.pc;
    return true;
  }

  std::vector<Stage> stages_;
  std::int64_t micro_batches_;
  bool training_;
};

TEST(PipelineSchedule, SimulationHasNoDeadlockAndRespectsDependencies) {
  for (std::int64_t m = 1; m <= 8; ++m) {
    for (std::int64_t p = 1; p <= 8; ++p) {
      SCOPED_TRACE("M=" + std::to_string(m) + " P=" + std::to_string(p));
      std::vector<PipeSchedule> schedules;
      for (std::int64_t k = 0; k < p; ++k) schedules.push_back(train_schedule(m, p, k));
      PipelineSimulator sim(std::move(schedules), m, 0, true);
      ASSERT_TRUE(sim.run()) << "deadlock";
      for (std::int64_t mb = 0; mb < m; ++mb) {
        for (std::size_t k = 0; k < static_cast<std::size_t>(p); ++k) {
          EXPECT_GT(sim.backward_clock(k, mb), sim.forward_clock(k, mb));
          if (k > 0) {
            EXPECT_GT(sim.forward_clock(k, mb), sim.forward_clock(k - 1, mb));
          }
          if (k + 1 < static_cast<std::size_t>(p)) {
            EXPECT_GT(sim.backward_clock(k, mb), sim.backward_clock(k + 1, mb));
          }
        }
      }
      if (HasFailure()) return;
    }
  }
}

TEST(PipelineSchedule, InferenceScheduleRunsForwardOnly) {
  // Stage 1 of 3 with 3 micro-batches: odd stages receive before they send.
  const PipeSchedule stage1 = inference_schedule(3, 3, 1);
  ASSERT_EQ(stage1.size(), 5u);
  EXPECT_EQ(to_string(stage1[0]), "\u2013");
  EXPECT_EQ(to_string(stage1[1]), "RA0 F0");
  EXPECT_EQ(to_string(stage1[2]), "RA1 SA0 F1");
  EXPECT_EQ(to_string(stage1[3]), "RA0 SA1 F0");
  EXPECT_EQ(to_string(stage1[4]), "SA0");
  EXPECT_EQ(to_string(inference_schedule(2, 2, 0)[1]), "L1 SA0 F1");
  EXPECT_EQ(to_string(inference_schedule(2, 1, 0)[1]), "L1 F1");

  for (std::int64_t m = 1; m <= 8; ++m) {
    for (std::int64_t p = 1; p <= 8; ++p) {
      SCOPED_TRACE("M=" + std::to_string(m) + " P=" + std::to_string(p));
      std::vector<PipeSchedule> schedules;
      for (std::int64_t k = 0; k < p; ++k) {
        schedules.push_back(inference_schedule(m, p, k));
        EXPECT_EQ(schedules.back().size(), static_cast<std::size_t>(m + p - 1));
      }
      PipelineSimulator sim(std::move(schedules), m, kInferenceBuffers, false);
      ASSERT_TRUE(sim.run()) << "deadlock";
      for (std::int64_t mb = 0; mb < m; ++mb) {
        for (std::size_t k = 1; k < static_cast<std::size_t>(p); ++k) {
          EXPECT_GT(sim.forward_clock(k, mb), sim.forward_clock(k - 1, mb));
        }
      }
      if (HasFailure()) return;
    }
  }
}

TEST(PipelineSchedule, ToStringNotation) {
  EXPECT_EQ(to_string(PipeStep{}), "\u2013");
  EXPECT_EQ(to_string(Instruction{Kind::kReduceGrads, -1, -1}), "RD");
  EXPECT_EQ(to_string(PipeStep{{Kind::kRecvGrad, 1, 5}, {Kind::kBackwardPass, 1, 5}}), "RG1 B1");
}

}  // namespace
}  // namespace mds::train
