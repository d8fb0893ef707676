// UTF-8 checks. Kubernetes objects travel as JSON, which must be valid UTF-8: a spec
// string that is not would be rejected by the API server and would make JSON
// serialization throw, so the parser refuses it up front.
#pragma once

#include <cstddef>
#include <string_view>

namespace headroom::spec {

// Length of the well-formed UTF-8 sequence starting at text[pos] (1 to 4), or 0 when the
// bytes there are not one (bad lead byte, truncated, overlong, surrogate, > U+10FFFF).
size_t Utf8SequenceLength(std::string_view text, size_t pos);

bool IsValidUtf8(std::string_view text);

}  // namespace headroom::spec
