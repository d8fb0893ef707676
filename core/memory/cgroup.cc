#include "core/memory/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace headroom::memory {

namespace {

std::string ErrnoText() { return std::strerror(errno); }

// Writes `value` to a cgroup control file; the kernel reports a refusal as a write error.
void WriteControl(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open for writing: " + ErrnoText());
  ssize_t n = ::write(fd, value.data(), value.size());
  int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    errno = saved;
    throw std::runtime_error(path + ": writing '" + value + "' failed: " + ErrnoText());
  }
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// v2: a child only gets memory.* files when its parent delegates the controller.
void EnableV2MemoryController(const std::string& dir) {
  std::string control = dir + "/cgroup.subtree_control";
  std::istringstream enabled(ReadAll(control));
  std::string c;
  while (enabled >> c) {
    if (c == "memory") return;
  }
  WriteControl(control, "+memory");
}

}  // namespace

std::string MemoryCgroup::UnsupportedReason(const std::string& root) {
  auto hierarchy = FindMemoryHierarchy(root);
  if (!hierarchy) return "no cgroup hierarchy with the memory controller is mounted";
  if (::access(hierarchy->mount_dir.c_str(), W_OK) != 0) {
    return hierarchy->mount_dir + " is not writable (" + ErrnoText() +
           "); memory cgroups need root or a delegated cgroup";
  }
  return "";
}

MemoryCgroup MemoryCgroup::Create(const std::string& relative_path, int64_t limit_bytes, const std::string& root) {
  auto hierarchy = FindMemoryHierarchy(root);
  if (!hierarchy) throw std::runtime_error("no cgroup hierarchy with the memory controller is mounted");
  if (relative_path.empty() || relative_path.find("..") != std::string::npos) {
    throw std::invalid_argument("memory cgroup path must be a non-empty relative path, got '" + relative_path + "'");
  }
  const bool v2 = hierarchy->version == CgroupVersion::kV2;
  std::string dir = hierarchy->mount_dir;
  std::istringstream parts(relative_path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    if (v2) EnableV2MemoryController(dir);
    dir += "/" + part;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error(dir + ": cannot create cgroup: " + ErrnoText());
    }
  }
  MemoryCgroup group(dir, hierarchy->version);
  group.SetLimit(limit_bytes);
  // Without swap limits a v1 group could swap instead of being OOM-killed; the kubelet
  // runs containers without swap, so do the same where the knob exists.
  const std::string swappiness = dir + "/memory.swappiness";
  if (!v2 && Exists(swappiness)) {
    try {
      WriteControl(swappiness, "0");
    } catch (const std::runtime_error&) {
      // Not every kernel lets a child change it; the limit still applies.
    }
  }
  if (v2 && Exists(dir + "/memory.swap.max")) {
    try {
      WriteControl(dir + "/memory.swap.max", "0");
    } catch (const std::runtime_error&) {
    }
  }
  return group;
}

MemoryCgroup::MemoryCgroup(MemoryCgroup&& other) noexcept : dir_(std::move(other.dir_)), version_(other.version_) {
  other.dir_.clear();
}

MemoryCgroup& MemoryCgroup::operator=(MemoryCgroup&& other) noexcept {
  if (this != &other) {
    Destroy();
    dir_ = std::move(other.dir_);
    version_ = other.version_;
    other.dir_.clear();
  }
  return *this;
}

MemoryCgroup::~MemoryCgroup() { Destroy(); }

void MemoryCgroup::AddProcess(pid_t pid) const { WriteControl(dir_ + "/cgroup.procs", std::to_string(pid)); }

void MemoryCgroup::SetLimit(int64_t limit_bytes) const {
  if (limit_bytes <= 0) throw std::invalid_argument("memory cgroup limit must be > 0 bytes");
  WriteControl(dir_ + (version_ == CgroupVersion::kV2 ? "/memory.max" : "/memory.limit_in_bytes"),
               std::to_string(limit_bytes));
}

bool MemoryCgroup::Destroy() {
  if (dir_.empty()) return true;
  if (::rmdir(dir_.c_str()) != 0 && errno != ENOENT) return false;
  dir_.clear();
  return true;
}

}  // namespace headroom::memory
