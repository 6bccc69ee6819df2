// Inference on a tp × pp × dp grid inside one process, for the unit and GPU tests: the ranks run
// on threads over in-process host groups, each with its TP shard of its pipeline stage cut from
// the whole model, the groups wrapped by tasks::inference_groups as a run on `groups_for` would
// have them (staged through the host groups for a CUDA device).
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/pipeline_partition.h"
#include "model/tp_merge.h"
#include "tasks/inference_comms.h"
#include "tasks/inference_device.h"
#include "tasks/inference_model.h"
#include "thread_communicator.h"

namespace mds::test {

struct InferenceGridRun {
  int tp = 1, pp = 1, dp = 1;
  tensor::Device groups_for;          // the device the groups are made for
  tensor::Device model_on;            // where each rank's shard is placed
  std::string label;                  // names the grid in failures
  std::chrono::seconds patience{60};  // how long a rank waits for a peer before it fails
};

inline std::vector<std::shared_ptr<Mailboxes>> inference_mailboxes(int count,
                                                                   std::chrono::seconds patience) {
  std::vector<std::shared_ptr<Mailboxes>> boxes;
  for (int i = 0; i < count; ++i) {
    boxes.push_back(std::make_shared<Mailboxes>());
    boxes.back()->patience = patience;
  }
  return boxes;
}

// Runs `body` on every rank (rank = pp·T·D + dp·T + tp, Megatron's order, one thread each) and
// returns what each rank returned, in rank order; a rank that throws fails the test naming it.
template <typename Result>
std::vector<Result> run_inference_grid(
    const tasks::InferenceModel& whole, const InferenceGridRun& run,
    const std::function<Result(const tasks::InferenceModel&)>& body) {
  const int tp = run.tp, pp = run.pp, dp = run.dp, ranks = tp * pp * dp;
  const auto world_mail = inference_mailboxes(1, run.patience);
  const auto tp_mail = inference_mailboxes(pp * dp, run.patience);  // one TP group per (pp, dp)
  const auto pp_mail = inference_mailboxes(tp * dp, run.patience);  // one PP group per (tp, dp)
  const auto replica_mail = inference_mailboxes(dp, run.patience);  // one replica per dp
  const auto dp_mail = inference_mailboxes(tp * pp, run.patience);  // one DP group per (tp, pp)
  std::vector<Result> results(static_cast<std::size_t>(ranks));
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      const int t = rank % tp, d = rank / tp % dp, p = rank / (tp * dp);
      const auto at = [](const auto& boxes, int i) { return boxes[static_cast<std::size_t>(i)]; };
      ThreadCommunicator world("world", at(world_mail, 0), rank, ranks);
      dist::GridCommunicators host;
      host.tp = std::make_unique<ThreadCommunicator>("tp", at(tp_mail, p * dp + d), t, tp);
      host.pp = std::make_unique<ThreadCommunicator>("pp", at(pp_mail, d * tp + t), p, pp);
      host.mp =
          std::make_unique<ThreadCommunicator>("mp", at(replica_mail, d), p * tp + t, tp * pp);
      host.dp = std::make_unique<ThreadCommunicator>("dp", at(dp_mail, p * tp + t), d, dp);
      try {
        const dist::GridCommunicators groups = tasks::inference_groups(
            std::move(host), run.groups_for, dist::DeviceBackend::kHostStaged,
            static_cast<double>(run.patience.count()));
        tasks::InferenceModel m;
        m.options = whole.options;
        m.vocab_size = whole.vocab_size;
        m.comms = tasks::InferenceComms{.world = &world,
                                        .tp = groups.tp.get(),
                                        .pp = groups.pp.get(),
                                        .replica = groups.mp.get(),
                                        .dp = groups.dp.get(),
                                        .tp_size = tp,
                                        .tp_rank = t,
                                        .pp_size = pp,
                                        .pp_rank = p,
                                        .dp_size = dp,
                                        .dp_rank = d};
        model::GptConfig& c = m.options.config;
        c.tensor_parallel_size = tp;
        c.tp_rank = t;
        model::set_stage_specs(c, model::pipeline_partition(c, false, pp, "type:transformer"), p);
        m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(c));
        m.params = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);
        model::split_tp_shard(*whole.params, tp, *m.params);
        if (run.model_on.kind == tensor::DeviceKind::kCuda) tasks::place_on_device(m, run.model_on);
        results[static_cast<std::size_t>(rank)] = body(m);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_EQ(errors[static_cast<std::size_t>(rank)], "") << run.label << " rank " << rank;
  }
  return results;
}

}  // namespace mds::test
