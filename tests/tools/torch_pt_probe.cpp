// Exposes libcore's .pt reader and writer to tests/e2e/torch_pt_oracle_test.py, which checks them
// against torch itself. Commands:
//   torch_pt_probe dump FILE            print the canonical dump of FILE's content (one line)
//   torch_pt_probe write FILE [THRESH]  write the fixed "everything" checkpoint (ZIP64 from THRESH)
//   torch_pt_probe write-weights FILE   write content torch 1.13's weights_only loader accepts
// The dump format is mirrored by canonical_dump() in the Python test. Errors: message, exit 1.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/pickle_value.h"
#include "io/torch_file.h"

namespace {

using mds::io::TensorRef;
using mds::io::Value;
using mds::tensor::DType;

std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += kHex[static_cast<unsigned char>(c) >> 4];
    out += kHex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

std::string join(const std::vector<Value>& items, const mds::io::TorchFile& file);

// (Built with += rather than "x" + s: GCC 12 warns falsely (-Wrestrict) on the latter.)
std::string wrap(char open, const std::string& inner, char close) {
  std::string out(1, open);
  out += inner;
  out += close;
  return out;
}

std::string dump(const Value& v, const mds::io::TorchFile& file) {
  using Kind = Value::Kind;
  switch (v.kind()) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(v.as_int());
    case Kind::kFloat: {
      const double d = v.as_float();
      std::uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      char buf[32];
      std::snprintf(buf, sizeof buf, "float:%016llx", static_cast<unsigned long long>(bits));
      return buf;
    }
    case Kind::kString:
      return "str:" + hex(v.as_string());
    case Kind::kBytes:
      return "bytes:" + hex(v.as_bytes());
    case Kind::kList:
      return wrap('[', join(v.items(), file), ']');
    case Kind::kTuple:
      return wrap('(', join(v.items(), file), ')');
    case Kind::kDict:
    case Kind::kOrderedDict: {
      std::string out = v.is(Kind::kDict) ? "{" : "odict{";
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        out += dump(v.keys()[i], file) + ": " + dump(v.items()[i], file);
      }
      out += "}";
      if (v.state()) out += "|state=" + dump(*v.state(), file);
      return out;
    }
    case Kind::kTensor: {
      const TensorRef& t = v.as_tensor();
      std::string shape;
      for (std::size_t i = 0; i < t.shape.size(); ++i) {
        if (i) shape += ", ";
        shape += std::to_string(t.shape[i]);
      }
      std::string out = t.is_parameter ? "param(" : "tensor(";
      out += mds::tensor::dtype_name(t.dtype);
      out += ", [" + shape + "], rg=";
      out += t.requires_grad ? "1, " : "0, ";
      out += hex(file.tensor_bytes(t));
      out += ")";
      return out;
    }
    case Kind::kGlobal:
      return "global:" + v.qualified_name();
    case Kind::kObject: {
      std::string out = "obj:" + v.qualified_name();
      out += wrap('(', join(v.args(), file), ')');
      if (!v.items().empty()) out += wrap('[', join(v.items(), file), ']');
      if (v.state()) out += "|state=" + dump(*v.state(), file);
      return out;
    }
    case Kind::kStorage:
      return "storage:" + v.as_tensor().storage_key;
  }
  return "?";
}

std::string join(const std::vector<Value>& items, const mds::io::TorchFile& file) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += dump(items[i], file);
  }
  return out;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Storage bytes for the fixed checkpoint; the Python test builds the same tensors with torch.
struct Content {
  std::vector<std::string> buffers;
  mds::io::TorchStorages storages;

  std::string add(DType dtype, std::string bytes) {
    buffers.push_back(std::move(bytes));
    const std::string key = std::to_string(storages.size());
    storages[key] = {dtype, buffers.back()};
    return key;
  }
};

Value tensor(const std::string& key, DType dtype, std::vector<std::int64_t> shape,
             std::vector<std::int64_t> strides = {}, std::int64_t offset = 0) {
  TensorRef t;
  t.dtype = dtype;
  t.storage_key = key;
  t.storage_offset = offset;
  t.strides = strides.empty() && !shape.empty() ? TensorRef::contiguous_strides(shape) : strides;
  t.shape = std::move(shape);
  return Value::tensor(std::move(t));
}

