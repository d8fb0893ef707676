#include "worker/telemetry/heap_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace headroom::worker {

void ReturnFreedHeapToSystem() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace headroom::worker
