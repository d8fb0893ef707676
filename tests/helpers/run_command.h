// Test support: run a shell command line and keep its exit code and its output (stdout and
// stderr together), as a user at a terminal sees them.
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace headroom::testing {

struct CommandResult {
  int code = -1;    // the exit status; -1 when killed by a signal or not started
  std::string out;  // stdout and stderr, interleaved as written
};

inline CommandResult RunCommand(const std::string& command_line) {
  CommandResult r;
  FILE* p = ::popen((command_line + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = ::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// How many times `part` occurs in `text` (overlapping occurrences counted).
inline size_t CountOf(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace headroom::testing
