// Distributed, ZeRO, memory, activation-checkpointing and DeepSpeed flags of `pretrain`, the mds
// additions, and the upstream groups GPT pretraining does not use.
#include "config/pretrain_flags.h"

namespace mds::config::pretrain_flags {
namespace {

void add_distributed(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Distributed");
  g.integer("--tensor-model-parallel-size", a.tensor_model_parallel_size,
            "tensor-parallel degree (T)");
  g.integer("--pipeline-model-parallel-size", a.pipeline_model_parallel_size,
            "pipeline-parallel degree (P)");
  g.choice("--distributed-backend", a.distributed_backend, {"nccl", "gloo"},
           "how several ranks on CUDA devices talk: nccl (NCCL) or gloo (device tensors staged "
           "through host MPI, exact and fine for ranks sharing a GPU); host runs always use MPI");
  g.choice("--DDP-impl", a.DDP_impl, {"local", "torch"}, "Megatron-native path only");
  g.store_true("--use-contiguous-buffers-in-ddp", a.use_contiguous_buffers_in_ddp,
               "Megatron-native path only");
  g.store_false("--no-scatter-gather-tensors-in-pipeline", a.scatter_gather_tensors_in_pipeline,
                "Megatron-native path only");
  g.integer("--local_rank", a.local_rank, "set by launchers");
  g.refuse("--model-parallel-size",
           "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead",
           true);
  g.refuse("--num-layers-per-virtual-pipeline-stage",
           "the interleaved schedule belongs to the Megatron-native path, which mds does not "
           "implement",
           true);
  g.refuse("--lazy-mpu-init", "external DDP managers are not supported", true);
  g.refuse("--use-cpu-initialization",
           "initializing weights on the CPU (a different random stream) is not implemented", false);
}

void add_zero(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "ZeRO, Megatron side (the DeepSpeed JSON decides)");
  g.integer("--zero-stage", a.zero_stage, "only decides whether the model is built for ZeRO-3");
  g.store_true("--zero-reduce-scatter", a.zero_reduce_scatter, "unused, as upstream");
  g.store_true("--zero-contigious-gradients", a.zero_contigious_gradients, "unused, as upstream");
  g.integer("--zero-reduce-bucket-size", a.zero_reduce_bucket_size, "unused, as upstream");
  g.integer("--zero-allgather-bucket-size", a.zero_allgather_bucket_size, "unused, as upstream");
  g.choice("--remote-device", a.remote_device, {"none", "cpu", "nvme"}, "ZeRO-3 only");
  g.store_true("--use-pin-memory", a.use_pin_memory, "ZeRO-3 only");
}

void add_memory(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Memory optimizations (not used by the GPT pipeline model)");
  g.store_true("--scattered-embeddings", a.scattered_embeddings, "no effect, as upstream");
  g.store_true("--split-transformers", a.split_transformers, "no effect, as upstream");
  g.store_true("--memory-centric-tiled-linear", a.memory_centric_tiled_linear,
               "no effect, as upstream");
  g.integer("--tile-factor", a.tile_factor, "no effect, as upstream");
}

void add_activation_checkpointing(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "Activation checkpointing (DeepSpeed)");
  g.store_true("--deepspeed-activation-checkpointing", a.deepspeed_activation_checkpointing,
               "use DeepSpeed's checkpointing and RNG tracker (production scripts pass it)");
  g.store_true("--checkpoint-in-cpu", a.checkpoint_in_cpu,
               "keep checkpointed activations in host memory (no effect in mds)");
  g.store_true("--synchronize-each-layer", a.synchronize_each_layer,
               "device synchronization per checkpointed chunk (no effect in mds)");
  g.store_true("--profile-backward", a.profile_backward,
               "time each checkpointed chunk (no effect in mds)");
  g.refuse("--partition-activations",
           "partitioned activation checkpoints are not implemented in mds yet", false);
  g.refuse("--contigious-checkpointing",
           "needs --partition-activations, which is not implemented in mds yet", false);
}

