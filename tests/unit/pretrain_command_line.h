// The pretrain command line of issue 3 (one process, fp32, DeepSpeed ZeRO-0), shared by the flag
// and checkpoint-args tests.
#pragma once

#include <string>
#include <vector>

namespace mds::testing_support {

inline std::vector<std::string> issue_command_line(const std::string& config_path,
                                                   const std::string& vocab_file,
                                                   const std::string& merge_file) {
  return {"pretrain",
          "--num-layers",
          "4",
          "--hidden-size",
          "256",
          "--num-attention-heads",
          "4",
          "--seq-length",
          "256",
          "--max-position-embeddings",
          "256",
          "--micro-batch-size",
          "4",
          "--global-batch-size",
          "8",
          "--train-iters",
          "2000",
          "--lr",
          "6e-4",
          "--min-lr",
          "6e-5",
          "--lr-decay-style",
          "cosine",
          "--lr-warmup-iters",
          "100",
          "--weight-decay",
          "0.1",
          "--clip-grad",
          "1.0",
          "--data-path",
          "1.0",
          "data/x_text_document",
          "--vocab-file",
          vocab_file,
          "--merge-file",
          merge_file,
          "--split",
          "969,30,1",
          "--eval-interval",
          "200",
          "--eval-iters",
          "10",
          "--log-interval",
          "10",
          "--save",
          "ckpt",
          "--save-interval",
          "500",
          "--load",
          "ckpt",
          "--deepspeed",
          "--deepspeed_config",
          config_path};
}

}  // namespace mds::testing_support
