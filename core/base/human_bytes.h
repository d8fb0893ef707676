// Byte counts for people: "812 MiB", "1 GiB", "3.5 GiB", "-48 MiB" (binary units, at most
// three significant digits), used in guard reasons, termination messages and `headroom plan`.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

std::string HumanBytes(double bytes);
// "79%" of `total` (integer percent; "-" when total <= 0).
std::string Percent(double part, double total);

}  // namespace headroom
