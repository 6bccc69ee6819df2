#include "io/pickle_writer.h"

#include <bit>
#include <cstring>
#include <map>

#include "base/error.h"

namespace mds::io {

namespace {

// Python's pickler flushes list and dict items in batches of this many.
constexpr std::size_t kBatchSize = 1000;

class PickleWriter {
 public:
  explicit PickleWriter(const StorageNumel& storage_numel) : storage_numel_(storage_numel) {}

  std::string finish(const Value& root) {
    out_ += "\x80\x02";
    save(root);
    out_ += '.';
    return std::move(out_);
  }

 private:
  void op(char code) { out_ += code; }

  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>(v >> (8 * i) & 0xFF);
  }

  void memoize() {
    if (next_memo_ < 256) {
      op('q');
      out_ += static_cast<char>(next_memo_);
    } else {
      op('r');
      u32(next_memo_);
    }
    ++next_memo_;
  }

  void get(std::uint32_t index) {
    if (index < 256) {
      op('h');
      out_ += static_cast<char>(index);
    } else {
      op('j');
      u32(index);
    }
  }

  // Classes are one object in Python, so the pickler writes each GLOBAL once and then memo gets.
  void global(const std::string& module, const std::string& name) {
    const std::string key = module + '\n' + name;
    if (const auto it = globals_.find(key); it != globals_.end()) return get(it->second);
    op('c');
    out_ += key;
    out_ += '\n';
    globals_.emplace(key, next_memo_);
    memoize();
  }

  void save_int(std::int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      op('K');
      out_ += static_cast<char>(v);
    } else if (v >= 0 && v <= 0xFFFF) {
      op('M');
      out_ += static_cast<char>(v & 0xFF);
      out_ += static_cast<char>(v >> 8);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      u32(static_cast<std::uint32_t>(v));
    } else {
      // LONG1: Python's encode_long, the minimal little-endian two's complement.
      const auto u = static_cast<std::uint64_t>(v);
      const std::uint64_t magnitude = v < 0 ? ~u + 1 : u;
      const int bit_length = 64 - std::countl_zero(magnitude);
      std::size_t n = static_cast<std::size_t>(bit_length / 8 + 1);
      char bytes[9];
      for (std::size_t i = 0; i < 9; ++i) {
        bytes[i] = static_cast<char>(i < 8 ? (u >> (8 * i)) & 0xFF : (v < 0 ? 0xFF : 0));
      }
      if (v < 0 && n > 1 && static_cast<unsigned char>(bytes[n - 1]) == 0xFF &&
          (static_cast<unsigned char>(bytes[n - 2]) & 0x80) != 0) {
        --n;
      }
      op('\x8a');
      out_ += static_cast<char>(n);
      out_.append(bytes, n);
    }
  }

  void save_float(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    op('G');
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>(bits >> (8 * i) & 0xFF);
  }

  void save_string_raw(const std::string& s) {
    if (s.size() > 0xFFFFFFFFu) base::fail("pickle: string of ", s.size(), " bytes is too long");
    op('X');
    u32(static_cast<std::uint32_t>(s.size()));
    out_ += s;
  }

  void save_string(const std::string& s) {
    save_string_raw(s);
    memoize();
  }

  // Strings that are one constant object in torch's pickling code, hence memo gets after the first.
  void save_shared_string(const std::string& s) {
    if (const auto it = shared_strings_.find(s); it != shared_strings_.end()) {
      return get(it->second);
    }
    shared_strings_.emplace(s, next_memo_);
    save_string(s);
  }

