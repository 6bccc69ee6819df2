#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

// The values a PyTorch/DeepSpeed checkpoint holds, as a plain tree: what pickle_reader builds from
// a `data.pkl` stream and what pickle_writer turns back into one. Nothing here can run code:
// classes are kept by name only (Value::kGlobal, Value::kObject).
namespace mds::io {

// torch's storage class of a dtype ("FloatStorage", "BFloat16Storage", …); fails for dtypes torch
// has no storage for (uint16).
std::string_view storage_class_name(tensor::DType dtype);
std::optional<tensor::DType> dtype_from_storage_class(std::string_view name);

// A tensor as torch pickles it: a view (shape, strides, offset, all in elements) into a storage
// that lives in its own record `data/<storage_key>` of the .pt file; several tensors may share one.
struct TensorRef {
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::string storage_key;
  std::int64_t storage_offset = 0;
  std::int64_t storage_numel = 0;  // elements of the whole storage (filled by the reader)
  std::string location = "cpu";    // "cpu" or "cuda:N"; informational only
  bool requires_grad = false;
  bool is_parameter = false;  // pickled through torch._utils._rebuild_parameter

  std::int64_t numel() const;
  // Whether every element of the view lies inside a storage of `storage_elements` elements (shape,
  // strides and offset non-negative; overflow-safe).
  bool fits_in(std::int64_t storage_elements) const;
  // Contiguous (row-major) strides for `shape`.
  static std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);
};

class Value {
 public:
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,  // UTF-8 text
    kBytes,
    kList,
    kTuple,
    kDict,         // insertion-ordered, keys are kString or kInt
    kOrderedDict,  // collections.OrderedDict; may carry a BUILD state (Module.state_dict's
                   // _metadata)
    kTensor,
    kGlobal,   // a bare reference to a class or constant, e.g. torch.float16
    kObject,   // an instance: class name, constructor args, BUILD state, appended items
    kStorage,  // internal to the reader: a persistent storage reference before it becomes a tensor
  };

  Value() = default;
  static Value none() { return Value(); }
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value real(double d);
  static Value string(std::string s);
  static Value bytes(std::string b);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items = {});
  static Value dict();
  static Value ordered_dict();
  static Value tensor(TensorRef tensor);
  // A bare storage reference (shape and strides unused).
  static Value storage(TensorRef storage);
  static Value global(std::string module, std::string name);
  // `newobj` selects how the writer constructs it: cls.__new__(cls, *args) (NEWOBJ, e.g.
  // argparse.Namespace) or a call (REDUCE, e.g. torch.Size, enums).
  static Value object(std::string module, std::string name, std::vector<Value> args, bool newobj);
  // argparse.Namespace with the given attribute dict.
  static Value namespace_object(Value attributes);

  Kind kind() const { return kind_; }
  static std::string_view kind_name(Kind kind);
  std::string_view kind_name() const { return kind_name(kind_); }
  bool is(Kind kind) const { return kind_ == kind; }
  bool is_dict_like() const { return kind_ == Kind::kDict || kind_ == Kind::kOrderedDict; }

  // Unchecked-by-path accessors (they fail with a generic message); use ValueRef for messages that
  // name where in the checkpoint a value sits.
  bool as_bool() const;
  std::int64_t as_int() const;
  double as_float() const;  // ints convert, as Python would
  const std::string& as_string() const;
  const std::string& as_bytes() const;
  const TensorRef& as_tensor() const;
  TensorRef& as_tensor();

  // Items of a list or tuple, values of a dict, appended items of an object (deque, set).
  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& items() { return items_; }
  // Keys of a dict; parallel to items().
  const std::vector<Value>& keys() const { return keys_; }
  std::size_t size() const { return items_.size(); }

  // Dicts: insert or replace (Python semantics: a repeated key keeps its first position).
  Value& set(Value key, Value value);
  Value& set(std::string_view key, Value value) {
    return set(string(std::string(key)), std::move(value));
  }
  const Value* find(std::string_view key) const;
  const Value* find(std::int64_t key) const;
  Value& push(Value item);  // lists

  // kGlobal / kObject
  const std::string& module() const { return module_; }
  const std::string& name() const { return name_; }
  std::string qualified_name() const { return module_ + "." + name_; }
  const std::vector<Value>& args() const { return args_; }
  std::vector<Value>& args() { return args_; }
  bool newobj() const { return newobj_; }
  // BUILD state of an object or OrderedDict; null when there was none.
  const Value* state() const { return state_.empty() ? nullptr : &state_.front(); }
  void set_state(Value state);

  // Nesting depth (a scalar is 1); kept up to date by set/push so readers can bound recursion.
  std::size_t depth() const { return depth_; }
  // Number of Value nodes in this tree.
  std::size_t node_count() const;

  bool operator==(const Value& other) const;

 private:
  void note_child(const Value& child);

  Kind kind_ = Kind::kNone;
  bool bool_ = false;
  bool newobj_ = false;
  std::int64_t int_ = 0;
  double float_ = 0;
  std::string text_;  // string or bytes
  std::string module_;
  std::string name_;
  std::vector<Value> items_;
  std::vector<Value> keys_;
  std::vector<Value> args_;
  std::vector<Value> state_;       // zero or one element
  std::vector<TensorRef> tensor_;  // one element for kTensor / kStorage
  std::size_t depth_ = 1;
};

// A value together with its path from the root, so that a checkpoint loader's expectations fail
// with messages like "optimizer_state_dict.fp32_groups_flat: expected a list, found a dict".
class ValueRef {
 public:
  ValueRef(const Value& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const Value& value() const { return *value_; }
  const std::string& path() const { return path_; }
  Value::Kind kind() const { return value_->kind(); }

  ValueRef operator[](std::string_view key) const;  // dict entry; fails if absent
  ValueRef operator[](std::size_t index) const;     // list/tuple item
  ValueRef at_int_key(std::int64_t key) const;      // dict entry with an int key
  std::optional<ValueRef> get(std::string_view key) const;
  // The BUILD state of an object (e.g. argparse.Namespace's attribute dict).
  ValueRef object_state() const;

  bool as_bool() const;
  std::int64_t as_int() const;
  double as_float() const;
  const std::string& as_string() const;
  const std::string& as_bytes() const;
  const TensorRef& as_tensor() const;
  // Checks the kind (a list, or either of list/tuple with `sequence`) and returns the size.
  std::size_t list_size() const;
  std::size_t sequence_size() const;
  std::size_t dict_size() const;
  bool is_none() const { return value_->is(Value::Kind::kNone); }

  [[noreturn]] void fail_expected(std::string_view expected) const;

 private:
  void expect(Value::Kind kind) const;
  void expect_dict() const;

  const Value* value_;
  std::string path_;
};

}  // namespace mds::io
