// Runs one CPU op forward and backward on inputs read from raw little-endian files and writes the
// results beside them, for tests/e2e/ops_torch_oracle_test.py to compare with PyTorch.
// Usage: ops_probe <op> <folder> <numbers...>; a tensor `name` is the file <folder>/<name>.f32
// (float32) or <folder>/<name>.i64 (int64).
//   layernorm R C            x w b dout          → out dx dw db        (eps 1e-5)
//   gelu N                   x dout              → out dx              (upstream fused tanh form)
//   attention S B NP HN COEF qkv dctx            → ctx dqkv
//   cross_entropy N V        logits targets dloss → loss dlogits
//   adamw N STEPS LR B1 B2 EPS WD   p m v g0 … g{STEPS−1} → p m v     (steps 1..STEPS)
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "ops/adam.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"

namespace {

using mds::base::fail;
using mds::tensor::Shape;
using mds::tensor::Tensor;

template <typename T>
std::vector<T> load(const std::string& path, std::int64_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> v(static_cast<std::size_t>(n));
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)))) {
    fail("cannot read ", n, " values from ", path);
  }
  return v;
}

void save(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) fail("cannot write ", path);
}

template <typename T>
Tensor view(std::vector<T>& v, Shape shape) {
  return {v.data(), mds::tensor::dtype_of<T>(), shape};
}

int run(const std::vector<std::string>& args) {
  if (args.size() < 2) fail("usage: ops_probe <op> <folder> <numbers...>");
  const std::string& op = args[0];
  const std::string dir = args[1] + "/";
  auto num = [&](std::size_t i) {
    if (i + 2 >= args.size()) fail("missing argument ", i + 1, " of ", op);
    return std::stod(args[i + 2]);
  };
  auto f32 = [&](const std::string& name, std::int64_t n) {
    return load<float>(dir + name + ".f32", n);
  };
  if (op == "layernorm") {
    const auto r = static_cast<std::int64_t>(num(0)), c = static_cast<std::int64_t>(num(1));
    auto x = f32("x", r * c), w = f32("w", c), b = f32("b", c), dout = f32("dout", r * c);
    std::vector<float> out(x.size()), mean(r), rstd(r), dx(x.size()), dw(c), db(c);
    mds::ops::layernorm_forward(view(out, {r, c}), view(mean, {r}), view(rstd, {r}),
                                view(x, {r, c}), view(w, {c}), view(b, {c}), 1e-5f);
    mds::ops::layernorm_backward(view(dx, {r, c}), view(dw, {c}), view(db, {c}), view(dout, {r, c}),
                                 view(x, {r, c}), view(w, {c}), view(mean, {r}), view(rstd, {r}));
    save(dir + "out.f32", out);
    save(dir + "dx.f32", dx);
    save(dir + "dw.f32", dw);
    save(dir + "db.f32", db);
  } else if (op == "gelu") {
    const auto n = static_cast<std::int64_t>(num(0));
    auto x = f32("x", n), dout = f32("dout", n);
    std::vector<float> out(n), dx(n);
    mds::ops::gelu_forward(view(out, {n}), view(x, {n}));
    mds::ops::gelu_backward(view(dx, {n}), view(dout, {n}), view(x, {n}));
    save(dir + "out.f32", out);
    save(dir + "dx.f32", dx);
  } else if (op == "attention") {
    const auto s = static_cast<std::int64_t>(num(0)), b = static_cast<std::int64_t>(num(1));
    const auto np = static_cast<std::int64_t>(num(2)), hn = static_cast<std::int64_t>(num(3));
    const auto coeff = static_cast<float>(num(4));
    auto qkv = f32("qkv", s * b * np * 3 * hn), dctx = f32("dctx", s * b * np * hn);
    std::vector<float> ctx(dctx.size()), probs(b * np * s * s), dprobs(probs.size());
    std::vector<float> dqkv(qkv.size());
    const Shape qkv_shape{s, b, np * 3 * hn}, probs_shape{b, np, s, s}, ctx_shape{s, b, np * hn};
    mds::ops::attention_forward(view(ctx, ctx_shape), view(probs, probs_shape),
                                view(qkv, qkv_shape), coeff);
    mds::ops::attention_backward(view(dqkv, qkv_shape), view(dprobs, probs_shape),
                                 view(dctx, ctx_shape), view(probs, probs_shape),
                                 view(qkv, qkv_shape), coeff);
    save(dir + "ctx.f32", ctx);
    save(dir + "dqkv.f32", dqkv);
  } else if (op == "cross_entropy") {
    const auto n = static_cast<std::int64_t>(num(0)), v = static_cast<std::int64_t>(num(1));
    auto logits = f32("logits", n * v), dloss = f32("dloss", n);
    auto targets = load<std::int64_t>(dir + "targets.i64", n);
    std::vector<float> loss(n), max(n), sum(n), dlogits(logits.size());
    mds::ops::cross_entropy_forward(view(loss, {n}), view(max, {n}), view(sum, {n}),
                                    view(logits, {n, v}), view(targets, {n}));
    // The forward left exp(logits − max) in logits.
    mds::ops::cross_entropy_backward(view(dlogits, {n, v}), view(logits, {n, v}),
                                     view(targets, {n}), view(max, {n}), view(sum, {n}),
                                     view(dloss, {n}));
    save(dir + "loss.f32", loss);
    save(dir + "dlogits.f32", dlogits);
  } else if (op == "adamw") {
    const auto n = static_cast<std::int64_t>(num(0)), steps = static_cast<std::int64_t>(num(1));
    const mds::ops::AdamWConfig config{static_cast<float>(num(2)), static_cast<float>(num(3)),
                                       static_cast<float>(num(4)), static_cast<float>(num(5)),
                                       static_cast<float>(num(6))};
    auto p = f32("p", n), m = f32("m", n), v = f32("v", n);
    for (std::int64_t step = 1; step <= steps; ++step) {
      // append() rather than "g" + …: gcc 12 warns falsely (-Wrestrict) on the latter.
      std::string name = "g";
      name.append(std::to_string(step - 1));
      auto g = f32(name, n);
      mds::ops::adamw_step(view(p, {n}), view(g, {n}), view(m, {n}), view(v, {n}), config, step);
    }
    save(dir + "p.f32", p);
    save(dir + "m.f32", m);
    save(dir + "v.f32", v);
  } else {
    fail("unknown op ", op);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "ops_probe: " << e.what() << "\n";
    return 1;
  }
}
