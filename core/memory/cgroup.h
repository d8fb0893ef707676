// A memory cgroup we create and own: the local runtime puts each worker in one, with the
// TrainingJob's memory limit, so `headroom run` is judged by the same kernel OOM killer
// as a pod. Both cgroup v1 (/sys/fs/cgroup/memory) and v2 are supported, since hosts
// and container runtimes still ship either.
//
// Contract:
//   - Create() makes <hierarchy>/<parent>/<name> (parents created as needed), sets the
//     limit (v1 memory.limit_in_bytes, v2 memory.max; also disables swap for the group
//     where the file exists so the limit is a real limit), and on v2 enables +memory in the
//     parent's cgroup.subtree_control when needed. Throws std::runtime_error naming the
//     path and errno text on failure (not root, read-only cgroupfs, no memory controller).
//   - AddProcess(pid) writes the pid to cgroup.procs (a forked child may add itself).
//   - Read() = ReadCgroupMemory() on its directory.
//   - Destroy() kills nothing: it rmdir's the group, which the kernel refuses while
//     processes remain (returns false then). The destructor calls Destroy() and ignores
//     failure; Release() hands the directory over without removing it.
//   - Supported() tells, without side effects, whether a writable memory hierarchy exists.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/memory/cgroup_reader.h"

namespace headroom::memory {

class MemoryCgroup {
 public:
  // `relative_path` is below the hierarchy mount, e.g. "headroom/job-x/worker-0".
  static MemoryCgroup Create(const std::string& relative_path, int64_t limit_bytes, const std::string& root = "/");
  // Why not, when a memory cgroup cannot be created here (empty when it can).
  static std::string UnsupportedReason(const std::string& root = "/");
  static bool Supported(const std::string& root = "/") { return UnsupportedReason(root).empty(); }

  MemoryCgroup(MemoryCgroup&& other) noexcept;
  MemoryCgroup& operator=(MemoryCgroup&& other) noexcept;
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;
  ~MemoryCgroup();

  void AddProcess(pid_t pid) const;
  void SetLimit(int64_t limit_bytes) const;
  CgroupMemory Read() const { return ReadCgroupMemory(dir_, version_); }
  int64_t OomKillCount() const { return Read().oom_kill_count; }
  bool Destroy();
  void Release() { dir_.clear(); }

  const std::string& dir() const { return dir_; }
  CgroupVersion version() const { return version_; }

 private:
  MemoryCgroup(std::string dir, CgroupVersion version) : dir_(std::move(dir)), version_(version) {}
  std::string dir_;
  CgroupVersion version_;
};

}  // namespace headroom::memory
