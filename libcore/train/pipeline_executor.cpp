#include "train/pipeline_executor.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "model/gpt_config.h"

namespace mds::train {

using tensor::DType;
using tensor::Tensor;

namespace {

// Separate tags keep an activation from ever matching a gradient receive between two stages.
constexpr int kActivationTag = 1;
constexpr int kGradTag = 2;

}  // namespace

PipelineExecutor::PipelineExecutor(model::GptModel& model, dist::Communicator* pipeline,
                                   dist::Communicator* embedding)
    : model_(model),
      pipeline_(pipeline),
      embedding_(embedding),
      stage_(pipeline != nullptr ? pipeline->rank() : 0),
      num_stages_(pipeline != nullptr ? pipeline->size() : 1) {
  const bool first = stage_ == 0, last = stage_ == num_stages_ - 1;
  if (model.owns_embedding() != first || model.owns_head() != last) {
    const model::GptConfig& c = model.options().config;
    base::fail("PipelineExecutor: stage ", stage_, " of ", num_stages_, " holds specs [",
               c.stage_first_spec, ", ", c.stage_end(),
               "): the first stage and only it must own the embedding (spec ",
               model::GptConfig::kEmbeddingSpec, "), the last stage and only it the head (spec ",
               c.head_spec(), ")");
  }
  const model::ModelOptions& o = model.options();
  const auto bytes =
      static_cast<std::size_t>(o.config.seq_length * o.micro_batch_size * o.config.hidden_size) *
      sizeof(float);
  if (!last) recv_grad_ = tensor::Buffer(bytes, model.device());
  if (!first) send_grad_ = tensor::Buffer(bytes, model.device());
}

Tensor PipelineExecutor::hidden(const tensor::Buffer& buffer) const {
  const model::ModelOptions& o = model_.options();
  if (buffer.data() == nullptr) return {};
  return buffer.as(DType::kFloat32,
                   tensor::Shape{o.config.seq_length, o.micro_batch_size, o.config.hidden_size});
}

void PipelineExecutor::check_input(const PipelineStepInput& input, std::int64_t buffers) const {
  const std::int64_t m = input.micro_batches;
  if (m < 1) base::fail("PipelineExecutor: micro_batches must be at least 1, got ", m);
  if (model_.num_buffers() < buffers) {
    base::fail("PipelineExecutor: stage ", stage_, " of ", num_stages_, " with ", m,
               " micro-batches needs ", buffers, " pipe buffers, the model has ",
               model_.num_buffers());
  }
  if ((stage_ == 0 || stage_ == num_stages_ - 1) && !input.load) {
    base::fail("PipelineExecutor: no micro-batch loader");
  }
  if (!input.dropout) base::fail("PipelineExecutor: no dropout context per micro-batch");
}

double PipelineExecutor::train_step(const model::ModelParams& params,
                                    const model::ParamBuffer& grads, const PipelineStepInput& input,
                                    Tensor tied_grad) {
  check_input(
      input, num_pipe_buffers(std::max<std::int64_t>(input.micro_batches, 1), num_stages_, stage_));
  if (embedding_ == nullptr || embedding_->size() == 1) {
    tied_grad = {};  // one stage: nothing to share
  } else if (tied_grad.raw() == nullptr) {
    tied_grad = grads.view(
        grads.table().index_of(model::GptConfig::kEmbeddingSpec, "word_embeddings.weight"));
  }
  return execute(train_schedule(input.micro_batches, num_stages_, stage_), params, &grads, input,
                 tied_grad);
}

double PipelineExecutor::eval_step(const model::ModelParams& params,
                                   const PipelineStepInput& input) {
  check_input(input, kInferenceBuffers);
  return execute(inference_schedule(input.micro_batches, num_stages_, stage_), params, nullptr,
                 input, {});
}

double PipelineExecutor::execute(const PipeSchedule& schedule, const model::ModelParams& params,
                                 const model::ParamBuffer* grads, const PipelineStepInput& input,
                                 Tensor tied_grad) {
  const bool first = stage_ == 0, last = stage_ == num_stages_ - 1;
  double loss = 0.0;
  std::optional<model::MicroBatch> loaded;
  std::int64_t backward_done = -1;  // a micro-batch whose backward ran with its forward
  const Tensor recv_grad = hidden(recv_grad_), send_grad = hidden(send_grad_);
  const int next = static_cast<int>(stage_ + 1), previous = static_cast<int>(stage_ - 1);
  for (const PipeStep& step : schedule) {
    for (const Instruction& instruction : step) {
      const int buffer = static_cast<int>(instruction.buffer);
      const std::int64_t mb = instruction.micro_batch;
      switch (instruction.kind) {
        case InstructionKind::kLoadMicroBatch:
          loaded = input.load(mb);
          break;
        case InstructionKind::kRecvActivation:
          pipeline_->recv(model_.stage_input(buffer), previous, kActivationTag);
          break;
        case InstructionKind::kSendActivation:
          pipeline_->send(model_.stage_output(buffer), next, kActivationTag);
          break;
        case InstructionKind::kRecvGrad:
          pipeline_->recv(recv_grad, next, kGradTag);
          break;
        case InstructionKind::kSendGrad:
          pipeline_->send(send_grad, previous, kGradTag);
          break;
        case InstructionKind::kForwardPass: {
          if ((first || last) && !loaded) {
            base::fail("PipelineExecutor: ForwardPass of micro-batch ", mb, " without its load");
          }
          // The received activation is already in the buffer's input and the output stays in
          // the buffer's own tensor until SendActivation: nothing is copied.
          const model::MicroBatch batch = loaded ? *loaded : model::MicroBatch{};
          if (last && grads != nullptr) {
            // The last stage's backward follows its forward directly (1F1B) and the loss scale
            // is the step's: both in one call (the head's loss and logits' gradient in one pass),
            // the BackwardPass then only reports the micro-batch done.
            loss += model_.forward_backward_stage(
                buffer, params, *grads, batch, input.dropout(mb),
                first ? Tensor{} : model_.stage_input(buffer), first ? Tensor{} : send_grad,
                input.loss_scale, model::GradientWrite::kOverwrite,
                input.backward_ready ? input.backward_ready(mb) : model::GradientsReady{});
            backward_done = mb;
          } else {
            loss += model_.forward_stage(buffer, params, batch, input.dropout(mb),
                                         first ? Tensor{} : model_.stage_input(buffer),
                                         last ? Tensor{} : model_.stage_output(buffer));
          }
          loaded.reset();
          break;
        }
        case InstructionKind::kBackwardPass:
          if (backward_done == mb) {
            backward_done = -1;
            if (input.after_backward) input.after_backward(mb);
            break;
          }
          model_.backward_stage(
              buffer, params, *grads, recv_grad, send_grad, input.loss_scale,
              model::GradientWrite::kOverwrite,
              input.backward_ready ? input.backward_ready(mb) : model::GradientsReady{});
          if (input.after_backward) input.after_backward(mb);
          break;
        case InstructionKind::kReduceTiedGrads:
          if (tied_grad.raw() == nullptr) break;
          if (input.reduce_tied_grads) {
            input.reduce_tied_grads(*embedding_);
          } else {
            embedding_->all_reduce(tied_grad, dist::ReduceOp::kSum);
          }
          break;
        case InstructionKind::kReduceGrads:
        case InstructionKind::kOptimizerStep:
          break;  // the caller's, after the step
      }
    }
  }
  if (num_stages_ > 1) {
    pipeline_->broadcast(Tensor(&loss, DType::kFloat64, tensor::Shape{1}),
                         static_cast<int>(num_stages_ - 1));
  }
  return loss;
}

}  // namespace mds::train
