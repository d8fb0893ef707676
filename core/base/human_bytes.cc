#include "core/base/human_bytes.h"

#include <cmath>
#include <cstdio>

namespace headroom {

std::string HumanBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = std::fabs(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  const char* sign = bytes < 0 ? "-" : "";
  if (unit == 0 || v >= 100 || std::fabs(v - std::round(v)) < 0.05) {
    std::snprintf(buf, sizeof buf, "%s%.0f %s", sign, std::round(v), kUnits[unit]);
  } else if (v >= 10) {
    std::snprintf(buf, sizeof buf, "%s%.1f %s", sign, v, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%s%.2f %s", sign, v, kUnits[unit]);
  }
  return buf;
}

std::string Percent(double part, double total) {
  if (total <= 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * part / total);
  return buf;
}

}  // namespace headroom
