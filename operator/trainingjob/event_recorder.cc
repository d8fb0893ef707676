#include "operator/trainingjob/event_recorder.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "core/spec/training_job.h"
#include "operator/kubeclient/resource_client.h"

namespace headroom::trainingjob {

using nlohmann::json;

namespace {

// Eight characters of the uid for Event names: the tail, which differs between two
// incarnations of a job with the same name on any server (real uids are random; the
// test server counts).
std::string Uid8(const json& object) {
  const std::string uid = kubeclient::Uid(object);
  return uid.size() > 8 ? uid.substr(uid.size() - 8) : uid;
}

}  // namespace

void EventRecorder::Emit(const json& object, const std::string& name_suffix, const std::string& type,
                         const std::string& reason, const std::string& message) {
  const std::string ns = kubeclient::Namespace(object);
  const std::string now = kubeclient::FormatTime(std::chrono::system_clock::now());
  // A name that is a function of what happened: a retry, or a second operator replaying
  // it after a restart, answers AlreadyExists instead of a duplicate Event. Lowercase:
  // names are RFC 1123 subdomains, and action types are camelCase.
  std::string suffix = name_suffix;
  for (char& ch : suffix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  json event{{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", kubeclient::Name(object) + "." + Uid8(object) + "." + suffix}, {"namespace", ns}}},
             {"involvedObject",
              {{"apiVersion", spec::kApiVersion},
               {"kind", spec::kKind},
               {"name", kubeclient::Name(object)},
               {"namespace", ns},
               {"uid", kubeclient::Uid(object)}}},
             {"reason", reason},
             {"message", message.substr(0, 1024)},
             {"type", type},
             {"source", {{"component", "headroom-operator"}}},
             {"reportingComponent", "headroom-operator"},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"count", 1}};
  kubeclient::ResourceClient events(*client_, kubeclient::resources::kEvents);
  for (int attempt = 0; attempt < 5; ++attempt) {
    try {
      events.Create(ns, event);
      ++emitted_;
      return;
    } catch (const kubeclient::ApiError& e) {
      if (e.IsAlreadyExists()) return;
      if (e.code() != 0 && e.code() != 429 && e.code() < 500) {
        spdlog::warn("event {} for {}: {}", reason, kubeclient::KeyOf(object), e.what());
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));
  }
  spdlog::warn("event {} for {} not recorded: the API server kept failing", reason, kubeclient::KeyOf(object));
}

}  // namespace headroom::trainingjob
