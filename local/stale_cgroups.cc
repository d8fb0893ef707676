#include "local/stale_cgroups.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace headroom::local {

namespace {

bool AllDigits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// The supervisor pid of "headroom-<job>-<pid>-g<G>-r<R>" (the job name may hold dashes).
std::optional<pid_t> SupervisorPid(const std::string& name) {
  if (name.rfind("headroom-", 0) != 0) return std::nullopt;
  const size_t r = name.rfind("-r");
  if (r == std::string::npos || !AllDigits(name, r + 2)) return std::nullopt;
  const size_t g = name.rfind("-g", r - 1);
  if (g == std::string::npos || !AllDigits(name.substr(0, r), g + 2)) return std::nullopt;
  const size_t p = name.rfind('-', g - 1);
  if (p == std::string::npos || p < 8) return std::nullopt;
  const std::string pid = name.substr(p + 1, g - p - 1);
  if (!AllDigits(pid, 0) || pid.size() > 9) return std::nullopt;
  return static_cast<pid_t>(std::atol(pid.c_str()));
}

}  // namespace

int RemoveStaleCgroups(const std::string& hierarchy_dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(hierarchy_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::optional<pid_t> pid = SupervisorPid(entry.path().filename().string());
    if (!pid || *pid <= 0 || *pid == getpid()) continue;
    if (kill(*pid, 0) == 0 || errno != ESRCH) continue;  // its run is alive (or not ours to judge)
    if (rmdir(entry.path().c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace headroom::local
