#include "io/pickle_reader.h"

#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"

namespace mds::io {

namespace {

// Deeper nesting than torch.save can produce (Python's recursion limit is 1000); bounding it keeps
// the recursive Value destructor and copy within the C++ stack on hostile input.
constexpr std::size_t kMaxDepth = 1000;
constexpr std::size_t kMaxGlobalLine = 256;

using Node = std::shared_ptr<Value>;

class PickleReader {
 public:
  PickleReader(std::string_view bytes, std::string_view source)
      : bytes_(bytes), source_(source), copy_budget_(16 * bytes.size() + 65536) {}

  Value run() {
    scan_memo_gets();
    while (true) {
      if (pos_ >= bytes_.size()) error("truncated pickle (no STOP opcode)");
      op_start_ = pos_;
      const auto code = static_cast<unsigned char>(bytes_[pos_++]);
      if (code == '.') break;
      step(code);
    }
    if (!marks_.empty()) error("STOP inside an unclosed MARK");
    if (stack_.size() != 1) error("STOP with ", stack_.size(), " values on the stack (want 1)");
    return take(pop());
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    base::fail(source_, ": pickle offset ", op_start_, ": ", parts...);
  }

  std::string_view read(std::size_t n) {
    if (n > bytes_.size() - pos_) error("truncated pickle");
    const auto out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  std::uint64_t read_le(std::size_t n) {
    const auto raw = read(n);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= std::uint64_t{static_cast<unsigned char>(raw[i])} << (8 * i);
    return v;
  }

  std::string_view read_line() {
    const auto end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos) error("truncated pickle (GLOBAL without newline)");
    if (end - pos_ > kMaxGlobalLine) error("GLOBAL name longer than ", kMaxGlobalLine, " bytes");
    const auto line = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return line;
  }

  // The stack floor is the innermost MARK: values below it belong to an enclosing frame.
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  void push(Value v) { stack_.push_back(std::make_shared<Value>(std::move(v))); }

  Node pop() {
    if (stack_.size() <= floor()) error("stack underflow");
    Node n = std::move(stack_.back());
    stack_.pop_back();
    return n;
  }

  Value& top() {
    if (stack_.size() <= floor()) error("stack underflow");
    return *stack_.back();
  }

  // A node only the stack holds can be moved into its parent; one the memo also holds is copied
  // (Python would share it), against a budget so that repeated gets cannot blow up memory.
  Value take(Node node) {
    if (node.use_count() == 1) return std::move(*node);
    const std::size_t cost = node->node_count();
    if (cost > copy_budget_) error("memo references expand to too many values");
    copy_budget_ -= cost;
    return *node;
  }

  std::vector<Value> pop_mark() {
    if (marks_.empty()) error("no MARK on the stack");
    const std::size_t start = marks_.back();
    marks_.pop_back();
    std::vector<Value> items;
    items.reserve(stack_.size() - start);
    for (std::size_t i = start; i < stack_.size(); ++i) items.push_back(take(std::move(stack_[i])));
    stack_.resize(start);
    return items;
  }

  void check_depth(const Value& v) {
    if (v.depth() > kMaxDepth) error("values nested deeper than ", kMaxDepth, " levels");
  }

  // Python's pickler memoizes nearly every object but fetches few again (classes, some strings).
  // Keeping only the entries a later BINGET needs lets containers move into their parents instead
  // of being copied because the memo still references them.
  void scan_memo_gets() {
    std::size_t pos = pos_;
    const auto skip = [&](std::uint64_t n) {
      pos = n > bytes_.size() - pos ? bytes_.size() : pos + n;
    };
    const auto le = [&](std::size_t n) {
      std::uint64_t v = 0;
      for (std::size_t i = 0; i < n && pos + i < bytes_.size(); ++i) {
        v |= std::uint64_t{static_cast<unsigned char>(bytes_[pos + i])} << (8 * i);
      }
      skip(n);
      return v;
    };
    while (pos < bytes_.size()) {
      switch (static_cast<unsigned char>(bytes_[pos++])) {
        case 0x80:
        case 'K':
        case 'q':
        case 'U':
        case 'C':
        case 0x8c:
        case 0x8a:
          if (const auto op = static_cast<unsigned char>(bytes_[pos - 1]);
              op == 'U' || op == 'C' || op == 0x8c || op == 0x8a) {
            skip(le(1));
          } else {
            skip(1);
          }
          break;
        case 'M':
          skip(2);
          break;
        case 'J':
        case 'r':
          skip(4);
          break;
        case 'X':
        case 'T':
        case 'B':
        case 0x8b:
          skip(le(4));
          break;
        case 0x8d:
        case 0x8e:
          skip(le(8));
          break;
        case 'G':
        case 0x95:
          skip(8);
          break;
        case 'h':
          fetched_.insert(le(1));
          break;
        case 'j':
          fetched_.insert(le(4));
          break;
        case 0x94:
          keep_all_memo_ = true;
          break;  // MEMOIZE numbers entries by memo size
        case 'c':
          for (int line = 0; line < 2; ++line) {
            const auto end = bytes_.find('\n', pos);
            pos = end == std::string_view::npos ? bytes_.size() : end + 1;
          }
          break;
        case '.':
          return;
        default:
          break;
      }
    }
  }

