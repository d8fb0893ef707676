// The one UTF-8 validity rule (RFC 3629, Unicode's table 3-7): what counts as well formed,
// and how invalid bytes decode. The spec parser refuses strings that are not (Kubernetes
// objects travel as JSON, which must be valid UTF-8); the tokenizer checks what it encodes
// and decodes byte-level output with Lossy, as Hugging Face's Rust `tokenizers` does.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace headroom::utf8 {

// Length of the well-formed UTF-8 sequence starting at text[pos] (1 to 4), or 0 when the
// bytes there are not one (bad lead byte, truncated, overlong, surrogate, > U+10FFFF).
std::size_t SequenceLength(std::string_view text, std::size_t pos);

// True when `text` is well-formed UTF-8 (no surrogates, no overlong forms, at most U+10FFFF).
bool IsValid(std::string_view text);

// `bytes` as text, each maximal invalid subsequence replaced by one U+FFFD, as Rust's
// String::from_utf8_lossy does.
std::string Lossy(std::string_view bytes);

}  // namespace headroom::utf8
