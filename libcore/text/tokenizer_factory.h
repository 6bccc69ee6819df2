#pragma once
#include <cstdint>
#include <memory>

#include "config/tokenizer_args.h"
#include "text/tokenizer.h"

namespace mds::text {

// Builds the tokenizer named by --tokenizer-type from its files; fails with a message naming the
// missing flag or unreadable file. Unsupported upstream types are rejected with the reason.
std::unique_ptr<Tokenizer> build_tokenizer(const config::TokenizerArgs& args);

// Megatron's padded vocabulary size (data.md §4.1): --pad-vocab-size-to if given (checked),
// else the smallest multiple of divisible_by × tensor_parallel_size that is >= vocab_size.
std::int64_t padded_vocab_size(std::int64_t vocab_size, const config::TokenizerArgs& args,
                               std::int64_t tensor_parallel_size);

}  // namespace mds::text
