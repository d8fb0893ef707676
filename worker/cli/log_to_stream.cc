#include "worker/cli/log_to_stream.h"

#include <spdlog/sinks/ostream_sink.h>

namespace headroom::worker {

LogToStream::LogToStream(std::ostream& stream) : previous_(spdlog::default_logger()) {
  auto logger = std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::ostream_sink_mt>(stream, true));
  logger->set_level(previous_->level());
  spdlog::set_default_logger(std::move(logger));
}

LogToStream::~LogToStream() { spdlog::set_default_logger(previous_); }

}  // namespace headroom::worker
