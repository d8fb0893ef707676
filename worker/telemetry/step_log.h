// The per-step JSON log (docs/design.md, Worker): one protocol::StepRecord per line (its keys
// are listed in core/protocol/step_record.h), flushed per step, to --log FILE or stdout.
// The local runtime and tests follow it as it grows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/base/non_copyable.h"
#include "core/protocol/model_fetch_record.h"
#include "core/protocol/step_record.h"

namespace headroom::worker {

class StepLogWriter : NonCopyable {
 public:
  // path "" or "-" writes to stdout; otherwise appends to the file (a resumed run keeps
  // its earlier lines). Throws std::runtime_error when the file cannot be opened.
  explicit StepLogWriter(const std::string& path);
  ~StepLogWriter();

  void Write(const protocol::StepRecord& record);
  // The model download before the first step (core/protocol/model_fetch_record.h).
  void Write(const protocol::ModelFetchRecord& record);

 private:
  void WriteLine(const std::string& json);  // plus a newline, flushed

  std::FILE* file_;
  bool owned_;
};

}  // namespace headroom::worker
