// The worker's host heap: its mmap threshold, and returning freed heap to the system at
// the end of a step.
//
// Why: glibc keeps freed memory in its arenas. Tensors under the mmap threshold come from
// the heap (the worker fixes it at 4 MiB, FixMmapThreshold below; glibc's default rises to
// 32 MiB after large frees, so most tensors would end up there). Without a trim, the
// step's activation peak stays resident after the step, the end-of-step working set equals
// the peak, and the memory guard cannot tell a level that is too high (needs more workers
// or a restart) from an activation peak that a smaller micro-batch fixes.
// It is also memory another process on the node (or the page cache) can use between steps.
//
// Cost: the trim itself is about a millisecond, but the next step faults every page it
// returned back in, zeroed. For a tiny model that was a quarter of the step (~5 of 20 ms)
// to return ~20 MB, which no guard decision hinges on. So the worker trims only when the
// step left enough free heap to matter against the memory limit: at most that much stays
// resident after a step (HeapTrimThreshold), and the level the guard reads is off by no
// more.
#pragma once

#include <cstdint>

namespace headroom::worker {

// Bytes free inside the C library's heaps (every arena, pages returned or not); -1 where
// the C library cannot say.
int64_t FreeHeapBytes();

// The free heap worth returning for a host memory limit (0: none known): 1/64 of the
// limit, at most 64 MiB.
int64_t HeapTrimThreshold(int64_t host_limit_bytes);

// Gives free heap pages back to the kernel when at least `min_free_bytes` are free (or the
// amount is unknown). Returns whether it trimmed; a no-op where the C library cannot.
bool ReturnFreedHeapToSystem(int64_t min_free_bytes = 0);

// Before a recomputed block's backward on the host (activation checkpointing, stage 3):
// gives the heap's free pages back when as much is free as the end of a step would return
// (HeapTrimThreshold of the host limit last set by SetHostLimitForHeapTrims; 64 MiB before
// one is known) or 4 of the block's hidden states (`hidden_state_bytes`, its input's
// size), whichever is less. Why: a micro-batch's hidden states are under the mmap
// threshold at small widths, so the recompute takes them from the heap, and the holes that
// earlier blocks and phases left are touched again and stay resident. The 8-block
// preset's update measured 1.2x its plan without this, and 1.04x with it. On such tiny
// models the pages faulted back in cost 14-18% of a step with checkpointing; at
// Qwen2.5-0.5B's width nothing measurable (README, "Memory levers: how close the plan
// is").
bool ReturnFreedHeapBeforeRecompute(int64_t hidden_state_bytes);

// The host memory limit the trims above are sized against (0: none known).
void SetHostLimitForHeapTrims(int64_t host_limit_bytes);

// The worker's mmap threshold (docs/design.md, "The host heap"): allocations of at least
// this many bytes get their own mapping, returned to the kernel when freed, and glibc's
// dynamic threshold (which rises to the largest block freed, up to 32 MiB, and then
// serves such tensors from the heap, where their freed memory stays resident) is off.
// 4 MiB: a long batch's activations are mappings the step returns, while the many smaller
// tensors stay on the heap (at 64 KiB the example job's step took 1.9x as long).
inline constexpr int64_t kWorkerMmapThresholdBytes = int64_t{4} << 20;

// Sets the threshold at process start; MALLOC_MMAP_THRESHOLD_ in the environment wins
// (glibc read it already). Returns whether it set it; a no-op without glibc.
bool FixMmapThreshold(int64_t bytes = kWorkerMmapThresholdBytes);

}  // namespace headroom::worker
