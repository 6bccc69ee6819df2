#include "ckpt/json_value.h"

namespace mds::ckpt {

io::Value json_to_value(const config::JsonValue& json) {
  using Kind = config::JsonValue::Kind;
  switch (json.kind()) {
    case Kind::kNull:
      return io::Value::none();
    case Kind::kBool:
      return io::Value::boolean(json.as_bool());
    case Kind::kNumber:
      if (json.is_int64()) return io::Value::integer(json.as_int64());
      return io::Value::real(json.as_double());
    case Kind::kString:
      return io::Value::string(json.as_string());
    case Kind::kArray: {
      io::Value list = io::Value::list();
      for (const config::JsonValue& item : json.items()) list.push(json_to_value(item));
      return list;
    }
    case Kind::kObject: {
      io::Value dict = io::Value::dict();
      for (const config::JsonMember& member : json.members()) {
        dict.set(member.key, json_to_value(member.value));
      }
      return dict;
    }
  }
  return io::Value::none();
}

}  // namespace mds::ckpt
