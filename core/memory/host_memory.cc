#include "core/memory/host_memory.h"

#include <fcntl.h>
#include <unistd.h>

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

bool WriteString(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  ::close(fd);
  return ok;
}

int64_t MemTotal(const std::string& root) {
  auto meminfo = ReadSmallFile(Join(root, "/proc/meminfo"));
  return meminfo ? KiloBytesField(*meminfo, "MemTotal").value_or(0) : 0;
}

}  // namespace

HostMemorySample ReadProcMemory(const std::string& root) {
  const std::string status_path = Join(root, "/proc/self/status");
  auto status = ReadSmallFile(status_path);
  if (!status) throw std::runtime_error(status_path + ": cannot read");
  HostMemorySample s;
  s.source = "proc";
  s.working_set_bytes = KiloBytesField(*status, "VmRSS").value_or(0);
  s.usage_bytes = s.working_set_bytes;
  s.peak_bytes = KiloBytesField(*status, "VmHWM").value_or(0);
  s.limit_bytes = MemTotal(root);
  return s;
}

HostMemoryProbe::HostMemoryProbe(std::string root) : root_(std::move(root)) {
  mem_total_bytes_ = MemTotal(root_);
  auto found = FindProcessMemoryCgroup(root_, "self");
  if (!found) return;
  try {
    // A cgroup without a limit is not what will kill us; the machine's memory is.
    if (ReadCgroupMemory(found->dir, found->version).limit_bytes > 0) cgroup_ = found;
  } catch (const std::runtime_error&) {
    // Unreadable: /proc still tells the truth about this process.
  }
}

HostMemorySample HostMemoryProbe::Read() const {
  if (cgroup_) {
    try {
      CgroupMemory m = ReadCgroupMemory(cgroup_->dir, cgroup_->version);
      HostMemorySample s;
      s.working_set_bytes = m.working_set_bytes;
      s.usage_bytes = m.usage_bytes;
      s.inactive_file_bytes = m.inactive_file_bytes;
      s.limit_bytes = m.limit_bytes;
      s.peak_bytes = m.peak_bytes;
      s.oom_kill_count = m.oom_kill_count;
      s.source = CgroupVersionName(cgroup_->version);
      return s;
    } catch (const std::runtime_error&) {
      // The cgroup went away (the process was moved): fall through to /proc.
    }
  }
  HostMemorySample s = ReadProcMemory(root_);
  if (s.limit_bytes == 0) s.limit_bytes = mem_total_bytes_;
  return s;
}

int64_t HostMemoryProbe::ReadWorkingSet() const {
  if (cgroup_) {
    const bool v2 = cgroup_->version == CgroupVersion::kV2;
    auto usage = ReadSmallFile(cgroup_->dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    auto stat = ReadSmallFile(cgroup_->dir + "/memory.stat");
    if (usage && stat) {
      int64_t inactive = ParseKeyedValue(*stat, v2 ? "inactive_file" : "total_inactive_file").value_or(0);
      return WorkingSetBytes(std::stoll(*usage), inactive);
    }
  }
  // statm's second field is resident pages: one small file instead of status.
  const std::string statm_path = Join(root_, "/proc/self/statm");
  if (auto statm = ReadSmallFile(statm_path)) {
    std::istringstream fields(*statm);
    int64_t size = 0, resident = 0;
    if (fields >> size >> resident) return resident * ::sysconf(_SC_PAGESIZE);
  }
  return ReadProcMemory(root_).working_set_bytes;
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
