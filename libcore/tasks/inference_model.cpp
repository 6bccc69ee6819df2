#include "tasks/inference_model.h"

#include <filesystem>

#include "base/error.h"
#include "ckpt/deepspeed_checkpoint.h"
#include "ckpt/megatron_args.h"
#include "io/torch_file.h"
#include "ops/elementwise.h"
#include "text/tokenizer_factory.h"
#include "train/model_args.h"

namespace mds::tasks {

model::ModelOptions inference_model_options(const config::PretrainArgs& args,
                                            std::int64_t padded_vocab) {
  model::ModelOptions options = train::model_options_from_args(args, padded_vocab);
  options.hidden_dropout = 0.0f;
  options.attention_dropout = 0.0f;
  options.checkpoint_activations = false;
  return options;
}

namespace {

// The layout pretrain wrote for this precision: the 16-bit ones keep fp32 masters in a ZeRO file
// (bf16, fp16 with ZeRO 1) or beside the weights (fp16, ZeRO 0).
ckpt::OptimizerLayout layout_for(const config::PretrainArgs& args, const std::string& folder) {
  if (args.bf16) return ckpt::OptimizerLayout::kBf16;
  if (!args.fp16) return ckpt::OptimizerLayout::kFp32;
  std::error_code error;
  const bool zero1 =
      std::filesystem::exists(folder + "/" + "zero_pp_rank_0_mp_rank_00_optim_states.pt", error);
  return zero1 ? ckpt::OptimizerLayout::kFp16Zero1 : ckpt::OptimizerLayout::kFp16;
}

}  // namespace

InferenceModel load_inference_model(const config::PretrainArgs& args,
                                    const text::Tokenizer& tokenizer, const base::Log& log) {
  InferenceModel m;
  m.vocab_size = tokenizer.vocab_size();
  const std::int64_t padded = text::padded_vocab_size(m.vocab_size, args.tokenizer, 1);
  m.options = inference_model_options(args, padded);
  model::validate(m.options);
  m.table = std::make_unique<model::ParamTable>(model::ParamTable::build(m.options.config));
  m.params = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);

  const std::string& dir = *args.load;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    base::fail("--load ", dir, ": no such checkpoint folder");
  }
  const std::optional<std::string> tag = ckpt::read_latest_tag(dir);
  if (!tag) base::fail("--load ", dir, ": no 'latest' file, so no checkpoint to load");
  m.checkpoint = dir + "/" + *tag;
  {
    const io::TorchFile model_states =
        io::TorchFile::open(m.checkpoint + "/mp_rank_00_model_states.pt");
    ckpt::check_checkpoint_args(model_states.root_ref()["args"], args, padded, m.checkpoint);
  }
  ckpt::TrainingState state;
  state.table = m.table.get();
  state.layout = layout_for(args, m.checkpoint);
  std::unique_ptr<model::ParamBuffer> half, masters;
  if (state.layout == ckpt::OptimizerLayout::kFp32) {
    state.params = m.params->flat();
  } else {
    // The 16-bit weights upstream's model computes with are widened to fp32 (architecture.md §4:
    // 16-bit storage, fp32 compute on the CPU); the loader also wants room for the fp32 masters,
    // which are not used.
    half = std::make_unique<model::ParamBuffer>(*m.table, ckpt::params_dtype(state.layout));
    masters = std::make_unique<model::ParamBuffer>(*m.table, tensor::DType::kFloat32);
    state.params = half->flat();
    state.master = masters->flat();
  }
  ckpt::LoadOptions options;
  options.load_optimizer = false;
  options.load_rng = false;
  log.info(" loading checkpoint from " + dir + " at tag " + *tag);
  ckpt::load_deepspeed_checkpoint(dir, *tag, state, options);
  if (half) ops::cast(m.params->flat(), half->flat());
  log.info("  successfully loaded checkpoint from " + dir + " at iteration " +
           std::to_string(state.iteration));
  return m;
}

}  // namespace mds::tasks
