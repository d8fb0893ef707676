#include "core/memory/cgroup_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/base/trim.h"

namespace headroom::memory {

namespace {

// cgroup v1 reports "no limit" as LONG_MAX rounded down to the page size
// (9223372036854771712); anything at or above 2^62 is treated as unlimited.
constexpr int64_t kV1UnlimitedFloor = int64_t{1} << 62;

bool ParseInt64(const std::string& text, int64_t* out) {
  std::string t = Trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end != t.c_str() + t.size()) return false;
  *out = v;
  return true;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (b.empty() || b == "/") return a;
  if (!a.empty() && a.back() == '/') return a + (b.front() == '/' ? b.substr(1) : b);
  return a + (b.front() == '/' ? b : "/" + b);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

// A cgroup mount from mountinfo: its mount point, the hierarchy path it exposes (field 4,
// "root": "/" normally, the container's own path when the namespace shows a sub-tree),
// and whether it carries the memory controller.
struct CgroupMount {
  CgroupVersion version;
  std::string mount_point;
  std::string hierarchy_root;
};

// Parses mountinfo lines: "36 25 0:32 / /sys/fs/cgroup/memory rw,... - cgroup cgroup rw,memory".
std::vector<CgroupMount> MemoryMounts(const std::string& root, const std::string& pid) {
  std::vector<CgroupMount> mounts;
  auto text = ReadSmallFile(JoinPath(root, "/proc/" + pid + "/mountinfo"));
  if (!text) return mounts;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash));
    std::string id, parent, devno, hroot, mount_point;
    if (!(pre >> id >> parent >> devno >> hroot >> mount_point)) continue;
    std::istringstream post(line.substr(dash + 3));
    std::string fstype, source, super_options;
    if (!(post >> fstype >> source >> super_options)) continue;
    std::string mount_dir = JoinPath(root, mount_point);
    if (fstype == "cgroup") {
      bool memory = false;
      for (const std::string& opt : Split(super_options, ',')) memory |= (opt == "memory");
      if (memory) mounts.push_back({CgroupVersion::kV1, mount_dir, hroot});
    } else if (fstype == "cgroup2") {
      auto controllers = ReadSmallFile(JoinPath(mount_dir, "cgroup.controllers"));
      bool memory = false;
      if (controllers) {
        std::istringstream cs(*controllers);
        std::string c;
        while (cs >> c) memory |= (c == "memory");
      }
      if (memory) mounts.push_back({CgroupVersion::kV2, mount_dir, hroot});
    }
  }
  // A v1 memory hierarchy is the one that counts on hybrid systems.
  std::stable_sort(mounts.begin(), mounts.end(), [](const CgroupMount& a, const CgroupMount& b) {
    return a.version == CgroupVersion::kV1 && b.version != CgroupVersion::kV1;
  });
  return mounts;
}

std::string UsageFile(CgroupVersion v) { return v == CgroupVersion::kV2 ? "memory.current" : "memory.usage_in_bytes"; }

}  // namespace

std::optional<std::string> ReadSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

const char* CgroupVersionName(CgroupVersion v) { return v == CgroupVersion::kV2 ? "cgroup-v2" : "cgroup-v1"; }

int64_t WorkingSetBytes(int64_t usage_bytes, int64_t inactive_file_bytes) {
  return std::max<int64_t>(0, usage_bytes - inactive_file_bytes);
}

std::optional<int64_t> ParseKeyedValue(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string k, v;
    if (!(fields >> k >> v) || k != key) continue;
    int64_t value = 0;
    if (ParseInt64(v, &value)) return value;
  }
  return std::nullopt;
}

int64_t ParseLimitFile(const std::string& text, const std::string& path) {
  std::string t = Trim(text);
  if (t == "max") return 0;
  int64_t v = 0;
  if (!ParseInt64(t, &v) || v < 0) {
    throw std::runtime_error(path + ": expected a byte count or \"max\", got '" + t + "'");
  }
  return v >= kV1UnlimitedFloor ? 0 : v;
}

