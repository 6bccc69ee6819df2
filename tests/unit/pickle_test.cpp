#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"
#include "io/pickle_reader.h"
#include "io/pickle_value.h"
#include "io/pickle_writer.h"

namespace mds::io {
namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// The opcodes between PROTO and STOP of a pickled value.
std::string body(const Value& v) {
  const std::string p = write_pickle(v);
  return p.substr(2, p.size() - 3);
}

std::string error_of(std::string_view bytes) {
  try {
    read_pickle(bytes, "t.pkl");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

Value round_trip(const Value& v) {
  return read_pickle(write_pickle(v), "t.pkl");
}

TensorRef float_tensor(std::vector<std::int64_t> shape, std::int64_t offset, std::int64_t numel) {
  TensorRef t;
  t.storage_key.push_back('0');  // (not = "0": GCC 12 warns falsely, -Wrestrict)
  t.strides = TensorRef::contiguous_strides(shape);
  t.shape = std::move(shape);
  t.storage_offset = offset;
  t.storage_numel = numel;
  return t;
}

// checkpoints.md §7.9
TEST(Pickle, IntAndFloatEncodingsMatchSpecVectors) {
  EXPECT_EQ(body(Value::integer(255)), unhex("4bff"));
  EXPECT_EQ(body(Value::integer(256)), unhex("4d0001"));
  EXPECT_EQ(body(Value::integer(65536)), unhex("4a00000100"));
  EXPECT_EQ(body(Value::integer(std::int64_t{1} << 31)), unhex("8a050000008000"));
  EXPECT_EQ(body(Value::integer(std::int64_t{1} << 40)), unhex("8a06000000000001"));
  EXPECT_EQ(body(Value::integer(-5)), unhex("4afbffffff"));
  EXPECT_EQ(body(Value::real(3.0)), unhex("474008000000000000"));
}

// checkpoints.md §5.3 / §7.8: byte-exact with torch 1.13 for OrderedDict(w=tensor([1., 2.])).
TEST(Pickle, MatchesTorchReferenceBytes) {
  const std::string reference = unhex(
      "800263636f6c6c656374696f6e730a4f726465726564446963740a710029527101580100000077710263746f7263"
      "68"
      "2e5f7574696c730a5f72656275696c645f74656e736f725f76320a71032828580700000073746f72616765710463"
      "746f7263680a466c6f617453746f726167650a71055801000000307106580300000063707571074b0274710851"
      "4b004b028571094b0185710a8968002952710b74710c52710d732e");
  ASSERT_EQ(reference.size(), 165u);
  Value root = Value::ordered_dict();
  root.set("w", Value::tensor(float_tensor({2}, 0, 2)));
  EXPECT_EQ(write_pickle(root), reference);
  EXPECT_EQ(read_pickle(reference, "ref"), root);
}

TEST(Pickle, MemoFreeHandWrittenPickleReadsTheSame) {
  // §5.3's memo-free form of the reference object.
  std::string p =
      "\x80\x02"
      "ccollections\nOrderedDict\n)R(";
  p += std::string("X\x01\0\0\0w", 6);
  p += "ctorch._utils\n_rebuild_tensor_v2\n((";
  // Appended piece by piece: gcc 12 at -O3 warns (-Warray-bounds, a false positive) on some
  // std::string temporaries joined with +.
  p += std::string("X\x07\0\0\0storage", 12);
  p += "ctorch\nFloatStorage\n";
  p += std::string(
      "X\x01\0\0\0"
      "0",
      6);
  p += std::string("X\x03\0\0\0cpu", 8);
  p += "K\x02tQK";
  p += '\0';
  p += "K\x02\x85K\x01\x85\x89"
       "ccollections\nOrderedDict\n)RtRu.";
  Value expected = Value::ordered_dict();
  expected.set("w", Value::tensor(float_tensor({2}, 0, 2)));
  EXPECT_EQ(read_pickle(p, "hand"), expected);
}

TEST(Pickle, RoundTripsEveryValueKind) {
  Value root = Value::dict();
  root.set("none", Value::none());
  root.set("t", Value::boolean(true));
  root.set("f", Value::boolean(false));
  Value ints = Value::list();
  for (const std::int64_t i : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{70000}, INT64_MAX,
                               INT64_MIN, -(std::int64_t{1} << 31) - 1, std::int64_t{1} << 32}) {
    ints.push(Value::integer(i));
  }
  root.set("ints", ints);
  root.set("floats", Value::tuple({Value::real(-0.0), Value::real(NAN), Value::real(1e308),
                                   Value::real(0.1)}));
  root.set("str", Value::string("h\xc3\xa9 \xe2\x9c\x93"));
  root.set("bytes", Value::bytes(std::string("\0\x7f\x80\xff", 4)));
  root.set("empty_bytes", Value::bytes(""));
  root.set(
      "tuples",
      Value::tuple({Value::tuple(), Value::tuple({Value::integer(1)}),
                    Value::tuple({Value::integer(1), Value::integer(2)}),
                    Value::tuple({Value::none(), Value::none(), Value::none(), Value::none()})}));
  Value int_keyed = Value::dict();
  int_keyed.set(Value::integer(3), Value::string("three"));
  root.set("int_keyed", int_keyed);
  Value od = Value::ordered_dict();
  od.set("w", Value::tensor(float_tensor({2, 2}, 1, 5)));
  Value metadata = Value::dict();
  metadata.set("_metadata", Value::ordered_dict());
  od.set_state(metadata);
  root.set("od", od);
  Value attrs = Value::dict();
  attrs.set("lr", Value::real(1e-4));
  attrs.set("params_dtype", Value::global("torch", "float16"));
  root.set("args", Value::namespace_object(attrs));
  root.set("size", Value::object("torch", "Size", {Value::tuple({Value::integer(4)})}, false));
  Value frag = Value::object("deepspeed.utils.tensor_fragment", "fragment_address", {}, true);
  Value frag_state = Value::dict();
  frag_state.set("numel", Value::integer(20224));
  frag_state.set("start", Value::integer(0));
  frag.set_state(frag_state);
  root.set("fragment", frag);
  TensorRef param = float_tensor({3}, 0, 3);
  param.is_parameter = true;
  param.requires_grad = true;
  param.dtype = tensor::DType::kBFloat16;
  param.location = "cuda:1";
  root.set("param", Value::tensor(param));
  TensorRef master = float_tensor({}, 2, 3);
  master.requires_grad = true;
  root.set("scalar_master", Value::tensor(master));
  Value big = Value::list();
  for (int i = 0; i < 2500; ++i) big.push(Value::integer(i));
  root.set("big", big);
  Value big_dict = Value::dict();
  for (int i = 0; i < 1001; ++i) big_dict.set(Value::integer(i), Value::none());
  root.set("big_dict", big_dict);
  EXPECT_EQ(round_trip(root), root);
}

TEST(Pickle, ValueRefErrorsNameThePath) {
  Value inner = Value::dict();
  inner.set("fp32_groups_flat", Value::dict());
  Value root = Value::dict();
  root.set("optimizer_state_dict", inner);
  const ValueRef ref(root, "");
  try {
    ref["optimizer_state_dict"]["fp32_groups_flat"].list_size();
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(), "optimizer_state_dict.fp32_groups_flat: expected a list, found a dict");
  }
  EXPECT_THROW(ref["missing"], base::Error);
  EXPECT_FALSE(ref.get("missing").has_value());
}

TEST(Pickle, RefusesGlobalsOutsideTheAllowList) {
  const std::string p =
      "\x80\x02"
      "cos\nsystem\nX\x02\0\0\0lsq\x85R.";
  const std::string evil(p.data(), p.size());
  EXPECT_NE(
      error_of(evil).find("refusing to load os.system: loading a checkpoint never executes code"),
      std::string::npos);
  EXPECT_TRUE(is_allowed_global("argparse", "Namespace"));
  EXPECT_TRUE(is_allowed_global("torch", "BFloat16Storage"));
  EXPECT_FALSE(is_allowed_global("builtins", "eval"));
  // STACK_GLOBAL (protocol 4) goes through the same check.
  const std::string p4 = std::string(
      "\x80\x04\x8c\x08"
      "builtins\x8c\x04"
      "eval\x93.",
      20);
  EXPECT_NE(error_of(p4).find("refusing to load builtins.eval"), std::string::npos);
}

TEST(Pickle, MalformedInputFailsCleanly) {
  const std::string good = write_pickle(Value::list({Value::integer(1), Value::string("x")}));
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_NE(error_of(good.substr(0, n)), "") << "prefix " << n;
  }
  EXPECT_NE(error_of("\x80\x02\xff.").find("unsupported pickle opcode 0xff"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02t.").find("no MARK"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02s.").find("stack underflow"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02h\x05.").find("memo get of unknown index 5"), std::string::npos);
  EXPECT_NE(error_of("\x80\x02NN.").find("2 values"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x80\x02}(]K\x01u.", 9)).find("dict key"), std::string::npos);
  // Nesting bomb and memo copy bomb.
  std::string deep = "\x80\x02";
  deep.append(5000, ']');
  deep.append(4999, 'a');
  deep += '.';
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos);
  std::string bomb("\x80\x02]q\x00", 5);
  for (int i = 0; i < 40; ++i) bomb.append("h\x00h\x00\x86q\x00", 7);
  bomb += ".";
  EXPECT_NE(error_of(bomb).find("too many values"), std::string::npos);
}

TEST(Pickle, TensorViewsMustFitTheirStorage) {
  Value ok = Value::tensor(float_tensor({2, 2}, 1, 5));
  EXPECT_NO_THROW(round_trip(ok));
  Value bad = Value::tensor(float_tensor({2, 2}, 2, 5));
  EXPECT_THROW(round_trip(bad), base::Error);
}

}  // namespace
}  // namespace mds::io

namespace mds::io {
namespace {

TEST(PickleStorageClass, MapsTorchStoragesToTensorDTypes) {
  EXPECT_EQ(storage_class_name(tensor::DType::kBFloat16), "BFloat16Storage");
  EXPECT_EQ(dtype_from_storage_class("HalfStorage"), tensor::DType::kFloat16);
  EXPECT_EQ(dtype_from_storage_class("ShortStorage"), tensor::DType::kInt16);
  EXPECT_EQ(dtype_from_storage_class("NoSuchStorage"), std::nullopt);
  // Token datasets use uint16, which torch 1.13 cannot store: refused by name, not miswritten.
  try {
    storage_class_name(tensor::DType::kUInt16);
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(), "PyTorch has no storage class for uint16 tensors");
  }
}

}  // namespace
}  // namespace mds::io
