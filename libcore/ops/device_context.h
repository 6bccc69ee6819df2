// Where the ops run and what they run with (architecture.md §3: `ops::layernorm_forward(ctx, out,
// …)` dispatches on its tensors' device). A host context has no state. A CUDA context owns, on its
// device, one stream, a cuBLASLt handle with its workspace and a host staging area; the ops given
// it queue their kernels on that stream in call order and return without waiting (except those
// that hand a number back to the host: losses, sums of squares).
//
// The caller owns the context (no globals) and passes it down: the trainer owns one and lends it
// to the model and the optimizer. One context serves one thread of work; two threads driving one
// device need two contexts.
#pragma once
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mds::ops {

namespace cuda {
struct Resources;  // ops/cuda/resources.h, compiled only with BUILD_CUDA
}

// How a CUDA context's GEMMs multiply fp32 operands: in full fp32 (the default, as PyTorch since
// 1.12 and so upstream), or rounded to TF32 on tensor cores (10-bit mantissas, fp32 accumulation),
// as torch.backends.cuda.matmul.allow_tf32 = True does: mds's --tf32. 16-bit GEMMs and the host
// are not affected.
enum class Fp32Matmul { kFp32, kTf32 };

class DeviceContext {
 public:
  // The host.
  DeviceContext() = default;
  // The host for a CPU device; for a CUDA device, its stream and handles. Fails with one line when
  // the build has no CUDA backend or the device does not exist.
  explicit DeviceContext(tensor::Device device, Fp32Matmul fp32_matmul = Fp32Matmul::kFp32);
  ~DeviceContext();
  DeviceContext(DeviceContext&& other) noexcept;
  DeviceContext& operator=(DeviceContext&& other) noexcept;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  tensor::Device device() const { return device_; }
  Fp32Matmul fp32_matmul() const { return fp32_matmul_; }
  bool is_cuda() const { return device_.kind == tensor::DeviceKind::kCuda; }
  // Waits for the work queued so far and reports an asynchronous failure of it; nothing to do on
  // the host.
  void synchronize() const;
  // From now on each distinct GEMM of a CUDA context takes the algorithm chosen for it in the
  // file at `path` (ops/gemm_tuning_file.h), or times cuBLASLt's candidates on its first call and
  // records the fastest there (pretrain --gemm-tuning-file). Fails with one line on a malformed
  // file or one made on another platform; nothing to do on the host.
  void tune_gemms(const std::string& path);
  // From now on the kernels with launch shapes under trial (the tensor-core attention at head dim
  // 64, the training step's cross entropy on 16-bit logits) time them on each problem's first
  // call and keep the fastest that gives the default shape's bits (ops/launch_variants.h):
  // pretrain's default, --fixed-kernel-shapes turns it off. The results do not change; the first
  // call of a problem waits for its trials. Nothing to do on the host.
  void time_kernel_shapes();
  // The picks made so far, one line each (ops::describe): empty on the host or before
  // time_kernel_shapes.
  std::vector<std::string> kernel_shape_picks() const;
  // The CUDA resources, for ops/cuda/ (a context is a handle: using its stream does not change
  // it, hence const). Fails on a host context.
  cuda::Resources& cuda() const;

 private:
  void release() noexcept;

  tensor::Device device_;
  Fp32Matmul fp32_matmul_ = Fp32Matmul::kFp32;
  cuda::Resources* cuda_ = nullptr;  // owned; null on the host
};

}  // namespace mds::ops
