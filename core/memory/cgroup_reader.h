// Reading a memory cgroup's counters, and finding which cgroup a process lives in.
//
// The numbers are the ones the kubelet and the kernel act on: the kubelet evicts on the
// *working set* (usage minus inactive file cache, floored at 0) and the kernel OOM-kills
// when usage reaches the limit. Both cgroup versions are read:
//   v2: memory.current, memory.max ("max" = none), memory.stat inactive_file,
//       memory.events oom_kill, memory.peak (kernels >= 5.19; absent = 0)
//   v1: memory.usage_in_bytes, memory.limit_in_bytes (a huge page-rounded LONG_MAX =
//       none), memory.stat total_inactive_file, memory.oom_control oom_kill,
//       memory.max_usage_in_bytes
//
// Contract: ReadCgroupMemory() throws std::runtime_error naming the file when a required
// file (usage, limit) is missing or malformed; optional files (stat, events/oom_control,
// peak) read as 0 when absent. FindProcessMemoryCgroup() never throws: nullopt when no
// memory cgroup can be found. All paths take a `root` prefix ("/" on a live system) so
// fixture trees (tests/core/testdata/cgroup/) exercise exactly the same code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headroom::memory {

enum class CgroupVersion { kV1, kV2 };
const char* CgroupVersionName(CgroupVersion v);  // "cgroup-v1" / "cgroup-v2"

struct CgroupMemory {
  int64_t usage_bytes = 0;          // v2 memory.current, v1 memory.usage_in_bytes
  int64_t inactive_file_bytes = 0;  // v2 inactive_file, v1 total_inactive_file
  int64_t working_set_bytes = 0;    // usage - inactive_file, floored at 0 (kubelet)
  int64_t limit_bytes = 0;          // 0 = no limit
  int64_t peak_bytes = 0;           // v2 memory.peak, v1 memory.max_usage_in_bytes; 0 = unknown
  int64_t oom_kill_count = 0;       // v2 memory.events oom_kill, v1 memory.oom_control oom_kill
};

// Working set as the kubelet computes it: usage - inactive_file, never below 0.
int64_t WorkingSetBytes(int64_t usage_bytes, int64_t inactive_file_bytes);

// Reads the counters of one cgroup directory (e.g. /sys/fs/cgroup/memory/job/worker-0).
// Used by the local runtime to watch a worker's cgroup from outside.
CgroupMemory ReadCgroupMemory(const std::string& cgroup_dir, CgroupVersion version);

// Where a process's memory cgroup is: the directory and its version.
struct CgroupLocation {
  CgroupVersion version = CgroupVersion::kV2;
  std::string dir;        // absolute, including `root`: <root>/sys/fs/cgroup/.../path
  std::string mount_dir;  // the hierarchy's mount point (parent of every cgroup in it)
};

// Finds the memory cgroup of `pid` ("self" or a number) under `root`: parses
// <root>/proc/<pid>/cgroup (v1 "N:...memory...:/path", v2 "0::/path") and joins the path
// under the matching mount from <root>/proc/<pid>/mountinfo (fstype cgroup with the
// memory option, or cgroup2 whose cgroup.controllers lists memory). A v1 memory
// controller wins over a v2 hierarchy without the memory controller (hybrid systems).
// When the joined directory does not exist (a container whose cgroup namespace root is
// mounted directly), the mount point itself is used if it holds the memory files.
std::optional<CgroupLocation> FindProcessMemoryCgroup(const std::string& root = "/", const std::string& pid = "self");

// Like FindProcessMemoryCgroup but only finds the mount of a memory hierarchy (for
// creating new cgroups): v1 mount with the memory option, else cgroup2 with memory.
std::optional<CgroupLocation> FindMemoryHierarchy(const std::string& root = "/");

// Reads a small kernel file (sysfs/procfs) with one open/read/close; nullopt when it
// cannot be opened. Cheaper than an ifstream, which matters to a 5 ms sampler.
std::optional<std::string> ReadSmallFile(const std::string& path);

// Small parsing helpers shared by the probes (exposed for tests).
// "key value" lines (memory.stat, memory.events, memory.oom_control): value of `key`.
std::optional<int64_t> ParseKeyedValue(const std::string& text, const std::string& key);
// A single integer file, or "max" (v2) -> 0 meaning unlimited. Throws naming `path`.
int64_t ParseLimitFile(const std::string& text, const std::string& path);

}  // namespace headroom::memory