  void memo_put(std::uint64_t index) {
    if (stack_.size() <= floor()) error("memo put with an empty stack");
    if (keep_all_memo_ || fetched_.count(index)) {
      memo_[index] = stack_.back();
    } else {
      memo_.erase(index);  // a later put may reuse an index; a stale entry must not survive
    }
  }

  void memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) error("memo get of unknown index ", index);
    stack_.push_back(it->second);
  }

  std::int64_t decode_long(std::string_view raw) {
    if (raw.empty()) return 0;
    if (raw.size() > 8) error("integer wider than 64 bits");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < raw.size(); ++i)
      v |= std::uint64_t{static_cast<unsigned char>(raw[i])} << (8 * i);
    if (raw.size() < 8 && (static_cast<unsigned char>(raw.back()) & 0x80))
      v |= ~std::uint64_t{0} << (8 * raw.size());
    return static_cast<std::int64_t>(v);
  }

  void add_items(Value& target, std::vector<Value> items) {
    if (!target.is(Value::Kind::kList) && !target.is(Value::Kind::kObject)) {
      error("APPEND to ", target.kind_name());
    }
    for (auto& item : items) target.push(std::move(item));
    check_depth(target);
  }

  void set_items(Value& target, std::vector<Value> items) {
    if (!target.is_dict_like()) error("SETITEM on ", target.kind_name());
    if (items.size() % 2 != 0) error("SETITEMS with an odd number of values");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      const auto& key = items[i];
      if (!key.is(Value::Kind::kString) && !key.is(Value::Kind::kInt)) {
        error("dict key must be a str or int, found ", key.kind_name());
      }
      target.set(std::move(items[i]), std::move(items[i + 1]));
    }
    check_depth(target);
  }

  void global(std::string module, std::string name) {
    if (!is_allowed_global(module, name)) {
      error("refusing to load ", module, ".", name, ": loading a checkpoint never executes code");
    }
    push(Value::global(std::move(module), std::move(name)));
  }

  Value storage(Value pid) {
    if (!pid.is(Value::Kind::kTuple))
      error("persistent id must be a tuple, found ", pid.kind_name());
    const auto& f = pid.items();
    if (f.size() != 5 || !f[0].is(Value::Kind::kString) || f[0].as_string() != "storage") {
      error("persistent id is not a ('storage', type, key, location, numel) tuple");
    }
    if (!f[1].is(Value::Kind::kGlobal) || f[1].module() != "torch")
      error("storage type is not a torch storage class");
    const auto dtype = dtype_from_storage_class(f[1].name());
    if (!dtype) error("unsupported storage type torch.", f[1].name());
    if (!f[2].is(Value::Kind::kString) || f[2].as_string().empty())
      error("storage key must be a non-empty str");
    if (!f[3].is(Value::Kind::kString)) error("storage location must be a str");
    if (!f[4].is(Value::Kind::kInt) || f[4].as_int() < 0)
      error("storage size must be a non-negative int");
    TensorRef t;
    t.dtype = *dtype;
    t.storage_key = f[2].as_string();
    t.location = f[3].as_string();
    t.storage_numel = f[4].as_int();
    return Value::storage(std::move(t));
  }

  std::vector<std::int64_t> int_tuple(const Value& v, const char* what) {
    if (!v.is(Value::Kind::kTuple))
      error("tensor ", what, " must be a tuple, found ", v.kind_name());
    std::vector<std::int64_t> out;
    for (const auto& item : v.items()) {
      if (!item.is(Value::Kind::kInt) || item.as_int() < 0)
        error("tensor ", what, " must hold non-negative ints");
      out.push_back(item.as_int());
    }
    return out;
  }

  Value rebuild_tensor(const std::vector<Value>& args) {
    if (args.size() != 6 && args.size() != 7)
      error("_rebuild_tensor_v2 takes 6 or 7 arguments, got ", args.size());
    if (!args[0].is(Value::Kind::kStorage))
      error("_rebuild_tensor_v2: first argument is not a storage");
    TensorRef t = args[0].as_tensor();
    if (!args[1].is(Value::Kind::kInt) || args[1].as_int() < 0)
      error("tensor storage offset must be a non-negative int");
    t.storage_offset = args[1].as_int();
    t.shape = int_tuple(args[2], "size");
    t.strides = int_tuple(args[3], "stride");
    if (t.shape.size() != t.strides.size())
      error("tensor has ", t.shape.size(), " sizes but ", t.strides.size(), " strides");
    if (!args[4].is(Value::Kind::kBool)) error("tensor requires_grad must be a bool");
    t.requires_grad = args[4].as_bool();
    if (!t.fits_in(t.storage_numel)) {
      error("tensor view (offset ", t.storage_offset, ") reaches past its storage of ",
            t.storage_numel, " elements");
    }
    return Value::tensor(std::move(t));
  }

  Value reduce(const Value& callable, std::vector<Value> args) {
    const auto& module = callable.module();
    const auto& name = callable.name();
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return rebuild_tensor(args);
    if (module == "torch._utils" && name == "_rebuild_parameter") {
      if (args.size() != 3 || !args[0].is(Value::Kind::kTensor) ||
          !args[1].is(Value::Kind::kBool)) {
        error("_rebuild_parameter takes (tensor, requires_grad, hooks)");
      }
      Value v = std::move(args[0]);
      v.as_tensor().is_parameter = true;
      v.as_tensor().requires_grad = args[1].as_bool();
      return v;
    }
    if (module == "collections" && name == "OrderedDict") {
      if (!args.empty()) error("OrderedDict built from arguments is not supported");
      return Value::ordered_dict();
    }
    if ((module == "__builtin__" || module == "builtins") && name == "bytes" && args.empty()) {
      return Value::bytes("");
    }
    if (module == "_codecs" && name == "encode") return codecs_encode(args);
    return Value::object(module, name, std::move(args), false);
  }

  // bytes pickled at protocol 2: _codecs.encode(text, "latin1"), text holding code points < 256.
  Value codecs_encode(const std::vector<Value>& args) {
    if (args.size() != 2 || !args[0].is(Value::Kind::kString) ||
        !args[1].is(Value::Kind::kString) ||
        (args[1].as_string() != "latin1" && args[1].as_string() != "latin-1")) {
      error("_codecs.encode is only supported as encode(str, 'latin1')");
    }
    const auto& text = args[0].as_string();
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < text.size() &&
                 (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
        out +=
            static_cast<char>((c & 0x03) << 6 | (static_cast<unsigned char>(text[i + 1]) & 0x3F));
        ++i;
      } else {
        error("_codecs.encode: text is not latin-1");
      }
    }
    return Value::bytes(std::move(out));
  }

  void step(unsigned char code) {
    switch (code) {
      case 0x80:  // PROTO
        if (static_cast<unsigned char>(read(1)[0]) > 5) error("unsupported pickle protocol");
        return;
      case 0x95:
        read(8);
        return;  // FRAME: framing is irrelevant with the whole stream in memory
      case '(':
        marks_.push_back(stack_.size());
        return;
      case 'N':
        return push(Value::none());
      case 0x88:
        return push(Value::boolean(true));
      case 0x89:
        return push(Value::boolean(false));
      case 'J':
        return push(Value::integer(static_cast<std::int32_t>(read_le(4))));
      case 'K':
        return push(Value::integer(static_cast<std::int64_t>(read_le(1))));
      case 'M':
        return push(Value::integer(static_cast<std::int64_t>(read_le(2))));
      case 0x8a:
        return push(Value::integer(decode_long(read(read_le(1)))));
      case 0x8b:
        return push(Value::integer(decode_long(read(read_le(4)))));
      case 'G': {
        std::uint64_t bits = 0;
        for (const char c : read(8)) bits = bits << 8 | static_cast<unsigned char>(c);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return push(Value::real(d));
      }
      case 'X':
        return push(Value::string(std::string(read(read_le(4)))));
      case 0x8c:
        return push(Value::string(std::string(read(read_le(1)))));
      case 0x8d:
        return push(Value::string(std::string(read(read_le(8)))));
      case 'U':
        return push(Value::string(std::string(read(read_le(1)))));
      case 'T':
        return push(Value::string(std::string(read(read_le(4)))));
      case 'C':
        return push(Value::bytes(std::string(read(read_le(1)))));
      case 'B':
        return push(Value::bytes(std::string(read(read_le(4)))));
      case 0x8e:
        return push(Value::bytes(std::string(read(read_le(8)))));
      case ')':
        return push(Value::tuple());
      case 't':
        return push(Value::tuple(pop_mark()));
      case 0x85:
      case 0x86:
      case 0x87: {
        const std::size_t n = code - 0x84u;
        if (stack_.size() < floor() + n) error("stack underflow");
        std::vector<Value> items;
        for (std::size_t i = stack_.size() - n; i < stack_.size(); ++i)
          items.push_back(take(std::move(stack_[i])));
        stack_.resize(stack_.size() - n);
        Value t = Value::tuple(std::move(items));
        check_depth(t);
        return push(std::move(t));
      }
      case ']':
        return push(Value::list());
      case '}':
        return push(Value::dict());
      case 0x8f:
        return push(Value::object("builtins", "set", {}, false));  // EMPTY_SET
      case 'a': {
        Value item = take(pop());
        std::vector<Value> one;
        one.push_back(std::move(item));
        return add_items(top(), std::move(one));
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        auto items = pop_mark();
        return add_items(top(), std::move(items));
      }
      case 's': {
        Value value = take(pop());
        Value key = take(pop());
        std::vector<Value> pair;
        pair.push_back(std::move(key));
        pair.push_back(std::move(value));
        return set_items(top(), std::move(pair));
      }
      case 'u': {
        auto items = pop_mark();
        return set_items(top(), std::move(items));
      }
      case 'c': {
        std::string module(read_line());
        std::string name(read_line());
        return global(std::move(module), std::move(name));
      }
      case 0x93: {  // STACK_GLOBAL
        const Value name = take(pop());
        const Value module = take(pop());
        if (!name.is(Value::Kind::kString) || !module.is(Value::Kind::kString))
          error("STACK_GLOBAL needs two str");
        return global(module.as_string(), name.as_string());
      }
      case 'R': {
        Value args = take(pop());
        const Node callable = pop();
        if (!callable->is(Value::Kind::kGlobal))
          error("REDUCE on ", callable->kind_name(), ", not a class");
        if (!args.is(Value::Kind::kTuple)) error("REDUCE arguments must be a tuple");
        Value out = reduce(*callable, std::move(args.items()));
        check_depth(out);
        return push(std::move(out));
      }
      case 0x81: {  // NEWOBJ
        Value args = take(pop());
        const Node cls = pop();
        if (!cls->is(Value::Kind::kGlobal)) error("NEWOBJ on ", cls->kind_name(), ", not a class");
        if (!args.is(Value::Kind::kTuple)) error("NEWOBJ arguments must be a tuple");
        Value out = Value::object(cls->module(), cls->name(), std::move(args.items()), true);
        check_depth(out);
        return push(std::move(out));
      }
      case 'b': {  // BUILD
        Value state = take(pop());
        Value& target = top();
        if (!target.is(Value::Kind::kObject) && !target.is(Value::Kind::kOrderedDict)) {
          error("BUILD on ", target.kind_name(), " is not supported");
        }
        target.set_state(std::move(state));
        return check_depth(target);
      }
      case 'Q':
        return push(storage(take(pop())));
      case 'q':
        return memo_put(read_le(1));
      case 'r':
        return memo_put(read_le(4));
      case 0x94:
        return memo_put(memo_.size());  // MEMOIZE
      case 'h':
        return memo_get(read_le(1));
      case 'j':
        return memo_get(read_le(4));
      case '0':
        pop();
        return;
      case '1':
        pop_mark();
        return;
      default:
        break;
    }
    error("unsupported pickle opcode 0x", "0123456789abcdef"[code >> 4],
          "0123456789abcdef"[code & 15]);
  }

  std::string_view bytes_;
  std::string_view source_;
  std::size_t pos_ = 0;
  std::size_t op_start_ = 0;
  std::size_t copy_budget_;
  std::vector<Node> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Node> memo_;
  std::unordered_set<std::uint64_t> fetched_;
  bool keep_all_memo_ = false;
};

}  // namespace

Value read_pickle(std::string_view bytes, std::string_view source) {
  return PickleReader(bytes, source).run();
}

}  // namespace mds::io