  // Protocol 2 has no bytes opcode: Python writes _codecs.encode(latin-1 text, "latin1").
  void save_bytes(const std::string& b) {
    if (b.empty()) {
      global("__builtin__", "bytes");
      op(')');
      op('R');
      memoize();
      return;
    }
    global("_codecs", "encode");
    std::string text;
    for (const char c : b) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x80) {
        text += c;
      } else {
        text += static_cast<char>(0xC0 | byte >> 6);
        text += static_cast<char>(0x80 | (byte & 0x3F));
      }
    }
    save_string(text);
    save_shared_string("latin1");
    op('\x86');
    memoize();
    op('R');
    memoize();
  }

  void save_tuple(const std::vector<Value>& items) {
    if (items.empty()) return op(')');
    if (items.size() > 3) op('(');
    for (const auto& item : items) save(item);
    static constexpr char kSmall[] = {'\x85', '\x86', '\x87'};
    op(items.size() > 3 ? 't' : kSmall[items.size() - 1]);
    memoize();
  }

  void save_int_tuple(const std::vector<std::int64_t>& ints) {
    std::vector<Value> items;
    for (const auto i : ints) items.push_back(Value::integer(i));
    save_tuple(items);
  }

  void batch_appends(const std::vector<Value>& items) {
    for (std::size_t start = 0; start < items.size(); start += kBatchSize) {
      const std::size_t end = std::min(items.size(), start + kBatchSize);
      if (end - start == 1) {
        save(items[start]);
        op('a');
        continue;
      }
      op('(');
      for (std::size_t i = start; i < end; ++i) save(items[i]);
      op('e');
    }
  }

  void batch_setitems(const Value& dict) {
    const auto& keys = dict.keys();
    const auto& values = dict.items();
    for (std::size_t start = 0; start < keys.size(); start += kBatchSize) {
      const std::size_t end = std::min(keys.size(), start + kBatchSize);
      if (end - start == 1) {
        save(keys[start]);
        save(values[start]);
        op('s');
        continue;
      }
      op('(');
      for (std::size_t i = start; i < end; ++i) {
        save(keys[i]);
        save(values[i]);
      }
      op('u');
    }
  }

  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
    memoize();
  }

  void save_tensor(const TensorRef& t) {
    if (t.shape.size() != t.strides.size()) {
      base::fail("pickle: tensor with ", t.shape.size(), " sizes but ", t.strides.size(),
                 " strides");
    }
    if (t.is_parameter) global("torch._utils", "_rebuild_parameter");
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');
    save_shared_string("storage");
    global("torch", std::string(storage_class_name(t.dtype)));
    save_string(t.storage_key);
    save_shared_string(t.location);
    save_int(storage_numel_ ? storage_numel_(t) : t.storage_numel);
    op('t');
    memoize();
    op('Q');
    save_int(t.storage_offset);
    save_int_tuple(t.shape);
    save_int_tuple(t.strides);
    // A parameter's data tensor is pickled detached; the flag travels in the outer tuple.
    op(t.requires_grad && !t.is_parameter ? '\x88' : '\x89');
    empty_ordered_dict();
    op('t');
    memoize();
    op('R');
    memoize();
    if (t.is_parameter) {
      op(t.requires_grad ? '\x88' : '\x89');
      empty_ordered_dict();
      op('\x87');
      memoize();
      op('R');
      memoize();
    }
  }

  void save_object(const Value& v) {
    global(v.module(), v.name());
    save_tuple(v.args());
    op(v.newobj() ? '\x81' : 'R');
    memoize();
    if (!v.items().empty()) batch_appends(v.items());
    if (v.state()) {
      save(*v.state());
      op('b');
    }
  }

  void save(const Value& v) {
    using Kind = Value::Kind;
    switch (v.kind()) {
      case Kind::kNone:
        return op('N');
      case Kind::kBool:
        return op(v.as_bool() ? '\x88' : '\x89');
      case Kind::kInt:
        return save_int(v.as_int());
      case Kind::kFloat:
        return save_float(v.as_float());
      case Kind::kString:
        return save_string(v.as_string());
      case Kind::kBytes:
        return save_bytes(v.as_bytes());
      case Kind::kTuple:
        return save_tuple(v.items());
      case Kind::kList:
        op(']');
        memoize();
        return batch_appends(v.items());
      case Kind::kDict:
        op('}');
        memoize();
        return batch_setitems(v);
      case Kind::kOrderedDict:
        empty_ordered_dict();
        batch_setitems(v);
        if (v.state()) {
          save(*v.state());
          op('b');
        }
        return;
      case Kind::kTensor:
        return save_tensor(v.as_tensor());
      case Kind::kGlobal:
        return global(v.module(), v.name());
      case Kind::kObject:
        return save_object(v);
      case Kind::kStorage:
        break;
    }
    base::fail("pickle: cannot write ", v.kind_name());
  }

  const StorageNumel& storage_numel_;
  std::string out_;
  std::uint32_t next_memo_ = 0;
  std::map<std::string, std::uint32_t> globals_;
  std::map<std::string, std::uint32_t> shared_strings_;
};

}  // namespace

std::string write_pickle(const Value& root, const StorageNumel& storage_numel) {
  return PickleWriter(storage_numel).finish(root);
}

}  // namespace mds::io
