#include "local/workdir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace headroom::local {

namespace {

// The pid the holder wrote into the lock file ("" when it has not written it yet).
std::string ReadHolder(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

WorkdirLock::WorkdirLock(const std::string& workdir) {
  std::filesystem::create_directories(workdir);
  const std::string path = LockPath(workdir);
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = ReadHolder(fd_);
    close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw std::runtime_error("cannot lock " + path + ": " + std::strerror(err));
    throw WorkdirBusyError(workdir + " is in use by another headroom run" +
                           (holder.empty() ? std::string() : " (pid " + holder + ")") +
                           "; wait for it to end, or give this run another --workdir");
  }
  // The holder's pid, for the message a second run prints; the lock itself is the flock.
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is only informative: the lock is held either way.
  }
}

WorkdirLock::~WorkdirLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace headroom::local