void add_deepspeed(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "DeepSpeed");
  g.store_true("--deepspeed", a.deepspeed, "train with the DeepSpeed engine (required in mds)");
  g.text("--deepspeed_config", a.deepspeed_config, "DeepSpeed JSON configuration file");
  g.refuse("--deepscale", "deprecated alias of --deepspeed; use --deepspeed", false);
  g.refuse("--deepscale_config", "deprecated alias of --deepspeed_config; use --deepspeed_config",
           true);
  g.store_true("--deepspeed_mpi", a.deepspeed_mpi,
               "discover the ranks through MPI (mds always reads them from the launcher's "
               "environment: OMPI_*, SLURM_*)");
}

void add_mds_additions(FlagSet& flags, PretrainArgs& a) {
  FlagGroup g(flags, "mds additions (not upstream flags)");
  g.text("--metrics-file", a.metrics_file,
         "write training metrics to this JSON-lines file (one object per iteration and per "
         "evaluation)");
  g.text("--device", a.device,
         "auto, cpu, cuda or cuda:N: where to train (auto: a CUDA device when there is one and "
         "the run can train there, else the CPU; without the flag $MDS_DEVICE decides, if set)");
  g.store_true("--cublaslt-epilogues", a.cublaslt_epilogues,
               "on a CUDA device with --bf16 or --fp16, run fc1's bias and GeLU in its cuBLASLt "
               "GEMM's epilogue (its own tanh GeLU, within ~1e-3 of upstream's) instead of mds's "
               "kernel; no effect elsewhere");
  g.store_true("--tf32", a.tf32,
               "on a CUDA device, fp32 GEMMs round their inputs to TF32 on tensor cores (as "
               "torch.backends.cuda.matmul.allow_tf32 = True; off, as PyTorch's default since "
               "1.12); no effect on 16-bit GEMMs or on the CPU");
  g.text("--gemm-tuning-file", a.gemm_tuning_file,
         "on a CUDA device, time every algorithm cuBLASLt offers for each distinct GEMM on its "
         "first call and keep the fastest, recording the choices in this file (each rank of "
         "several in <file>.rank<N>); a run given a file it wrote before makes the same choices, "
         "so its bits repeat. Off: cuBLASLt's heuristic picks (its first choice). No effect on "
         "the CPU");
  g.store_true("--fixed-kernel-shapes", a.fixed_kernel_shapes,
               "on a CUDA device, launch every kernel in its default shape instead of timing the "
               "alternatives that compute the same bits (attention at head dim 64, the 16-bit "
               "loss) on their first call and keeping the fastest; the results are the same "
               "either way. No effect on the CPU");
}

void refuse_other_models(FlagSet& flags) {
  FlagGroup g(flags, "");
  g.refuse("--adlr-autoresume", "ADLR cluster autoresume is not supported", false);
  g.refuse("--adlr-autoresume-interval", "ADLR cluster autoresume is not supported", true);
  const std::string biencoder = "only used by biencoder/ICT models, not by GPT pretraining";
  for (const char* name :
       {"--ict-head-size", "--biencoder-projection-dim", "--ict-load", "--bert-load",
        "--titles-data-path", "--query-in-block-prob", "--evidence-data-path",
        "--retriever-report-topk-accuracies", "--block-data-path", "--embedding-path",
        "--indexer-batch-size", "--indexer-log-interval"}) {
    g.refuse(name, biencoder, true);
  }
  for (const char* name : {"--biencoder-shared-query-context-model", "--use-one-sent-docs",
                           "--retriever-score-scaling"}) {
    g.refuse(name, biencoder, false);
  }
  for (const char* name : {"--num-classes", "--img-dim", "--num-channels", "--patch-dim"}) {
    g.refuse(name, "only used by ViT, not by GPT pretraining", true);
  }
}

}  // namespace

void add_system_flags(FlagSet& flags, PretrainArgs& args) {
  add_distributed(flags, args);
  add_zero(flags, args);
  add_memory(flags, args);
  add_activation_checkpointing(flags, args);
  add_deepspeed(flags, args);
  add_mds_additions(flags, args);
  refuse_other_models(flags);
}

}  // namespace mds::config::pretrain_flags
