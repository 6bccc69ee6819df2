#include "tasks/inference_grid.h"

#include <algorithm>

#include "base/error.h"

namespace mds::tasks {

RequestedGrid requested_grid(const config::PretrainArgs& args) {
  const auto given = [&](const char* flag) {
    return std::find(args.given_flags.begin(), args.given_flags.end(), flag) !=
           args.given_flags.end();
  };
  RequestedGrid requested;
  if (given("--tensor-model-parallel-size")) requested.tp = args.tensor_model_parallel_size;
  if (given("--pipeline-model-parallel-size")) requested.pp = args.pipeline_model_parallel_size;
  return requested;
}

namespace {

std::string sizes_text(const GridSizes& sizes) {
  return base::cat("--tensor-model-parallel-size ", sizes.tp, " × --pipeline-model-parallel-size ",
                   sizes.pp, " = ", sizes.tp * sizes.pp);
}

// Why the sizes cannot cut the model, or an empty string.
std::string misfit(const GridSizes& sizes, const config::PretrainArgs& model,
                   std::int64_t padded_vocab) {
  const std::int64_t t = sizes.tp;
  const std::string tp_flag = base::cat("--tensor-model-parallel-size ", t);
  if (model.num_attention_heads % t != 0) {
    return base::cat(tp_flag, ": --num-attention-heads ", model.num_attention_heads,
                     " is not divisible by it (each TP rank holds whole heads)");
  }
  const std::int64_t ffn = model.ffn_hidden_size.value_or(4 * model.hidden_size);
  if (ffn % t != 0) {
    return base::cat(tp_flag, ": the FFN width ", ffn, " is not divisible by it");
  }
  if (padded_vocab % t != 0) {
    return base::cat(tp_flag, ": the checkpoint's padded vocabulary of ", padded_vocab,
                     " rows is not divisible by it");
  }
  if (sizes.pp > model.num_layers) {
    return base::cat("--pipeline-model-parallel-size ", sizes.pp, " exceeds --num-layers ",
                     model.num_layers, ": every pipeline stage needs a transformer layer");
  }
  return {};
}

}  // namespace

GridChoice choose_inference_grid(int world_size, const RequestedGrid& requested,
                                 const GridSizes& saved, const config::PretrainArgs& model,
                                 std::int64_t padded_vocab, bool data_parallel) {
  GridChoice choice;
  for (const auto& [flag, value] : {std::pair{"--tensor-model-parallel-size", requested.tp},
                                    std::pair{"--pipeline-model-parallel-size", requested.pp}}) {
    if (value && *value < 1) {
      choice.error = base::cat(flag, " must be >= 1, got ", *value);
      return choice;
    }
  }
  if (world_size == 1) {
    const GridSizes asked{requested.tp.value_or(1), requested.pp.value_or(1)};
    if (asked.tp * asked.pp != 1) {
      choice.error = base::cat(
          sizes_text(asked), " ranks, but this is one process: launch ", asked.tp * asked.pp,
          " ranks (mpirun -np ", asked.tp * asked.pp,
          ", srun --mpi=pmix), or leave both sizes out to merge the checkpoint on one process");
    }
    return choice;
  }
  choice.sizes = {requested.tp.value_or(saved.tp), requested.pp.value_or(saved.pp)};
  const std::int64_t replica = choice.sizes.tp * choice.sizes.pp;
  if (data_parallel) {
    if (world_size % replica != 0) {
      choice.error = base::cat(
          "world size ", world_size, " is not a multiple of ", sizes_text(choice.sizes),
          " (each model replica runs on T·P ranks; sizes not given are the checkpoint's, ",
          saved.tp, " × ", saved.pp, ")");
      return choice;
    }
    choice.sizes.dp = world_size / replica;
  } else if (replica != world_size) {
    choice.error = base::cat(
        "world size ", world_size, " does not equal ", sizes_text(choice.sizes),
        " (one model replica runs on exactly T·P ranks; sizes not given are the checkpoint's, ",
        saved.tp, " × ", saved.pp, ")");
    return choice;
  }
  choice.error = misfit(choice.sizes, model, padded_vocab);
  return choice;
}

}  // namespace mds::tasks
