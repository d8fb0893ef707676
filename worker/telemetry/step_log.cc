#include "worker/telemetry/step_log.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace headroom::worker {

StepLogWriter::StepLogWriter(const std::string& path) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    owned_ = false;
    return;
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw std::runtime_error("--log " + path + ": " + std::strerror(errno));
  owned_ = true;
}

StepLogWriter::~StepLogWriter() {
  if (owned_) std::fclose(file_);
}

void StepLogWriter::Write(const protocol::StepRecord& record) { WriteLine(record.ToJson()); }

void StepLogWriter::Write(const protocol::ModelFetchRecord& record) { WriteLine(record.ToJson()); }

void StepLogWriter::WriteLine(const std::string& json) {
  const std::string line = json + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace headroom::worker
