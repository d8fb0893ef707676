#include "worker/tokenizer/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "worker/tokenizer/hf_tokenizer.h"
#include "worker/tokenizer/utf8.h"

namespace headroom::worker {
namespace {

// Oniguruma's classes written out for PCRE2, inside brackets and as a standalone class.
constexpr const char* kSpaceMembers = R"(\t\n\x0B\f\r\x{85}\p{Z})";
constexpr const char* kWordMembers = R"(\p{L}\p{M}\p{Nd}\p{Pc})";

}  // namespace

std::string TranslateOnigurumaPattern(const std::string& pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      const char* members = (e == 's' || e == 'S') ? kSpaceMembers : (e == 'w' || e == 'W') ? kWordMembers : nullptr;
      if (members) {
        const bool negated = (e == 'S' || e == 'W');
        if (in_class && negated) {
          throw TokenizerError(where + ": \\" + std::string(1, e) +
                               " inside a bracket class is not supported by this tokenizer port");
        }
        out += in_class ? std::string(members) : std::string(negated ? "[^" : "[") + members + "]";
        continue;
      }
      if (e == 'h' || e == 'H' || e == 'b' || e == 'B' || e == 'X' || e == 'R' || e == 'K' || e == 'G') {
        throw TokenizerError(where + ": \\" + std::string(1, e) +
                             " means something else in Oniguruma than in PCRE2; not supported by this tokenizer port");
      }
      out += '\\';
      out += e;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member in both engines.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[') {
      // Oniguruma nests classes ([a[b]], set operations); PCRE2 reads '[' as a member.
      if (i + 1 < pattern.size() && pattern[i + 1] == ':') {
        const std::size_t close = pattern.find(":]", i + 2);
        if (close != std::string::npos) {
          out.append(pattern, i, close + 2 - i);
          i = close + 1;
          continue;
        }
      }
      throw TokenizerError(where + ": nested bracket classes are not supported by this tokenizer port");
    }
    if (in_class && c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
      throw TokenizerError(where + ": class intersection (&&) is not supported by this tokenizer port");
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern, bool literal, const std::string& where) {
  const std::string translated = literal ? pattern : TranslateOnigurumaPattern(pattern, where);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // Oniguruma's default syntax reads ^ and $ at line boundaries.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options, &error,
                                   &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TokenizerError(where + ": the regex does not compile at offset " + std::to_string(offset) + ": " +
                         reinterpret_cast<const char*>(message));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it still matches, slower
  code_ = std::move(holder);
}

std::vector<std::pair<std::size_t, std::size_t>> SplitRegex::FindAll(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t search_from = 0;
  std::size_t last_match_end = std::string_view::npos;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw TokenizerError(std::string("pre-tokenizer regex failed to run: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t start = ovector[0], end = ovector[1];
    if (start == end && last_match_end == end) {
      if (search_from >= text.size()) break;
      utf8::Next(text, search_from);
      continue;
    }
    matches.emplace_back(start, end);
    search_from = end;
    last_match_end = end;
  }
  return matches;
}

}  // namespace headroom::worker