CgroupMemory ReadCgroupMemory(const std::string& cgroup_dir, CgroupVersion version) {
  const bool v2 = version == CgroupVersion::kV2;
  auto required = [&](const std::string& name) {
    std::string path = JoinPath(cgroup_dir, name);
    auto text = ReadSmallFile(path);
    if (!text) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
    return std::make_pair(path, *text);
  };
  CgroupMemory m;
  {
    auto [path, text] = required(UsageFile(version));
    if (!ParseInt64(text, &m.usage_bytes) || m.usage_bytes < 0) {
      throw std::runtime_error(path + ": expected a byte count, got '" + Trim(text) + "'");
    }
  }
  {
    auto [path, text] = required(v2 ? "memory.max" : "memory.limit_in_bytes");
    m.limit_bytes = ParseLimitFile(text, path);
  }
  if (auto stat = ReadSmallFile(JoinPath(cgroup_dir, "memory.stat"))) {
    // v1 total_inactive_file includes descendants (like usage_in_bytes with
    // use_hierarchy); fall back to inactive_file on kernels without the total_ line.
    auto inactive = v2 ? ParseKeyedValue(*stat, "inactive_file") : ParseKeyedValue(*stat, "total_inactive_file");
    if (!inactive && !v2) inactive = ParseKeyedValue(*stat, "inactive_file");
    m.inactive_file_bytes = inactive.value_or(0);
  }
  m.working_set_bytes = WorkingSetBytes(m.usage_bytes, m.inactive_file_bytes);
  if (auto events = ReadSmallFile(JoinPath(cgroup_dir, v2 ? "memory.events" : "memory.oom_control"))) {
    m.oom_kill_count = ParseKeyedValue(*events, "oom_kill").value_or(0);
  }
  if (auto peak = ReadSmallFile(JoinPath(cgroup_dir, v2 ? "memory.peak" : "memory.max_usage_in_bytes"))) {
    int64_t v = 0;
    if (ParseInt64(*peak, &v) && v >= 0) m.peak_bytes = v;
  }
  return m;
}

std::optional<CgroupLocation> FindProcessMemoryCgroup(const std::string& root, const std::string& pid) {
  auto cgroup_text = ReadSmallFile(JoinPath(root, "/proc/" + pid + "/cgroup"));
  if (!cgroup_text) return std::nullopt;
  // "hierarchy-id:controllers:path"; the path may itself contain ':'.
  std::optional<std::string> v1_path, v2_path;
  std::istringstream lines(*cgroup_text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t a = line.find(':');
    if (a == std::string::npos) continue;
    size_t b = line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    std::string path = Trim(line.substr(b + 1));
    if (id == "0" && controllers.empty()) {
      v2_path = path;
    } else {
      for (const std::string& c : Split(controllers, ',')) {
        if (c == "memory") v1_path = path;
      }
    }
  }
  for (const CgroupMount& mount : MemoryMounts(root, pid)) {
    const std::optional<std::string>& path = mount.version == CgroupVersion::kV1 ? v1_path : v2_path;
    if (!path) continue;
    // The process's path is relative to the hierarchy root; the mount shows the hierarchy
    // from `hierarchy_root` down, so strip that prefix before joining.
    std::string rel = *path;
    if (mount.hierarchy_root != "/" && rel.rfind(mount.hierarchy_root, 0) == 0) {
      rel = rel.substr(mount.hierarchy_root.size());
    }
    std::string dir = JoinPath(mount.mount_point, rel);
    if (IsDirectory(dir) && FileExists(JoinPath(dir, UsageFile(mount.version)))) {
      return CgroupLocation{mount.version, dir, mount.mount_point};
    }
    // Containers with a private cgroup namespace often mount their own cgroup as the root.
    if (FileExists(JoinPath(mount.mount_point, UsageFile(mount.version)))) {
      return CgroupLocation{mount.version, mount.mount_point, mount.mount_point};
    }
  }
  return std::nullopt;
}

std::optional<CgroupLocation> FindMemoryHierarchy(const std::string& root) {
  for (const CgroupMount& mount : MemoryMounts(root, "self")) {
    if (IsDirectory(mount.mount_point)) {
      return CgroupLocation{mount.version, mount.mount_point, mount.mount_point};
    }
  }
  return std::nullopt;
}

}  // namespace headroom::memory
