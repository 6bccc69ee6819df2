// Runs one stage's share of a pipelined training step: the TrainSchedule instruction list of
// training.md §3.3 (1F1B) over this rank's pipeline group (architecture.md §3, "the pipeline is
// data").
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "dist/communicator.h"
#include "model/dropout_context.h"
#include "model/gpt_model.h"
#include "model/param_buffer.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"
#include "train/pipeline_schedule.h"

namespace mds::train {

// What one optimizer step feeds the pipeline.
struct PipelineStepInput {
  std::int64_t micro_batches = 1;  // M
  // Micro-batch `mb` (0-based within the step), called at its LoadMicroBatch on the first stage
  // (which reads tokens and position_ids) and the last (labels and loss_mask), in order of mb.
  // Its tensors must stay valid until the call returns for the next one or the step ends.
  std::function<model::MicroBatch(std::int64_t mb)> load;
  // The dropout masks of micro-batch `mb`; every stage must get the same context for it.
  std::function<model::DropoutContext(std::int64_t mb)> dropout;
  // The last stage's backward starts from loss · loss_scale (1/M times the fp16 loss scale,
  // training.md §3.3).
  float loss_scale = 1.0f;
  // Optional: called after each BackwardPass, e.g. to fold the micro-batch's gradients into an
  // accumulator (training.md §3.6).
  std::function<void(std::int64_t mb)> after_backward;
  // Optional: for micro-batch `mb`, what hears during its BackwardPass which parameter gradients
  // it has finished (model::GradientsReady; empty: nothing), e.g. to start their data-parallel
  // reduction.
  std::function<model::GradientsReady(std::int64_t mb)> backward_ready;
  // Optional: ReduceTiedGrads itself, over the embedding group it is given, in place of the
  // all-reduce of train_step's tied_grad (e.g. when ZeRO 2 keeps the gradient partitioned).
  std::function<void(dist::Communicator& embedding)> reduce_tied_grads;
};

// One pipeline stage's executor. `pipeline` is this rank's pp group (its rank is the stage id;
// null means one stage) and `embedding` the tied-weight group of the first and last stage (null
// on the other stages or with one stage). Activations go over `pipeline` as whole [s, b, h]
// fp32 tensors on the model's device (so on a CUDA device the groups must move device tensors,
// dist/device_communicators.h) with blocking send/recv in the schedule's order; with T > 1 every TP
// rank sends its own full copy to the same TP rank of the next stage (no PartitionedTensor).
class PipelineExecutor {
 public:
  // Fails unless the model is this stage's: the embedding on stage 0 only, the head on the last.
  PipelineExecutor(model::GptModel& model, dist::Communicator* pipeline,
                   dist::Communicator* embedding);

  std::int64_t stage() const { return stage_; }
  std::int64_t num_stages() const { return num_stages_; }

  // Runs TrainSchedule(M, P, stage): adds this stage's gradients of Σ_mb loss_mb · loss_scale
  // into `grads` (fp32, the model's table), then at ReduceTiedGrads sums `tied_grad` over the
  // embedding group (default: grads' view of word_embeddings.weight; pass the tensor that holds
  // the accumulated gradient when it lives elsewhere, as bf16's fp32 accumulator does).
  // ReduceGrads and OptimizerStep are the caller's. The model needs at least
  // num_pipe_buffers(M, P, stage) buffers. Returns the sum of the last stage's micro-batch losses,
  // broadcast from the last stage over the pipeline group (training.md §3.5), on every stage.
  double train_step(const model::ModelParams& params, const model::ParamBuffer& grads,
                    const PipelineStepInput& input, tensor::Tensor tied_grad = {});

  // Runs InferenceSchedule(M, P, stage) (eval_batch): forward only, with input.dropout's contexts
  // (training = false for evaluation); loss_scale and after_backward are unused. The model needs
  // kInferenceBuffers buffers. Returns the sum of the last stage's micro-batch losses, broadcast
  // over the pipeline group.
  double eval_step(const model::ModelParams& params, const PipelineStepInput& input);

 private:
  void check_input(const PipelineStepInput& input, std::int64_t buffers) const;
  // Runs the instructions in order; `grads` is null for a forward-only schedule.
  double execute(const PipeSchedule& schedule, const model::ModelParams& params,
                 const model::ParamBuffer* grads, const PipelineStepInput& input,
                 tensor::Tensor tied_grad);
  tensor::Tensor hidden(const tensor::Buffer& buffer) const;

  model::GptModel& model_;
  dist::Communicator* pipeline_;
  dist::Communicator* embedding_;
  std::int64_t stage_ = 0;
  std::int64_t num_stages_ = 1;
  // The gradient received from the next stage and the one sent to the previous, on the model's
  // device.
  tensor::Buffer recv_grad_, send_grad_;
};

}  // namespace mds::train
