// Returning freed heap to the system at the end of every step.
//
// Why: glibc keeps freed memory in its arenas (its mmap threshold rises to 32 MiB after
// large frees, so most tensors end up in the heap, not in their own mappings). Without a
// trim, the step's activation peak stays resident after the step, the end-of-step working
// set equals the peak, and the memory guard cannot tell a level that is too high (needs
// more workers or a restart) from an activation peak that a smaller micro-batch fixes.
// It is also memory another process on the node (or the page cache) can use between steps.
//
// Cost: one malloc_trim(0) per step, a few milliseconds at most for the heaps here.
#pragma once

namespace headroom::worker {

// Gives free heap pages back to the kernel; a no-op where the C library cannot.
void ReturnFreedHeapToSystem();

}  // namespace headroom::worker
