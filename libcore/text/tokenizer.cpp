#include "text/tokenizer.h"

namespace mds::text {

std::vector<std::int32_t> Tokenizer::encode(std::string_view utf8) const {
  std::vector<std::int32_t> ids;
  make_encoder()->encode(utf8, ids);
  return ids;
}

}  // namespace mds::text
