// A parsed JSON document as the Python value json.load would give (for ds_config in checkpoints).
#pragma once

#include "config/json_document.h"
#include "io/pickle_value.h"

namespace mds::ckpt {

// Objects become dicts (document order), arrays lists, integral literals ints (floats beyond
// int64, where Python would keep a big int), other numbers floats.
io::Value json_to_value(const config::JsonValue& json);

}  // namespace mds::ckpt
