// Exposes ckpt::megatron_args_namespace to tests/e2e/megatron_args_torch_test.py, which loads the
// result with torch. Usage: megatron_args_probe OUT.pt PRETRAIN-FLAGS...
// Writes {"args": Namespace, "checkpoint_version": 3.0, "iteration": 10} for the validated flags
// (one process), with padded_vocab_size 50304 and 80 consumed training samples.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/program.h"
#include "ckpt/megatron_args.h"
#include "io/torch_file.h"

int main(int argc, char** argv) {
  using namespace mds;
  return base::run_program("megatron_args_probe", [&] {
    if (argc < 2) {
      std::fprintf(stderr, "usage: megatron_args_probe OUT.pt PRETRAIN-FLAGS...\n");
      std::exit(2);
    }
    std::vector<char*> pretrain_argv = {argv[0]};
    for (int i = 2; i < argc; ++i) pretrain_argv.push_back(argv[i]);
    config::PretrainArgs args =
        config::parse_pretrain_args(static_cast<int>(pretrain_argv.size()), pretrain_argv.data());
    config::validate_pretrain_args(args, config::ProcessEnv{});
    ckpt::MegatronRunValues run;
    run.padded_vocab_size = 50304;
    run.iteration = 10;
    run.consumed_train_samples = 80;
    run.consumed_train_tokens = 80 * args.seq_length.value_or(0);
    io::Value root = io::Value::dict();
    root.set("args", ckpt::megatron_args_namespace(args, run));
    root.set("checkpoint_version", io::Value::real(3.0));
    root.set("iteration", io::Value::integer(run.iteration));
    io::write_torch_file(argv[1], root, {});
    for (const std::string& note : args.notes) std::printf("note: %s\n", note.c_str());
  });
}
