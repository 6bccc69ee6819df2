#include "ckpt/megatron_rng.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"

namespace mds::ckpt {

using io::Value;
using io::ValueRef;

namespace {

constexpr int kMtWords = 624;
using MtState = std::array<std::uint32_t, kMtWords>;

// torch's CPUGeneratorImplState: THGeneratorState (seed, left, seeded, next, 624 words widened to
// u64, three doubles and an int of the retired normal cache) + the float normal cache, padded.
constexpr std::size_t kTorchCpuStateBytes = 5056;
constexpr std::size_t kTorchMtOffset = 24;
// CUDA's Philox generator: seed and offset, two u64.
constexpr std::size_t kCudaStateBytes = 16;
constexpr std::uint64_t kTrackerSeedOffset = 2718;

// MT19937 init_genrand: numpy's seeding of an int, torch's mt19937 and std::mt19937 alike.
MtState init_genrand(std::uint32_t seed) {
  MtState mt{};
  mt[0] = seed;
  for (int i = 1; i < kMtWords; ++i) {
    mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  }
  return mt;
}

// MT19937 init_by_array: CPython's random.seed(int) with the int's 32-bit words, low first.
MtState init_by_array(const std::vector<std::uint32_t>& key) {
  MtState mt = init_genrand(19650218u);
  std::size_t i = 1;
  std::size_t j = 0;
  for (std::size_t k = std::max<std::size_t>(kMtWords, key.size()); k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] +
            static_cast<std::uint32_t>(j);
    if (++i >= kMtWords) {
      mt[0] = mt[kMtWords - 1];
      i = 1;
    }
    if (++j >= key.size()) j = 0;
  }
  for (std::size_t k = kMtWords - 1; k > 0; --k) {
    mt[i] =
        (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - static_cast<std::uint32_t>(i);
    if (++i >= kMtWords) {
      mt[0] = mt[kMtWords - 1];
      i = 1;
    }
  }
  mt[0] = 0x80000000u;
  return mt;
}

template <typename T>
void put(std::string& bytes, std::size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

Value python_random_state(std::uint64_t seed) {
  std::vector<std::uint32_t> key{static_cast<std::uint32_t>(seed)};
  if (seed >> 32) key.push_back(static_cast<std::uint32_t>(seed >> 32));
  const MtState mt = init_by_array(key);
  Value words = Value::tuple();
  for (const std::uint32_t w : mt) words.items().push_back(Value::integer(w));
  words.items().push_back(Value::integer(kMtWords));  // position: a fresh state is used up
  return Value::tuple({Value::integer(3), std::move(words), Value::none()});
}

// numpy's ndarray pickle: _reconstruct(ndarray, (0,), b'b') then BUILD with
// (version 1, shape, dtype, fortran order, raw bytes); dtype('<u4') likewise via BUILD.
Value numpy_uint32_array(const MtState& words) {
  Value dtype = Value::object(
      "numpy", "dtype", {Value::string("u4"), Value::boolean(false), Value::boolean(true)}, false);
  dtype.set_state(
      Value::tuple({Value::integer(3), Value::string("<"), Value::none(), Value::none(),
                    Value::none(), Value::integer(-1), Value::integer(-1), Value::integer(0)}));
  std::string raw(words.size() * 4, '\0');
  for (std::size_t i = 0; i < words.size(); ++i) put(raw, 4 * i, words[i]);
  Value array = Value::object(
      "numpy.core.multiarray", "_reconstruct",
      {Value::global("numpy", "ndarray"), Value::tuple({Value::integer(0)}), Value::bytes("b")},
      false);
  array.set_state(Value::tuple(
      {Value::integer(1), Value::tuple({Value::integer(static_cast<std::int64_t>(kMtWords))}),
       std::move(dtype), Value::boolean(false), Value::bytes(std::move(raw))}));
  return array;
}

Value numpy_random_state(std::uint64_t seed) {
  // np.random.seed takes the int itself (numpy refuses seeds >= 2^32; Megatron's are small).
  return Value::tuple({Value::string("MT19937"),
                       numpy_uint32_array(init_genrand(static_cast<std::uint32_t>(seed))),
                       Value::integer(kMtWords), Value::integer(0), Value::real(0.0)});
}

std::string torch_cpu_state(std::uint64_t seed) {
  std::string bytes(kTorchCpuStateBytes, '\0');
  put(bytes, 0, seed);               // the_initial_seed
  put(bytes, 8, std::int32_t{1});    // left
  put(bytes, 12, std::int32_t{1});   // seeded
  put(bytes, 16, std::uint64_t{0});  // next
  const MtState mt = init_genrand(static_cast<std::uint32_t>(seed));
  for (int i = 0; i < kMtWords; ++i) {
    put(bytes, kTorchMtOffset + 8 * static_cast<std::size_t>(i), std::uint64_t{mt[i]});
  }
  return bytes;  // the normal-sample caches are empty: zeros
}

std::string cuda_state(std::uint64_t seed) {
  std::string bytes(kCudaStateBytes, '\0');
  put(bytes, 0, seed);  // Philox seed; the offset stays 0
  return bytes;
}

// CUDA generator states changed size across torch releases: any byte vector will do.
void check_byte_tensor(const ValueRef& ref) {
  const io::TensorRef& t = ref.as_tensor();
  if (t.dtype != tensor::DType::kUInt8 || t.shape.size() != 1) {
    base::fail(ref.path(), ": expected a 1-D uint8 tensor");
  }
}

}  // namespace

void add_megatron_rng_states(Value& dict, std::uint64_t seed, std::int64_t tp_rank,
                             std::int64_t pp_rank, PtBuilder& builder) {
  const std::uint64_t s = seed + 100 * static_cast<std::uint64_t>(pp_rank);
  dict.set("random_rng_state", python_random_state(s));
  dict.set("np_rng_state", numpy_random_state(s));
  dict.set("torch_rng_state", builder.own(torch_cpu_state(s), tensor::DType::kUInt8,
                                          {static_cast<std::int64_t>(kTorchCpuStateBytes)}));
  dict.set("cuda_rng_state", builder.own(cuda_state(s), tensor::DType::kUInt8,
                                         {static_cast<std::int64_t>(kCudaStateBytes)}));
  Value tracker = Value::dict();
  tracker.set("model-parallel-rng",
              builder.own(cuda_state(s + kTrackerSeedOffset + static_cast<std::uint64_t>(tp_rank)),
                          tensor::DType::kUInt8, {static_cast<std::int64_t>(kCudaStateBytes)}));
  dict.set("rng_tracker_states", std::move(tracker));
}

void check_megatron_rng_states(const ValueRef& root) {
  const ValueRef random = root["random_rng_state"];
  if (random.sequence_size() != 3 || random[1].sequence_size() != std::size_t{kMtWords} + 1) {
    random.fail_expected("random.getstate()'s (version, 625 ints, gauss)");
  }
  const ValueRef np = root["np_rng_state"];
  if (np.sequence_size() != 5 || np[0].as_string() != "MT19937") {
    np.fail_expected("np.random.get_state()'s ('MT19937', keys, pos, has_gauss, gauss)");
  }
  const Value& keys = np[1].value();
  if (!keys.is(Value::Kind::kObject) || keys.name() != "_reconstruct" || !keys.state()) {
    np[1].fail_expected("a numpy array");
  }
  np[2].as_int();
  np[3].as_int();
  np[4].as_float();
  // torch.set_rng_state accepts the current size and the 8 bytes shorter legacy one.
  const io::TensorRef& cpu = root["torch_rng_state"].as_tensor();
  if (cpu.dtype != tensor::DType::kUInt8 || cpu.shape.size() != 1 ||
      (cpu.shape[0] != static_cast<std::int64_t>(kTorchCpuStateBytes) &&
       cpu.shape[0] != static_cast<std::int64_t>(kTorchCpuStateBytes) - 8)) {
    base::fail("torch_rng_state: expected a uint8 tensor of 5056 bytes");
  }
  check_byte_tensor(root["cuda_rng_state"]);
  const ValueRef tracker = root["rng_tracker_states"];
  if (tracker.dict_size() == 0) base::fail("rng_tracker_states: empty (Megatron refuses it)");
  for (const Value& key : tracker.value().keys()) {
    if (key.is(Value::Kind::kString)) check_byte_tensor(tracker[key.as_string()]);
  }
}

}  // namespace mds::ckpt
