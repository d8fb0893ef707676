#include "worker/telemetry/heap_trim.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace headroom::worker {

int64_t FreeHeapBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return static_cast<int64_t>(::mallinfo2().fordblks);
#else
  return -1;
#endif
}

int64_t HeapTrimThreshold(int64_t host_limit_bytes) {
  constexpr int64_t kMost = int64_t{64} << 20;
  return host_limit_bytes > 0 ? std::min(kMost, host_limit_bytes / 64) : kMost;
}

bool ReturnFreedHeapToSystem(int64_t min_free_bytes) {
#if defined(__GLIBC__)
  const int64_t free_bytes = min_free_bytes > 0 ? FreeHeapBytes() : -1;
  if (free_bytes >= 0 && free_bytes < min_free_bytes) return false;
  ::malloc_trim(0);
  return true;
#else
  (void)min_free_bytes;
  return false;
#endif
}

namespace {
std::atomic<int64_t> host_limit_for_trims{0};
}  // namespace

void SetHostLimitForHeapTrims(int64_t host_limit_bytes) { host_limit_for_trims.store(host_limit_bytes); }

bool ReturnFreedHeapBeforeRecompute(int64_t hidden_state_bytes) {
  return ReturnFreedHeapToSystem(
      std::min(HeapTrimThreshold(host_limit_for_trims.load()), 4 * std::max<int64_t>(hidden_state_bytes, 1)));
}

bool FixMmapThreshold(int64_t bytes) {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return false;  // glibc has applied the user's
  return ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes)) == 1;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace headroom::worker
