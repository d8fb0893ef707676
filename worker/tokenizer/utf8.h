// UTF-8 primitives the tokenizer needs, with the semantics of the Rust code the Hugging Face
// `tokenizers` library is written in: what counts as valid, as whitespace (`\s`) and as a
// word character (`\w`), and how invalid bytes decode (String::from_utf8_lossy).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/utf8.h"

namespace headroom::worker::utf8 {

// Validity and lossy decoding have one owner (core/base/utf8.h).
using ::headroom::utf8::IsValid;
using ::headroom::utf8::Lossy;

// The code point starting at byte `pos` of well-formed `s`; advances `pos` past it.
char32_t Next(std::string_view s, std::size_t& pos);
// The code point ending just before byte `end` of well-formed `s` (end > 0).
char32_t Previous(std::string_view s, std::size_t end);

void Append(std::string& out, char32_t code_point);

// Rust regex's Unicode `\s`: the White_Space property.
bool IsWhitespace(char32_t c);
// Rust regex's Unicode `\w`: Alphabetic, marks, decimal digits, connector punctuation and
// the join controls.
bool IsWordCharacter(char32_t c);

}  // namespace headroom::worker::utf8
