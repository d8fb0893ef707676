// Host memory of this process's container: what the kernel and the kubelet will judge.
//
// HostMemoryProbe locates the process's memory cgroup once (v1 or v2, see
// cgroup_reader.h) and reads it on every Read(). When no cgroup limit applies (no memory
// cgroup, or one without a limit) it reads /proc instead: VmRSS and VmHWM from
// /proc/self/status, MemTotal/MemAvailable from /proc/meminfo, and reports the machine's
// MemTotal as the limit (what the OOM killer eventually enforces), source "proc".
//
// Contract: the constructor never throws (a missing cgroup just means /proc); whether the
// cgroup has a limit is decided there too (a container's limit does not change while it
// runs). Read() throws std::runtime_error only when even /proc cannot be read. Both reads
// are safe to call from a sampler thread; ReadWorkingSet() reads one or two files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/memory/cgroup_reader.h"

namespace headroom::memory {

struct HostMemorySample {
  int64_t working_set_bytes = 0;  // the guarded number: usage - inactive file (or RSS)
  int64_t usage_bytes = 0;        // cgroup usage incl. page cache (or RSS)
  int64_t inactive_file_bytes = 0;
  int64_t limit_bytes = 0;     // 0 = none known
  int64_t peak_bytes = 0;      // kernel peak counter since the last ResetPeak(), or VmHWM; 0 = unknown
  int64_t oom_kill_count = 0;  // OOM kills in this cgroup so far
  std::string source;          // "cgroup-v2", "cgroup-v1" or "proc"
};

// /proc fallback: VmRSS/VmHWM of <root>/proc/self/status, MemTotal/MemAvailable of
// <root>/proc/meminfo. limit = MemTotal. Throws when status is unreadable.
HostMemorySample ReadProcMemory(const std::string& root = "/");

class HostMemoryProbe {
 public:
  // `root` prefixes every path ("/" live; a fixture tree in tests).
  explicit HostMemoryProbe(std::string root = "/");

  HostMemorySample Read() const;

  // Only the guarded number (working set, or RSS under /proc), from the fewest files:
  // what a PeakSampler calls every few milliseconds. Throws like Read().
  int64_t ReadWorkingSet() const;

  // Restarts the kernel's peak counter where we may: v1 memory.max_usage_in_bytes is
  // reset by writing 0 (only done when `owns_cgroup`, since it is shared with every
  // process in the cgroup); v2 memory.peak accepts a write on kernels >= 6.12 (per open
  // file, so we only rely on it when it works). Returns whether a kernel counter was
  // reset; when not, callers use a PeakSampler for per-step peaks.
  bool ResetPeak(bool owns_cgroup);

  // The cgroup in use; nullopt when reading /proc (none, or one without a limit).
  const std::optional<CgroupLocation>& cgroup() const { return cgroup_; }

 private:
  std::string root_;
  std::optional<CgroupLocation> cgroup_;  // set only when it has a limit
  int64_t mem_total_bytes_ = 0;           // /proc/meminfo MemTotal, read once
};

}  // namespace headroom::memory
