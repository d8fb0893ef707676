#include "cli/worker_binary.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace headroom::cli {

std::string FindWorkerBinary() {
  if (const char* env = std::getenv("HEADROOM_WORKER_BIN"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return (self.parent_path() / "headroom-worker").string();
  return "headroom-worker";
}

}  // namespace headroom::cli
