// ckpt/hf_import.h: the model flags a GPT-2 config.json fills in or contradicts.
#include "ckpt/hf_import.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace mds::ckpt {
namespace {

HfGpt2Config gpt2_small() {
  HfGpt2Config hf;
  hf.vocab_size = 50257;
  hf.n_positions = 1024;
  hf.n_embd = 768;
  hf.n_layer = 12;
  hf.n_head = 12;
  hf.layer_norm_epsilon = 1e-5;
  hf.activation_function = "gelu_new";
  return hf;
}

std::string error_of(const HfGpt2Config& hf, config::PretrainArgs& args) {
  try {
    apply_hf_config_to_flags(hf, "gpt2/config.json", args);
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfImport, FlagsNotGivenAreTakenFromTheConfig) {
  config::PretrainArgs args;
  apply_hf_config_to_flags(gpt2_small(), "gpt2/config.json", args);
  EXPECT_EQ(args.num_layers, 12);
  EXPECT_EQ(args.hidden_size, 768);
  EXPECT_EQ(args.num_attention_heads, 12);
  EXPECT_EQ(args.ffn_hidden_size, 3072);  // n_inner null: 4·n_embd
  EXPECT_EQ(args.max_position_embeddings, 1024);
  EXPECT_EQ(args.seq_length, 1024);
  EXPECT_DOUBLE_EQ(args.layernorm_epsilon, 1e-5);
}

TEST(HfImport, GivenFlagsThatAgreeStayAndAShorterSequenceIsKept) {
  HfGpt2Config hf = gpt2_small();
  hf.n_inner = 1000;
  hf.layer_norm_epsilon = 1e-6;
  config::PretrainArgs args;
  args.num_layers = 12;
  args.seq_length = 256;
  args.ffn_hidden_size = 1000;
  args.layernorm_epsilon = 1e-6;
  args.given_flags = {"--num-layers", "--seq-length", "--ffn-hidden-size", "--layernorm-epsilon"};
  EXPECT_EQ(error_of(hf, args), "");
  EXPECT_EQ(args.seq_length, 256);
  EXPECT_EQ(args.ffn_hidden_size, 1000);
  EXPECT_EQ(args.max_position_embeddings, 1024);
}

TEST(HfImport, AContradictingFlagNamesTheFlagTheFileAndTheKey) {
  config::PretrainArgs args;
  args.hidden_size = 1024;
  args.given_flags = {"--hidden-size"};
  EXPECT_EQ(error_of(gpt2_small(), args),
            "--hidden-size 1024 contradicts gpt2/config.json, whose 'n_embd' is 768");

  config::PretrainArgs eps;
  eps.layernorm_epsilon = 1e-6;
  eps.given_flags = {"--layernorm-epsilon"};
  EXPECT_NE(error_of(gpt2_small(), eps).find("'layer_norm_epsilon' is 1e-05"), std::string::npos);
}

TEST(HfImport, TheErfGeluMustBeAskedForAndOnlyWithAnErfConfig) {
  config::PretrainArgs tanh_flags;  // the default fused tanh GeLU
  HfGpt2Config erf = gpt2_small();
  erf.activation_function = "gelu";
  EXPECT_NE(error_of(erf, tanh_flags).find("give --no-bias-gelu-fusion"), std::string::npos);

  config::PretrainArgs erf_flags;
  erf_flags.bias_gelu_fusion = false;
  EXPECT_EQ(error_of(erf, erf_flags), "");
  EXPECT_NE(error_of(gpt2_small(), erf_flags).find("is a tanh GeLU"), std::string::npos);

  config::PretrainArgs openai;  // gelu_new and gelu_fast differ only in rounding: both accepted
  openai.openai_gelu = true;
  openai.bias_gelu_fusion = false;
  HfGpt2Config fast = gpt2_small();
  fast.activation_function = "gelu_fast";
  EXPECT_EQ(error_of(fast, openai), "");
  EXPECT_EQ(error_of(gpt2_small(), tanh_flags), "");
}

}  // namespace
}  // namespace mds::ckpt
