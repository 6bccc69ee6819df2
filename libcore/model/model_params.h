#pragma once

#include "model/param_buffer.h"

namespace mds::model {

// The parameter buffers one forward or backward reads, both laid out by the model's table.
// `linear` holds what the GEMMs read: the linear layers' weights, the QKV bias (which the GEMM
// adds) and the tied word embedding of the logits; `other` the rest: the LayerNorm weights and
// biases, the embedding tables of the lookup and the biases the fused bias-GeLU and
// bias-dropout-add ops add.
//   fp32 activations: one fp32 buffer for both (the optimizer's compute copy, or its fp32
//     weights); a ParamBuffer converts to this implicitly.
//   16-bit activations: `linear` in the activation dtype (the optimizer's 16-bit weights(), as
//     upstream keeps every parameter in the 16-bit type); `other` the same buffer (the ops widen
//     16-bit parameters as they load them, so this gives exactly what their fp32 widening
//     gives), or an fp32 copy of it (a compute copy: the same results, bit for bit).
// Gradients are one fp32 buffer, passed the same way.
struct ModelParams {
  // Implicit: every call site with one buffer passes a ParamBuffer.
  ModelParams(const ParamBuffer& all) : other(&all), linear(&all) {}
  ModelParams(const ParamBuffer& other_params, const ParamBuffer& linear_params)
      : other(&other_params), linear(&linear_params) {}

  const ParamBuffer* other;
  const ParamBuffer* linear;
};

}  // namespace mds::model
