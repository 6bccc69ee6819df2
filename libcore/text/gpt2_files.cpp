#include "text/gpt2_files.h"

#include <cstddef>
#include <filesystem>
#include <limits>
#include <system_error>

#include "base/error.h"
#include "base/mapped_file.h"
#include "config/json_document.h"
#include "text/utf8.h"

namespace mds::text {
namespace {

// Decodes one code point of text already checked to be valid UTF-8.
char32_t decode_valid_utf8(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  char32_t cp;
  std::size_t length;
  if (lead < 0x80) {
    cp = lead;
    length = 1;
  } else if (lead < 0xE0) {
    cp = lead & 0x1Fu;
    length = 2;
  } else if (lead < 0xF0) {
    cp = lead & 0x0Fu;
    length = 3;
  } else {
    cp = lead & 0x07u;
    length = 4;
  }
  for (std::size_t i = 1; i < length; ++i) cp = (cp << 6) | (byte(i) & 0x3Fu);
  pos += length;
  return cp;
}

void check_utf8(std::string_view text, const char* what, const std::string& path) {
  if (const auto bad = find_invalid_utf8(text)) {
    base::fail(what, " ", path, ": invalid UTF-8 at byte offset ", *bad);
  }
}

std::string read_whole_file(const char* what, const std::string& path) {
  std::error_code code;
  if (std::filesystem::is_directory(path, code)) base::fail(what, " ", path, ": is a directory");
  try {
    const base::MappedFile file(path);
    return std::string(file.bytes());
  } catch (const base::Error& error) {
    base::fail(what, ": ", error.what());
  }
}

// Python's str.isspace(), which str.split() splits on.
bool python_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace

std::vector<Gpt2VocabEntry> parse_gpt2_vocab(std::string_view json, const std::string& path) {
  const std::string source = "gpt2 vocab file " + path;
  if (json.substr(0, 3) == "\xEF\xBB\xBF")
    base::fail(source, ": starts with a UTF-8 byte order mark (json.load rejects it)");
  // Python's json.load keeps lone surrogates and lets a repeated key's last id win (the caller
  // does that), so both are allowed here.
  config::JsonOptions options;
  options.allow_duplicate_keys = true;
  options.allow_lone_surrogates = true;
  const auto fail_at = [&](const config::JsonValue& value, const auto&... parts) {
    base::fail(source, ":", value.line(), ":", value.column(), ": ", parts...);
  };
  std::vector<Gpt2VocabEntry> entries;
  entries.reserve(json.size() / 16);  // GPT-2's file averages ~20 bytes an entry
  const auto add = [&](const config::JsonMember& member) {
    const config::JsonValue& id = member.value;
    if (!id.is_number()) fail_at(id, "expected an integer id, got ", config::json_kind_name(id));
    if (!id.is_integral_literal()) fail_at(id, "ids must be integers");
    if (id.is_int64() && id.as_int64() < 0) fail_at(id, "ids must not be negative");
    if (!id.is_int64() || id.as_int64() > std::numeric_limits<std::int32_t>::max())
      fail_at(id, "id does not fit in 31 bits");
    Gpt2VocabEntry entry;
    // Keys are UTF-8, or its generalized form for a lone surrogate: both decode the same way.
    entry.token.reserve(member.key.size());
    for (std::size_t pos = 0; pos < member.key.size();)
      entry.token.push_back(decode_valid_utf8(member.key, pos));
    entry.id = static_cast<std::int32_t>(id.as_int64());
    entries.push_back(std::move(entry));
  };
  // Streamed: a stored tree of 50k members would double the load time.
  const config::JsonValue root = config::parse_json(json, source, options, add);
  if (!root.is_object())
    fail_at(root, "the vocab must be a JSON object, got ", config::json_kind_name(root));
  return entries;
}

std::vector<Gpt2VocabEntry> read_gpt2_vocab(const std::string& path) {
  return parse_gpt2_vocab(read_whole_file("gpt2 vocab file", path), path);
}

std::vector<Gpt2MergeLine> parse_gpt2_merges(std::string_view text, const std::string& path) {
  check_utf8(text, "gpt2 merges file", path);
  std::vector<Gpt2MergeLine> merges;
  std::size_t line_number = 1;
  std::size_t pos = 0;
  // Universal newlines: a line ends at \n, \r\n or a lone \r.
  auto next_line_end = [&](std::size_t from) {
    while (from < text.size() && text[from] != '\n' && text[from] != '\r') ++from;
    return from;
  };
  auto skip_newline = [&](std::size_t at) {
    if (text[at] == '\r' && at + 1 < text.size() && text[at + 1] == '\n') return at + 2;
    return at + 1;
  };
  std::size_t end = next_line_end(pos);
  if (end == text.size()) return merges;  // only a header (or nothing)
  pos = skip_newline(end);
  for (;;) {
    end = next_line_end(pos);
    if (end == text.size()) break;  // the text after the last newline is dropped
    ++line_number;
    std::vector<std::u32string> symbols;
    std::u32string current;
    for (std::size_t i = pos; i < end;) {
      const char32_t c = decode_valid_utf8(text, i);
      if (python_isspace(c)) {
        if (!current.empty()) symbols.push_back(std::move(current));
        current.clear();
      } else {
        current.push_back(c);
      }
    }
    if (!current.empty()) symbols.push_back(std::move(current));
    if (symbols.size() == 2) {
      merges.push_back({std::move(symbols[0]), std::move(symbols[1])});
    } else if (symbols.empty()) {
      merges.emplace_back();
    } else {
      base::fail("gpt2 merges file ", path, " line ", line_number, ": expected two symbols, found ",
                 symbols.size());
    }
    pos = skip_newline(end);
  }
  return merges;
}

std::vector<Gpt2MergeLine> read_gpt2_merges(const std::string& path) {
  return parse_gpt2_merges(read_whole_file("gpt2 merges file", path), path);
}

}  // namespace mds::text
