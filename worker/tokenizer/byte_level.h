// GPT-2's byte-level alphabet, as the ByteLevel pre-tokenizer and decoder of Hugging Face
// `tokenizers` use it: every byte maps to one printable code point (printable Latin-1 bytes
// to themselves, the rest to U+0100 onwards), so any byte string is a string of vocabulary
// symbols.
#pragma once

#include <string>
#include <string_view>

namespace headroom::worker::byte_level {

// Each byte of `bytes` as its alphabet symbol, UTF-8 encoded.
std::string Encode(std::string_view bytes);

// Appends the bytes `token` stands for: each of its symbols' bytes, or, when any code point
// of `token` is outside the alphabet (an added token such as "<|im_end|>" is inside it, a
// non-Latin one is not), `token`'s own UTF-8 bytes, as the ByteLevel decoder does.
void DecodeAppend(std::string_view token, std::string& bytes);

}  // namespace headroom::worker::byte_level
