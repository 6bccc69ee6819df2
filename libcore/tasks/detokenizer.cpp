#include "tasks/detokenizer.h"

#include <cctype>
#include <initializer_list>
#include <utility>

#include "tasks/python_text.h"

namespace mds::tasks {
namespace {

// Python's str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text, pos);
  return out;
}

std::string replace_each(
    std::string text, std::initializer_list<std::pair<std::string_view, std::string_view>> rules) {
  for (const auto& [from, to] : rules) text = replace_all(text, from, to);
  return text;
}

// re.sub(r"/' [0-9]/", "/'[0-9]/", text).
std::string replace_slash_quote_digit(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (pos + 5 <= text.size() && text.compare(pos, 3, "/' ") == 0 &&
        std::isdigit(static_cast<unsigned char>(text[pos + 3])) && text[pos + 4] == '/') {
      out += "/'[0-9]/";
      pos += 5;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// re.sub(r"O\s*([^C]*?)\s*C", r"O\1C", text) for an opening and closing ASCII character: the
// lazy group takes everything up to the first closer, so the match is the text between an opener
// and the next closer with Python whitespace stripped at both ends. An opener without a closer
// after it does not match; the scan goes on after it.
std::string strip_inside(std::string_view text, char open, char close) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  std::size_t no_closer_from = std::string_view::npos;  // no closer at or after this byte
  while (pos < text.size()) {
    const std::size_t opener = text.find(open, pos);
    if (opener == std::string_view::npos) break;
    out.append(text, pos, opener - pos);
    std::size_t closer = std::string_view::npos;
    if (no_closer_from == std::string_view::npos || opener + 1 < no_closer_from) {
      closer = text.find(close, opener + 1);
      if (closer == std::string_view::npos) no_closer_from = opener + 1;
    }
    if (closer == std::string_view::npos) {
      out += open;
      pos = opener + 1;
      continue;
    }
    out += open;
    out += python_strip(text.substr(opener + 1, closer - opener - 1));
    out += close;
    pos = closer + 1;
  }
  out.append(text, pos);
  return out;
}

}  // namespace

std::string ptb_detokenize(std::string_view text) {
  return replace_each(std::string(text), {{" '", "'"},
                                          {" \n", "\n"},
                                          {"\n ", "\n"},
                                          {" n't", "n't"},
                                          {" N ", "1 "},
                                          {"$ 1", "$1"},
                                          {"# 1", "#1"}});
}

std::string wikitext_detokenize(std::string_view text) {
  std::string s = replace_all(text, "s '", "s'");  // contractions
  s = replace_slash_quote_digit(s);
  s = replace_each(std::move(s), {{" @-@ ", "-"},  // number separators
                                  {" @,@ ", ","},
                                  {" @.@ ", "."},
                                  {" : ", ": "},  // punctuation
                                  {" ; ", "; "},
                                  {" . ", ". "},
                                  {" ! ", "! "},
                                  {" ? ", "? "},
                                  {" , ", ", "}});
  s = strip_inside(s, '(', ')');  // double brackets
  s = strip_inside(s, '[', ']');
  s = strip_inside(s, '{', '}');
  s = strip_inside(s, '"', '"');
  s = strip_inside(s, '\'', '\'');
  return replace_each(std::move(s), {{"= = = =", "===="},  // miscellaneous
                                     {"= = =", "==="},
                                     {"= =", "=="},
                                     {" \u00b0 ", "\u00b0"},
                                     {" \n", "\n"},
                                     {"\n ", "\n"},
                                     {" N ", " 1 "},
                                     {" 's", "'s"}});
}

std::string detokenize(Detokenizer kind, std::string_view text) {
  switch (kind) {
    case Detokenizer::kPtb:
      return ptb_detokenize(text);
    case Detokenizer::kWikitext:
      return wikitext_detokenize(text);
    case Detokenizer::kLambada:
      break;
  }
  return std::string(text);
}

std::optional<Detokenizer> detokenizer_for_path(std::string_view path) {
  if (path.find("ptb") != std::string_view::npos) return Detokenizer::kPtb;
  if (path.find("wiki") != std::string_view::npos) return Detokenizer::kWikitext;
  if (path.find("lambada") != std::string_view::npos) return Detokenizer::kLambada;
  return std::nullopt;
}

}  // namespace mds::tasks
