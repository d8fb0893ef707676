// The one Trim: a string without its leading and trailing ASCII whitespace (space, tab,
// line feed, carriage return, vertical tab, form feed). Used by every reader of
// hand-written or kernel-written text (cgroup files, CSV traces, reward answers).
#pragma once

#include <string>
#include <string_view>

namespace headroom {

inline std::string Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace headroom
