// Counts the opens of one file (inotify): how tests show a file is read once.
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "core/base/non_copyable.h"

namespace headroom::testing {

// The opens of `file` from construction to Opens().
class OpenCounter : NonCopyable {
 public:
  explicit OpenCounter(const std::string& file) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    // Each open is followed by its close: two opens in a row would be merged into one event.
    if (fd_ < 0 || ::inotify_add_watch(fd_, file.c_str(), IN_OPEN | IN_CLOSE_NOWRITE) < 0) {
      throw std::runtime_error("inotify on " + file + " failed");
    }
  }
  ~OpenCounter() { ::close(fd_); }

  int Opens() {
    alignas(inotify_event) char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd_, buffer, sizeof buffer)) > 0) {
      for (char* p = buffer; p < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        if (event->mask & IN_OPEN) ++opens_;
        p += sizeof(inotify_event) + event->len;
      }
    }
    return opens_;
  }

 private:
  int fd_;
  int opens_ = 0;
};

}  // namespace headroom::testing
