#include "core/memory/host_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace headroom::memory {

namespace {

std::string Join(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

// "VmRSS:	  123456 kB" -> bytes.
std::optional<int64_t> KiloBytesField(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kb = 0;
    if (fields >> kb) return kb * 1024;
  }
  return std::nullopt;
}

std::optional<std::string> Slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteString(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  ::close(fd);
  return ok;
}

}  // namespace

HostMemorySample ReadProcMemory(const std::string& root) {
  const std::string status_path = Join(root, "/proc/self/status");
  auto status = Slurp(status_path);
  if (!status) throw std::runtime_error(status_path + ": cannot read");
  HostMemorySample s;
  s.source = "proc";
  s.working_set_bytes = KiloBytesField(*status, "VmRSS").value_or(0);
  s.usage_bytes = s.working_set_bytes;
  s.peak_bytes = KiloBytesField(*status, "VmHWM").value_or(0);
  if (auto meminfo = Slurp(Join(root, "/proc/meminfo"))) {
    s.limit_bytes = KiloBytesField(*meminfo, "MemTotal").value_or(0);
  }
  return s;
}

HostMemoryProbe::HostMemoryProbe(std::string root)
    : root_(std::move(root)), cgroup_(FindProcessMemoryCgroup(root_, "self")) {}

HostMemorySample HostMemoryProbe::Read() const {
  if (cgroup_) {
    try {
      CgroupMemory m = ReadCgroupMemory(cgroup_->dir, cgroup_->version);
      // A cgroup without a limit is not what will kill us; the machine's memory is.
      if (m.limit_bytes > 0) {
        HostMemorySample s;
        s.working_set_bytes = m.working_set_bytes;
        s.usage_bytes = m.usage_bytes;
        s.inactive_file_bytes = m.inactive_file_bytes;
        s.limit_bytes = m.limit_bytes;
        s.peak_bytes = m.peak_bytes;
        s.oom_kill_count = m.oom_kill_count;
        s.source = CgroupVersionName(cgroup_->version);
        return s;
      }
    } catch (const std::runtime_error&) {
      // The cgroup went away (moved process); /proc still tells the truth about us.
    }
  }
  return ReadProcMemory(root_);
}

bool HostMemoryProbe::ResetPeak(bool owns_cgroup) {
  if (!cgroup_) return false;
  if (cgroup_->version == CgroupVersion::kV1) {
    if (!owns_cgroup) return false;
    return WriteString(cgroup_->dir + "/memory.max_usage_in_bytes", "0");
  }
  // v2: writing to memory.peak resets it for the writing file descriptor only (6.12+),
  // which a fresh read through another descriptor does not see; we cannot rely on it.
  return false;
}

}  // namespace headroom::memory
