#include "core/base/utf8.h"

namespace headroom::utf8 {
namespace {

// What a lead byte of a multi-byte sequence promises: the sequence's length (0 when the
// byte cannot lead one) and the allowed range of its second byte (Unicode's table 3-7:
// the narrower ranges exclude overlong forms, surrogates and code points past U+10FFFF).
struct LeadByte {
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
};

LeadByte ClassifyLead(unsigned char lead) {
  LeadByte b;
  if (lead >= 0xC2 && lead <= 0xDF) {
    b.length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    b.length = 3;
    if (lead == 0xE0) b.low = 0xA0;
    if (lead == 0xED) b.high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    b.length = 4;
    if (lead == 0xF0) b.low = 0x90;
    if (lead == 0xF4) b.high = 0x8F;
  }
  return b;
}

}  // namespace

std::size_t SequenceLength(std::string_view s, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  const auto [length, low, high] = ClassifyLead(lead);
  if (length == 0 || pos + length > s.size()) return 0;
  if (byte(pos + 1) < low || byte(pos + 1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(pos + i) < 0x80 || byte(pos + i) > 0xBF) return 0;
  }
  return length;
}

bool IsValid(std::string_view s) {
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t length = SequenceLength(s, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

std::string Lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t length = SequenceLength(s, pos);
    if (length > 0) {
      out.append(s.substr(pos, length));
      pos += length;
      continue;
    }
    // Invalid: skip the longest prefix of a well-formed sequence (at least one byte) and
    // replace it with one U+FFFD: Unicode's "maximal subpart" rule, which Rust follows.
    const auto [length_wanted, low, high] = ClassifyLead(byte(pos));
    std::size_t consumed = 1;
    for (std::size_t i = 1; i < length_wanted && pos + i < s.size(); ++i) {
      const unsigned char b = byte(pos + i);
      const bool ok = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++consumed;
    }
    out += "\xEF\xBF\xBD";
    pos += consumed;
  }
  return out;
}

}  // namespace headroom::utf8
