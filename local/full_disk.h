// Saying that the disk under a run's work directory filled up: which filesystem, how much
// is free, what was kept and what to do, in one line a user reads last (README, "What
// survives what").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headroom::local {

// The filesystem that holds a path.
struct FilesystemSpace {
  std::string mount_point;  // the topmost directory above the path on the same device
  uint64_t free_bytes = 0;  // available to this (unprivileged or not) process
};

// nullopt when `path` (or the directory it would be created in) cannot be examined.
std::optional<FilesystemSpace> SpaceOf(const std::string& path);

// What a run ending says about its disk. `failures` are the texts that say why it ended
// or what it could not write (the job's final message, the record's error); `failed` is
// whether the job ended Failed. The disk counts as full when a failure names ENOSPC, or
// when a failed run's filesystem has less free space than its newest checkpoint takes
// (the next save cannot fit: the worker's own message may have been cut short).
// Returns "" when it is not full; otherwise one line naming the filesystem, its free
// space, the newest checkpoint kept (WORKDIR/checkpoints) and how to resume.
std::string FullDiskNote(const std::string& workdir, const std::vector<std::string>& failures, bool failed);

}  // namespace headroom::local
