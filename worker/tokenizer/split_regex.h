// The regular expressions of tokenizer.json's Split pre-tokenizer, which `tokenizers`
// compiles with Oniguruma, run here by PCRE2 (UTF, Unicode properties, JIT). The pattern is
// rewritten where the two engines' classes differ: Oniguruma's `\s` is White_Space
// (U+0085 included, U+180E not) and its `\w` is letters, marks, decimal digits and connector
// punctuation. Constructs whose meaning differs and that no supported tokenizer uses
// (`\h`, `\b`, negated classes inside a bracket) are refused rather than run differently.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headroom::worker {

class SplitRegex {
 public:
  // `pattern` is a regex, or with `literal` a plain string to find. Throws TokenizerError
  // naming `where` (file and field) when it does not compile or is refused.
  SplitRegex(const std::string& pattern, bool literal, const std::string& where);

  // The [start, end) byte ranges of successive non-overlapping matches in `text` (valid
  // UTF-8), with Oniguruma's iteration: an empty match right where the previous one ended
  // is skipped by advancing one character.
  std::vector<std::pair<std::size_t, std::size_t>> FindAll(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// The pattern PCRE2 is given for an Oniguruma `pattern` (exposed for tests).
std::string TranslateOnigurumaPattern(const std::string& pattern, const std::string& where);

}  // namespace headroom::worker
