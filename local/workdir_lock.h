// One `headroom run` per work directory at a time: an exclusive flock on WORKDIR/run.lock,
// held for the whole run. Two runs on one directory would delete each other's logs and
// race on the same checkpoints. The kernel drops the lock when its holder dies (kill -9
// included), so a stale lock file never blocks a later run.
#pragma once

#include <stdexcept>
#include <string>

#include "core/base/non_copyable.h"

namespace headroom::local {

// Thrown when another live process holds the work directory's lock.
class WorkdirBusyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WorkdirLock : NonCopyable {
 public:
  // Creates `workdir` if needed and takes its lock without waiting. Throws WorkdirBusyError
  // naming the holder's pid when another process holds it (nothing else in the directory
  // is touched), std::runtime_error when the lock file cannot be opened.
  explicit WorkdirLock(const std::string& workdir);
  // Releases the lock.
  ~WorkdirLock();

  static std::string LockPath(const std::string& workdir) { return workdir + "/run.lock"; }

 private:
  int fd_ = -1;
};

}  // namespace headroom::local
