// Where a command's log lines go: a command whose stdout is its result (JSON from
// logits, generate and tokenize) must not get a warning written into it. spdlog's default
// logger writes to stdout; while a LogToStream lives, it writes to the given stream (the
// command's stderr) instead.
//
// Contract: construction replaces spdlog's default logger with one writing to `stream`
// (same level and pattern as spdlog's default); destruction puts the previous one back.
// Not for concurrent use with another LogToStream.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <ostream>

#include "core/base/non_copyable.h"

namespace headroom::worker {

class LogToStream : NonCopyable {
 public:
  explicit LogToStream(std::ostream& stream);
  ~LogToStream();

 private:
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace headroom::worker
