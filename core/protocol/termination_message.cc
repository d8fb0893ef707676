#include "core/protocol/termination_message.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/human_bytes.h"
#include "core/base/trim.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/lenient_json.h"
#include "core/protocol/step_record.h"

namespace headroom::protocol {

namespace {

constexpr const char* kGpuOomError = "gpu_oom";

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// LibTorch's noise around an error: a c10::Error's backtrace and c10's warnings
// ("[W1124 20:15:01.123456 file.cpp:12] Warning: ..." on 2.x, "[W file.cpp:12] ..." on 1.x).
bool IsLibraryNoise(const std::string& line) {
  if (StartsWith(line, "frame #") || StartsWith(line, "Exception raised from")) return true;
  if (line.size() > 2 && line[0] == '[' && line[1] == 'W' &&
      (line[2] == ' ' || std::isdigit(static_cast<unsigned char>(line[2])))) {
    return true;
  }
  return false;
}

}  // namespace

std::string WriteTerminationMessage(const std::string& message) {
  std::string path;
  // The variable first: a pod's launcher gives each of its ranks a file of its own and
  // writes the pod's one message itself (docs/design.md, "Ranks per pod").
  if (const char* env = std::getenv(kTerminationLogEnv); env && *env) {
    path = env;
  } else if (std::filesystem::exists(kTerminationLogPath)) {
    path = kTerminationLogPath;
  } else {
    return "";
  }
  std::ofstream out(path, std::ios::trunc);
  if (!message.empty()) out << message << "\n";
  out.flush();
  return out ? path : "";
}

namespace {
constexpr const char* kWorkerError = "worker_error";
}  // namespace

std::string WorkerErrorMessage(const std::string& reason) {
  auto json_of = [](const std::string& text) {
    return nlohmann::json{{"error", kWorkerError}, {"message", text}}.dump(-1, ' ', false,
                                                                           nlohmann::json::error_handler_t::replace);
  };
  std::string message = json_of(reason);
  if (message.size() <= kMaxTerminationMessageBytes) return message;
  // Shorter by what is over each time (escaping only grows the text), until it fits.
  size_t keep = std::min(reason.size(), kMaxTerminationMessageBytes);
  while (keep > 0) {
    message = json_of(reason.substr(0, keep) + "... (cut to " + std::to_string(keep) +
                      " bytes: the whole reason is in the worker's output)");
    if (message.size() <= kMaxTerminationMessageBytes) break;
    keep -= std::min(keep, message.size() - kMaxTerminationMessageBytes);
  }
  return message;
}

std::string StatedReason(const std::string& message) {
  const auto j = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("error", "") != kWorkerError) return "";
  const auto it = j.find("message");
  return it != j.end() && it->is_string() ? Trim(it->get<std::string>()) : "";
}

std::string ReadTerminationFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::optional<int64_t> CheckpointedStep(int exit_code, const std::string& message) {
  if (exit_code != kExitGuardStop) return std::nullopt;
  const auto j = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return std::nullopt;
  return j["step"].get<int64_t>();
}

std::string GpuOomReport::ToJson() const {
  nlohmann::ordered_json j = {
      {"error", kGpuOomError},
      {"device", device},
      {"step", step},
      {"allocated_bytes", allocated_bytes},
      {"reserved_bytes", reserved_bytes},
      {"requested_bytes", requested_bytes},
      {"total_bytes", total_bytes},
      {"message", message},
  };
  return j.dump();
}

std::optional<GpuOomReport> GpuOomReport::FromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("error", "") != kGpuOomError) return std::nullopt;
  GpuOomReport r;
  using lenient_json::ReadInteger;
  using lenient_json::ReadString;
  ReadString(j, "device", r.device);
  ReadInteger(j, "step", r.step);
  ReadInteger(j, "allocated_bytes", r.allocated_bytes);
  ReadInteger(j, "reserved_bytes", r.reserved_bytes);
  ReadInteger(j, "requested_bytes", r.requested_bytes);
  ReadInteger(j, "total_bytes", r.total_bytes);
  ReadString(j, "message", r.message);
  return r;
}

std::string GpuOomReport::Describe() const {
  std::ostringstream out;
  out << "CUDA out of memory on " << (device.empty() ? "the GPU" : device);
  if (step > 0) out << " in step " << step;
  out << ":";
  if (requested_bytes > 0) out << " tried to allocate " << HumanBytes(static_cast<double>(requested_bytes)) << " with";
  out << " " << HumanBytes(static_cast<double>(allocated_bytes)) << " allocated, "
      << HumanBytes(static_cast<double>(reserved_bytes)) << " reserved";
  if (total_bytes > 0) out << " of " << HumanBytes(static_cast<double>(total_bytes));
  return out.str();
}

std::string LoadedPhaseMessage(int64_t next_step) {
  return nlohmann::json{{"phase", "loaded"}, {"next_step", next_step}}.dump();
}

std::optional<int64_t> LoadedPhaseNextStep(const std::string& message) {
  const auto j = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("phase") || j["phase"] != "loaded") return std::nullopt;
  const auto it = j.find("next_step");
  return it != j.end() && it->is_number_integer() ? std::optional<int64_t>(it->get<int64_t>()) : std::nullopt;
}

int64_t RequestedBytesFromOomMessage(const std::string& message) {
  // CUDACachingAllocator: "Tried to allocate 2.00 GiB" (format_size: B, KiB, MiB, GiB).
  static const std::regex kTried(R"(Tried to allocate ([0-9]+(?:\.[0-9]+)?) ?(B|bytes|KiB|MiB|GiB|TiB))",
                                 std::regex::icase);
  std::smatch m;
  if (!std::regex_search(message, m, kTried)) return 0;
  const double value = std::stod(m[1].str());
  const std::string unit = m[2].str();
  double scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  return static_cast<int64_t>(std::llround(value * scale));
}

std::string CrashReasonLine(const std::string& output) {
  // spdlog's "[time] [logger] [level] message", by how surely the line says why: what the
  // worker meant as its reason, then a line no logger wrote (a refusal's `FILE:LINE: ...`,
  // the C++ runtime's "terminate called ..."), then a warning. Progress ([info] and below)
  // and step records say what went right, never why it ended.
  enum Rank { kNever = 0, kWarning, kUntagged, kError };
  std::string best;
  Rank best_rank = kNever;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.empty() || IsLibraryNoise(line) || (line[0] == '{' && ParseStepLogLine(line))) continue;
    Rank rank = kUntagged;
    std::string message = line;
    for (const auto& [tag, tag_rank] : {std::pair<const char*, Rank>{"[error] ", kError},
                                        {"[critical] ", kError},
                                        {"[warning] ", kWarning},
                                        {"[info] ", kNever},
                                        {"[debug] ", kNever},
                                        {"[trace] ", kNever}}) {
      if (size_t at = line.find(tag); at != std::string::npos) {
        rank = tag_rank;
        message = Trim(line.substr(at + std::strlen(tag)));
        break;
      }
    }
    if (rank != kNever && rank >= best_rank) {  // the last of the surest kind
      best = message;
      best_rank = rank;
    }
  }
  return best;
}

}  // namespace headroom::protocol
