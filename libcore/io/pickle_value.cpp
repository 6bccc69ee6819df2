#include "io/pickle_value.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace mds::io {

namespace {

// torch's storage class for each dtype it stores (torch 1.13 has none for uint16).
struct StorageClass {
  tensor::DType dtype;
  std::string_view name;
};

constexpr StorageClass kStorageClasses[] = {
    {tensor::DType::kFloat32, "FloatStorage"},     {tensor::DType::kFloat16, "HalfStorage"},
    {tensor::DType::kBFloat16, "BFloat16Storage"}, {tensor::DType::kFloat64, "DoubleStorage"},
    {tensor::DType::kInt64, "LongStorage"},        {tensor::DType::kInt32, "IntStorage"},
    {tensor::DType::kInt16, "ShortStorage"},       {tensor::DType::kInt8, "CharStorage"},
    {tensor::DType::kUInt8, "ByteStorage"},        {tensor::DType::kBool, "BoolStorage"},
};

}  // namespace

std::string_view storage_class_name(tensor::DType dtype) {
  for (const auto& entry : kStorageClasses) {
    if (entry.dtype == dtype) return entry.name;
  }
  base::fail("PyTorch has no storage class for ", tensor::dtype_name(dtype), " tensors");
}

std::optional<tensor::DType> dtype_from_storage_class(std::string_view name) {
  for (const auto& entry : kStorageClasses) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::int64_t TensorRef::numel() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

bool TensorRef::fits_in(std::int64_t storage_elements) const {
  if (shape.size() != strides.size() || storage_offset < 0) return false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || strides[i] < 0) return false;
    if (shape[i] == 0) return true;  // an empty view reads nothing
  }
  std::int64_t last = storage_offset;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return false;
    }
  }
  return last < storage_elements;
}

std::vector<std::int64_t> TensorRef::contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::real(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.text_ = std::move(s);
  return v;
}

Value Value::bytes(std::string b) {
  Value v;
  v.kind_ = Kind::kBytes;
  v.text_ = std::move(b);
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  for (auto& item : items) v.push(std::move(item));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kTuple;
  for (const auto& item : items) v.note_child(item);
  v.items_ = std::move(items);
  return v;
}

Value Value::dict() {
  Value v;
  v.kind_ = Kind::kDict;
  return v;
}

Value Value::ordered_dict() {
  Value v;
  v.kind_ = Kind::kOrderedDict;
  return v;
}

Value Value::tensor(TensorRef tensor) {
  Value v;
  v.kind_ = Kind::kTensor;
  v.tensor_.push_back(std::move(tensor));
  return v;
}

Value Value::storage(TensorRef storage) {
  Value v;
  v.kind_ = Kind::kStorage;
  v.tensor_.push_back(std::move(storage));
  return v;
}

Value Value::global(std::string module, std::string name) {
  Value v;
  v.kind_ = Kind::kGlobal;
  v.module_ = std::move(module);
  v.name_ = std::move(name);
  return v;
}

Value Value::object(std::string module, std::string name, std::vector<Value> args, bool newobj) {
  Value v;
  v.kind_ = Kind::kObject;
  v.module_ = std::move(module);
  v.name_ = std::move(name);
  v.newobj_ = newobj;
  for (const auto& arg : args) v.note_child(arg);
  v.args_ = std::move(args);
  return v;
}

Value Value::namespace_object(Value attributes) {
  Value v = object("argparse", "Namespace", {}, true);
  v.set_state(std::move(attributes));
  return v;
}

std::string_view Value::kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "a bool";
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "a list";
    case Kind::kTuple:
      return "a tuple";
    case Kind::kDict:
      return "a dict";
    case Kind::kOrderedDict:
      return "an OrderedDict";
    case Kind::kTensor:
      return "a tensor";
    case Kind::kGlobal:
      return "a class reference";
    case Kind::kObject:
      return "an object";
    case Kind::kStorage:
      return "a storage";
  }
  return "an unknown value";
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, std::string_view expected) {
  base::fail("expected ", expected, ", found ", v.kind_name());
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind(*this, "a bool");
  return bool_;
}

std::int64_t Value::as_int() const {
  if (kind_ != Kind::kInt) wrong_kind(*this, "an int");
  return int_;
}

double Value::as_float() const {
  if (kind_ == Kind::kInt) return static_cast<double>(int_);
  if (kind_ != Kind::kFloat) wrong_kind(*this, "a float");
  return float_;
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::kString) wrong_kind(*this, "a str");
  return text_;
}

const std::string& Value::as_bytes() const {
  if (kind_ != Kind::kBytes) wrong_kind(*this, "bytes");
  return text_;
}

const TensorRef& Value::as_tensor() const {
  if (kind_ != Kind::kTensor && kind_ != Kind::kStorage) wrong_kind(*this, "a tensor");
  return tensor_.front();
}

TensorRef& Value::as_tensor() {
  if (kind_ != Kind::kTensor && kind_ != Kind::kStorage) wrong_kind(*this, "a tensor");
  return tensor_.front();
}

void Value::note_child(const Value& child) {
  depth_ = std::max(depth_, child.depth_ + 1);
}

Value& Value::set(Value key, Value value) {
  if (!is_dict_like()) wrong_kind(*this, "a dict");
  if (!key.is(Kind::kString) && !key.is(Kind::kInt)) {
    base::fail("dict keys must be str or int, found ", key.kind_name());
  }
  note_child(value);
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) {
      items_[i] = std::move(value);
      return items_[i];
    }
  }
  keys_.push_back(std::move(key));
  items_.push_back(std::move(value));
  return items_.back();
}

