// Base64 (RFC 4648, with padding): opaque bytes such as a generator's RNG state carried
// inside the JSON manifest.
#pragma once

#include <string>
#include <string_view>

namespace headroom::checkpoint {

std::string Base64Encode(std::string_view bytes);
// Throws CheckpointError on a character outside the alphabet or a bad length.
std::string Base64Decode(std::string_view text);

}  // namespace headroom::checkpoint
