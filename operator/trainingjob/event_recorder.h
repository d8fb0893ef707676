// EventRecorder: Kubernetes Events about a TrainingJob, for `kubectl describe`.
//
// Contract:
//   - Emit() creates one Event named after the job, its uid and `name_suffix`: the name
//     is a function of what happened, so a retry, or a second operator replaying the same
//     action after a restart, gets AlreadyExists instead of a duplicate.
//   - It retries server errors and throttling a few times with backoff, then gives up
//     with a warning in the log: a lost Event never fails a reconcile.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/kubeclient/rest_client.h"

namespace headroom::trainingjob {

class EventRecorder {
 public:
  explicit EventRecorder(kubeclient::RestClient& client) : client_(&client) {}

  // `type` is "Normal" or "Warning"; the message is cut at 1024 bytes.
  void Emit(const nlohmann::json& object, const std::string& name_suffix, const std::string& type,
            const std::string& reason, const std::string& message);

  int64_t emitted() const { return emitted_; }

 private:
  kubeclient::RestClient* client_;
  std::atomic<int64_t> emitted_{0};
};

}  // namespace headroom::trainingjob