const Value* Value::find(std::string_view key) const {
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i].kind_ == Kind::kString && keys_[i].text_ == key) return &items_[i];
  }
  return nullptr;
}

const Value* Value::find(std::int64_t key) const {
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i].kind_ == Kind::kInt && keys_[i].int_ == key) return &items_[i];
  }
  return nullptr;
}

Value& Value::push(Value item) {
  if (kind_ != Kind::kList && kind_ != Kind::kObject) wrong_kind(*this, "a list");
  note_child(item);
  items_.push_back(std::move(item));
  return items_.back();
}

void Value::set_state(Value state) {
  if (kind_ != Kind::kObject && kind_ != Kind::kOrderedDict) {
    wrong_kind(*this, "an object or OrderedDict");
  }
  note_child(state);
  state_.clear();
  state_.push_back(std::move(state));
}

std::size_t Value::node_count() const {
  std::size_t n = 1;
  for (const auto* group : {&items_, &keys_, &args_, &state_}) {
    for (const auto& child : *group) n += child.node_count();
  }
  return n;
}

namespace {
bool same_tensor(const TensorRef& a, const TensorRef& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides &&
         a.storage_key == b.storage_key && a.storage_offset == b.storage_offset &&
         a.location == b.location && a.requires_grad == b.requires_grad &&
         a.is_parameter == b.is_parameter;
}
}  // namespace

bool Value::operator==(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return bool_ == other.bool_;
    case Kind::kInt:
      return int_ == other.int_;
    // Bitwise, so that NaN payloads and -0.0 survive round trips visibly.
    case Kind::kFloat:
      return std::memcmp(&float_, &other.float_, sizeof float_) == 0;
    case Kind::kString:
    case Kind::kBytes:
      return text_ == other.text_;
    case Kind::kTensor:
    case Kind::kStorage:
      return same_tensor(tensor_.front(), other.tensor_.front());
    default:
      break;
  }
  return module_ == other.module_ && name_ == other.name_ && newobj_ == other.newobj_ &&
         items_ == other.items_ && keys_ == other.keys_ && args_ == other.args_ &&
         state_ == other.state_;
}

// ---- ValueRef -----------------------------------------------------------------------------

void ValueRef::fail_expected(std::string_view expected) const {
  base::fail(path_.empty() ? "<root>" : path_, ": expected ", expected, ", found ",
             value_->kind_name());
}

void ValueRef::expect(Value::Kind kind) const {
  if (value_->kind() != kind) fail_expected(Value::kind_name(kind));
}

void ValueRef::expect_dict() const {
  if (!value_->is_dict_like()) fail_expected("a dict");
}

namespace {
std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : base::cat(parent, ".", key);
}
}  // namespace

ValueRef ValueRef::operator[](std::string_view key) const {
  expect_dict();
  const Value* found = value_->find(key);
  if (!found) base::fail(path_.empty() ? "<root>" : path_, ": missing key '", key, "'");
  return ValueRef(*found, child_path(path_, key));
}

ValueRef ValueRef::operator[](std::size_t index) const {
  if (!value_->is(Value::Kind::kList) && !value_->is(Value::Kind::kTuple)) {
    fail_expected("a list or tuple");
  }
  if (index >= value_->size()) {
    base::fail(path_, ": index ", index, " out of range (size ", value_->size(), ")");
  }
  return ValueRef(value_->items()[index], base::cat(path_, "[", index, "]"));
}

ValueRef ValueRef::at_int_key(std::int64_t key) const {
  expect_dict();
  const Value* found = value_->find(key);
  if (!found) base::fail(path_.empty() ? "<root>" : path_, ": missing key ", key);
  return ValueRef(*found, base::cat(path_, "[", key, "]"));
}

std::optional<ValueRef> ValueRef::get(std::string_view key) const {
  expect_dict();
  const Value* found = value_->find(key);
  if (!found) return std::nullopt;
  return ValueRef(*found, child_path(path_, key));
}

ValueRef ValueRef::object_state() const {
  expect(Value::Kind::kObject);
  if (!value_->state()) base::fail(path_, ": ", value_->qualified_name(), " object has no state");
  return ValueRef(*value_->state(), path_);
}

bool ValueRef::as_bool() const {
  expect(Value::Kind::kBool);
  return value_->as_bool();
}

std::int64_t ValueRef::as_int() const {
  expect(Value::Kind::kInt);
  return value_->as_int();
}

double ValueRef::as_float() const {
  if (!value_->is(Value::Kind::kFloat) && !value_->is(Value::Kind::kInt)) fail_expected("a float");
  return value_->as_float();
}

const std::string& ValueRef::as_string() const {
  expect(Value::Kind::kString);
  return value_->as_string();
}

const std::string& ValueRef::as_bytes() const {
  expect(Value::Kind::kBytes);
  return value_->as_bytes();
}

const TensorRef& ValueRef::as_tensor() const {
  expect(Value::Kind::kTensor);
  return value_->as_tensor();
}

std::size_t ValueRef::list_size() const {
  expect(Value::Kind::kList);
  return value_->size();
}

std::size_t ValueRef::sequence_size() const {
  if (!value_->is(Value::Kind::kList) && !value_->is(Value::Kind::kTuple)) {
    fail_expected("a list or tuple");
  }
  return value_->size();
}

std::size_t ValueRef::dict_size() const {
  expect_dict();
  return value_->size();
}

}  // namespace mds::io
