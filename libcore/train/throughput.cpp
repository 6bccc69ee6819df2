#include "train/throughput.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/python_float.h"

namespace mds::train {
namespace {

// C's printf rounds correctly (glibc), as Python's formatter does; only non-finite values and the
// sign of NaN differ.
std::string printf_format(const char* spec, int precision, double value) {
  char buffer[400];
  const int n = std::snprintf(buffer, sizeof buffer, spec, precision, value);
  if (n < 0 || static_cast<size_t>(n) >= sizeof buffer) {
    std::string big(static_cast<size_t>(n) + 1, '\0');
    std::snprintf(big.data(), big.size(), spec, precision, value);
    big.resize(static_cast<size_t>(n));
    return big;
  }
  return std::string(buffer, static_cast<size_t>(n));
}

std::string non_finite(double value, bool upper) {
  if (std::isnan(value)) return upper ? "NAN" : "nan";
  const char* inf = upper ? "INF" : "inf";
  return value < 0 ? std::string("-") + inf : std::string(inf);
}

__extension__ typedef unsigned __int128 uint128;

}  // namespace

std::string python_format_e(double value, int precision) {
  if (!std::isfinite(value)) return non_finite(value, true);
  return printf_format("%.*E", precision, value);
}

std::string python_format_f(double value, int precision) {
  if (!std::isfinite(value)) return non_finite(value, false);
  return printf_format("%.*f", precision, value);
}

std::string python_format_d(int64_t value, int width) {
  char buffer[48];
  const int n = std::snprintf(buffer, sizeof buffer, "%*lld", width, static_cast<long long>(value));
  return std::string(buffer, static_cast<size_t>(n));
}

double flops_per_iteration(const FlopsModel& m, int64_t global_batch_size) {
  if (m.seq_length <= 0 || m.num_layers <= 0 || m.hidden_size <= 0 || m.padded_vocab_size <= 0 ||
      global_batch_size <= 0)
    base::fail("TFLOPs estimate needs positive sequence length, layers, hidden size, vocabulary ",
               "and batch size");
  const uint128 ckpt = m.checkpoint_activations ? 4 : 3;
  const uint128 coefficient = m.glu_activation ? 32 : 24;
  const auto h = static_cast<uint128>(m.hidden_size);
  // Exact, then one correctly rounded conversion, like Python's int * float.
  const uint128 exact = coefficient * ckpt * static_cast<uint128>(global_batch_size) *
                        static_cast<uint128>(m.seq_length) * static_cast<uint128>(m.num_layers) *
                        (h * h);
  const double s = static_cast<double>(m.seq_length);
  const double hd = static_cast<double>(m.hidden_size);
  const double correction =
      1. + (s / (6. * hd)) +
      (static_cast<double>(m.padded_vocab_size) / (16. * static_cast<double>(m.num_layers) * hd));
  return static_cast<double>(exact) * correction;
}

double tflops(double flops_per_iter, double elapsed_per_iteration, int64_t world_size) {
  return flops_per_iter / (elapsed_per_iteration * static_cast<double>(world_size) * 1e12);
}

std::string format_training_log_line(const TrainingLogFields& f) {
  std::string line;
  line += " iteration " + python_format_d(f.iteration, 8) + "/" +
          python_format_d(f.train_iters, 8) + " |";
  line += " consumed samples: " + python_format_d(f.consumed_samples, 12) + " |";
  line += " consumed tokens: " + python_format_d(f.consumed_tokens, 12) + " |";
  line += " elapsed time per iteration (s): " + python_format_f(f.elapsed_per_iteration, 2) + " |";
  line += " learning rate: " + python_format_e(f.learning_rate, 3) + " |";
  line += " global batch size: " + python_format_d(f.global_batch_size, 5) + " |";
  for (const auto& [name, average] : f.losses)
    if (average > 0.0) line += " " + name + ": " + python_format_e(average, 6) + " |";
  if (f.loss_scale) line += " loss scale: " + python_format_f(*f.loss_scale, 1) + " |";
  if (f.grad_norm) line += " grad norm: " + python_format_f(*f.grad_norm, 3) + " |";
  if (f.num_zeros) line += " num zeros: " + python_format_f(*f.num_zeros, 1) + " |";
  if (f.params_norm) line += " params norm: " + python_format_f(*f.params_norm, 3) + " |";
  if (f.curriculum_seqlen)
    line += " curriculum seqlen: " + python_format_d(*f.curriculum_seqlen, 5) + " |";
  line += " number of skipped iterations: " + python_format_d(f.skipped_iterations, 3) + " |";
  line += " number of nan iterations: " + python_format_d(f.nan_iterations, 3) + " |";
  line += " samples per second: " + python_format_f(f.samples_per_second, 3) + " |";
  line += " TFLOPs: " + python_format_f(f.tflops, 2) + " |";
  return line;
}

std::string format_deepspeed_steps_line(int64_t global_steps, double loss, double iter_time,
                                        double samples_per_second) {
  return "steps: " + std::to_string(global_steps) + " loss: " + python_format_f(loss, 4) +
         " iter time (s): " + python_format_f(iter_time, 3) +
         " samples/sec: " + python_format_f(samples_per_second, 3);
}

std::string format_deepspeed_progress_line(int64_t step, int64_t skipped, double lr, double beta1,
                                           double beta2, int groups) {
  const std::string one_lr = base::python_float_repr(lr);
  std::string mom = "(";
  mom.append(base::python_float_repr(beta1)).append(", ").append(base::python_float_repr(beta2));
  mom.append(")");
  std::string lrs, moms;
  for (int g = 0; g < groups; ++g) {
    if (g > 0) {
      lrs.append(", ");
      moms.append(", ");
    }
    lrs.append(one_lr);
    moms.append(mom);
  }
  std::string line = "[Rank 0] step=";
  line.append(std::to_string(step)).append(", skipped=").append(std::to_string(skipped));
  line.append(", lr=[").append(lrs).append("], mom=[").append(moms).append("]");
  return line;
}

}  // namespace mds::train
