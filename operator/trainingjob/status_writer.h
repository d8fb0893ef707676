// StatusWriter: a TrainingJob's .status, written through the status subresource.
//
// Contract:
//   - Write() writes only when the status differs from what is on the object and from
//     what this writer last wrote (the cache may lag behind our own write): a resync of
//     an unchanged job writes nothing. It writes a merge patch (MergePatchBetween), and
//     sets .status.selector, the scale subresource's labelSelectorPath, so `kubectl
//     scale` and autoscalers find the job's pods.
//   - A failed write throws kubeclient::ApiError and leaves entry.written as it was, so
//     the next reconcile tries again.
#pragma once

#include <atomic>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "operator/kubeclient/rest_client.h"
#include "operator/trainingjob/job_entry.h"

namespace headroom::trainingjob {

class StatusWriter {
 public:
  explicit StatusWriter(kubeclient::RestClient& client) : client_(&client) {}

  void Write(JobEntry& entry, const nlohmann::json& object, const nlohmann::json& status);

  int64_t writes() const { return writes_; }

 private:
  kubeclient::RestClient* client_;
  std::atomic<int64_t> writes_{0};
};

// RFC 7386 merge patch turning `from` into `to` (null for removed keys).
nlohmann::json MergePatchBetween(const nlohmann::json& from, const nlohmann::json& to);

}  // namespace headroom::trainingjob
