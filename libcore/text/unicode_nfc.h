#pragma once
#include <string>
#include <string_view>

namespace mds::text {

// Unicode Normalization Form C as the Hugging Face `tokenizers` library 0.19.1 applies it (a
// tokenizer.json "normalizer": {"type": "NFC"}, as in GPT-NeoX-20b and Pythia).
//
// That library's tables are Unicode 9.0, so these are too (unicode_nfc_tables.inc, made by
// scripts/gen_unicode_nfc_tables.py): code points assigned after 9.0 are starters that neither
// decompose nor compose. A current NFC differs from it on the 98 combining marks added since
// (U+07FD, U+0D3B, U+1ABF, ...: not reordered here) and on U+11935 U+11930 (not composed to
// U+11938 here); token ids must follow the library, not the current standard.

// The NFC form of valid UTF-8 text. ASCII-only text and text that passes is_nfc_quick_yes come
// back as a plain copy; otherwise only the spans around the code points that need work are redone.
std::string nfc_normalize(std::string_view utf8);

// True when NFC certainly leaves the valid UTF-8 text unchanged: every code point is a starter that
// NFC keeps as it is and that never composes with the one before it (the "quick yes" of UAX #15).
// False means it may change, not that it does ("e\u0301" changes, "\u0301" alone does not).
bool is_nfc_quick_yes(std::string_view utf8);

}  // namespace mds::text
