#include "worker/tokenizer/byte_level.h"

#include <array>

#include "worker/tokenizer/utf8.h"

namespace headroom::worker::byte_level {
namespace {

struct Alphabet {
  std::array<char32_t, 256> symbol_of_byte{};
  std::array<int, 512> byte_of_symbol{};  // -1 where a code point below 512 is no symbol
  std::array<std::string, 256> utf8_of_byte;

  Alphabet() {
    byte_of_symbol.fill(-1);
    const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      symbol_of_byte[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      byte_of_symbol[symbol_of_byte[b]] = b;
      utf8::Append(utf8_of_byte[b], symbol_of_byte[b]);
    }
  }
};

const Alphabet& TheAlphabet() {
  static const Alphabet alphabet;
  return alphabet;
}

}  // namespace

std::string Encode(std::string_view bytes) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += a.utf8_of_byte[b];
  return out;
}

void DecodeAppend(std::string_view token, std::string& bytes) {
  const Alphabet& a = TheAlphabet();
  const std::size_t start = bytes.size();
  for (std::size_t pos = 0; pos < token.size();) {
    const char32_t c = utf8::Next(token, pos);
    if (c >= a.byte_of_symbol.size() || a.byte_of_symbol[c] < 0) {
      bytes.resize(start);
      bytes.append(token);
      return;
    }
    bytes += static_cast<char>(a.byte_of_symbol[c]);
  }
}

}  // namespace headroom::worker::byte_level