Value tensors(Content& c) {
  c.buffers.reserve(16);  // the storages map views into these strings
  std::vector<float> grid(12);
  for (int i = 0; i < 12; ++i) grid[i] = static_cast<float>(i) * 0.5f;
  const auto k_grid = c.add(DType::kFloat32, raw(grid));
  const auto k_half =
      c.add(DType::kFloat16, raw(std::vector<std::uint16_t>{0x3e00, 0xc000, 0x3400}));
  const auto k_bf16 =
      c.add(DType::kBFloat16, raw(std::vector<std::uint16_t>{0x3f80, 0xbf80, 0x4060, 0x0000}));
  const auto k_f64 = c.add(DType::kFloat64, raw(std::vector<double>{M_PI, M_E}));
  const auto k_i64 =
      c.add(DType::kInt64, raw(std::vector<std::int64_t>{-1, std::int64_t{1} << 40}));
  const auto k_i32 = c.add(DType::kInt32, raw(std::vector<std::int32_t>{7, -7, 0}));
  const auto k_u8 = c.add(DType::kUInt8, raw(std::vector<std::uint8_t>{0, 127, 255}));
  const auto k_bool = c.add(DType::kBool, raw(std::vector<std::uint8_t>{1, 0, 1}));
  const auto k_scalar = c.add(DType::kFloat32, raw(std::vector<float>{42.0f}));
  const auto k_empty = c.add(DType::kFloat32, "");
  Value model = Value::ordered_dict();
  model.set("grid", tensor(k_grid, DType::kFloat32, {3, 4}));
  model.set("rows12", tensor(k_grid, DType::kFloat32, {2, 4}, {}, 4));  // shares storage, offset
  model.set("transposed", tensor(k_grid, DType::kFloat32, {4, 3}, {1, 4}));  // non-contiguous view
  model.set("half", tensor(k_half, DType::kFloat16, {3}));
  model.set("bf16", tensor(k_bf16, DType::kBFloat16, {2, 2}));
  model.set("f64", tensor(k_f64, DType::kFloat64, {2}));
  model.set("i64", tensor(k_i64, DType::kInt64, {2}));
  model.set("i32", tensor(k_i32, DType::kInt32, {3}));
  model.set("u8", tensor(k_u8, DType::kUInt8, {3}));
  model.set("flags", tensor(k_bool, DType::kBool, {3}));
  model.set("scalar", tensor(k_scalar, DType::kFloat32, {}));
  model.set("empty", tensor(k_empty, DType::kFloat32, {0, 3}));
  return model;
}

Value ints() {
  Value list = Value::list();
  for (const std::int64_t i :
       {std::int64_t{0}, std::int64_t{255}, std::int64_t{256}, std::int64_t{65535},
        std::int64_t{65536}, std::int64_t{-1}, std::int64_t{-5}, std::int64_t{1} << 31,
        -(std::int64_t{1} << 31), -(std::int64_t{1} << 31) - 1, std::int64_t{1} << 40, INT64_MAX,
        INT64_MIN}) {
    list.push(Value::integer(i));
  }
  return list;
}

Value everything(Content& c) {
  Value root = Value::dict();
  root.set("ints", ints());
  root.set("floats", Value::tuple({Value::real(3.0), Value::real(-0.0), Value::real(1e-300),
                                   Value::real(0.1), Value::real(INFINITY)}));
  root.set("flags", Value::list({Value::boolean(true), Value::boolean(false), Value::none()}));
  root.set("text", Value::string("h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93"));
  root.set("bytes", Value::bytes(std::string("ab\0\xff", 4)));
  Value empty = Value::dict();
  empty.set("list", Value::list());
  empty.set("tuple", Value::tuple());
  empty.set("dict", Value::dict());
  empty.set("bytes", Value::bytes(""));
  root.set("empty", std::move(empty));
  Value d = Value::dict();
  d.set("d", Value::string("e"));
  Value c_level = Value::dict();
  c_level.set("c", Value::list({Value::integer(1),
                                Value::tuple({Value::integer(2), Value::integer(3)}), d}));
  Value b_level = Value::dict();
  b_level.set("b", std::move(c_level));
  Value nested = Value::dict();
  nested.set("a", std::move(b_level));
  root.set("nested", std::move(nested));
  Value int_keys = Value::dict();
  int_keys.set(Value::integer(0), Value::string("zero"));
  int_keys.set(Value::integer(1), Value::string("one"));
  root.set("int_keys", std::move(int_keys));
  Value attributes = Value::dict();
  attributes.set("lr", Value::real(0.5));
  attributes.set("layers", Value::integer(2));
  attributes.set("name", Value::string("gpt"));
  attributes.set("tied", Value::boolean(true));
  attributes.set("eps", Value::none());
  attributes.set("params_dtype", Value::global("torch", "bfloat16"));
  root.set("args", Value::namespace_object(std::move(attributes)));
  root.set("shape", Value::object("torch", "Size",
                                  {Value::tuple({Value::integer(2), Value::integer(3)})}, false));
  root.set("model", tensors(c));
  Value big = Value::list();
  for (int i = 0; i < 1500; ++i) big.push(Value::integer(i));
  root.set("big_list", std::move(big));
  return root;
}

// torch 1.13's weights_only unpickler knows no BINFLOAT, _codecs or Namespace.
Value weights(Content& c) {
  Value root = tensors(c);
  root.set("step", Value::integer(12345678901));
  root.set("names",
           Value::list({Value::string("a"), Value::tuple({Value::integer(1), Value::none()})}));
  root.set("ok", Value::boolean(true));
  return root;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[0] == "dump") {
      const auto file = mds::io::TorchFile::open(args[1]);
      file.verify_checksums();
      std::cout << dump(file.root(), file) << "\n";
      return 0;
    }
    if ((args.size() == 2 || args.size() == 3) && args[0] == "write") {
      Content c;
      const Value root = everything(c);
      mds::io::TorchWriteOptions options;
      if (args.size() == 3) options.zip64_threshold = std::stoull(args[2]);
      mds::io::write_torch_file(args[1], root, c.storages, options);
      return 0;
    }
    if (args.size() == 2 && args[0] == "write-weights") {
      Content c;
      const Value root = weights(c);
      mds::io::write_torch_file(args[1], root, c.storages);
      return 0;
    }
    std::cerr
        << "usage: torch_pt_probe dump FILE | write FILE [ZIP64_THRESHOLD] | write-weights FILE\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "torch_pt_probe: " << e.what() << "\n";
    return 1;
  }
}
