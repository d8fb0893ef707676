// Writing .status: only when it differs from what is there (a resync of an unchanged job
// writes nothing), as a merge patch through the status subresource; and the status of a
// job whose spec is invalid.
#include <chrono>

#include "core/spec/training_job.h"
#include "operator/k8s/trainingjob_controller.h"
#include "operator/k8s/trainingjob_job_entry.h"
#include "operator/k8s/trainingjob_status.h"
#include "operator/kube/resource_client.h"
#include "operator/manifests/children.h"

namespace headroom::k8s {

using nlohmann::json;

namespace {

std::string JoinErrors(const std::vector<spec::SpecError>& errors) {
  std::string out;
  for (const spec::SpecError& e : errors) {
    if (!out.empty()) out += "; ";
    out += e.ToString();
  }
  return out;
}

}  // namespace

json MergePatchBetween(const json& from, const json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  json patch = json::object();
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (!to.contains(it.key())) patch[it.key()] = nullptr;
  }
  for (auto it = to.begin(); it != to.end(); ++it) {
    if (!from.contains(it.key())) {
      patch[it.key()] = it.value();
    } else if (from[it.key()] != it.value()) {
      patch[it.key()] = it.value().is_object() ? MergePatchBetween(from[it.key()], it.value()) : it.value();
    }
  }
  return patch;
}

void TrainingJobController::WriteStatus(JobEntry& entry, const json& object, const json& written_status) {
  // The scale subresource's labelSelectorPath (.status.selector) lets `kubectl scale` and
  // autoscalers find the job's pods.
  json status = written_status;
  status["selector"] = std::string(manifests::kLabelJobName) + "=" + kube::Name(object);
  const json current = object.value("status", json::object());
  // Compare with what we last wrote too: the cache may not have caught up with our own
  // write yet, and writing it again would be a wasted (and conflicting) write.
  if ((entry.written && *entry.written == status) || current == status) {
    if (current == status) entry.written = status;
    return;
  }
  const json patch{{"status", MergePatchBetween(current, status)}};
  kube::ResourceClient jobs(*client_, kube::resources::kTrainingJobs);
  jobs.PatchStatus(kube::Namespace(object), kube::Name(object), patch);
  entry.written = status;
  ++status_writes_;
}

controller::Result TrainingJobController::InvalidSpec(const std::string& key, const json& object,
                                                      const std::vector<spec::SpecError>& errors) {
  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot || slot->uid != kube::Uid(object)) {
      slot = std::make_shared<JobEntry>();
      slot->uid = kube::Uid(object);
    }
    entry = slot;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  if (entry->backend) entry->backend->Kill();  // a spec made invalid under running workers
  entry->backend.reset();
  entry->reconciler.reset();
  const int64_t generation = object["metadata"].value("generation", int64_t{0});
  const std::string problems = JoinErrors(errors);
  const json current = object.value("status", json::object());
  runtime::JobStatus s;
  s.phase = runtime::JobPhase::kFailed;
  s.message = "invalid spec: " + problems;
  // Keep the condition's transition time when it is already there with the same message,
  // so an unchanged invalid job compares equal and is not written again.
  std::string since = kube::FormatTime(std::chrono::system_clock::now());
  for (const json& c : current.value("conditions", json::array())) {
    if (c.value("type", "") == "Failed" && c.value("reason", "") == "InvalidSpec") {
      since = c.value("lastTransitionTime", since);
    }
  }
  s.conditions.push_back({"Failed", "True", "InvalidSpec", problems, since});
  const json status = StatusJson(s, generation);
  WriteStatus(*entry, object, status);
  if (entry->phase_reported != "InvalidSpec/" + std::to_string(generation)) {
    Event(object, "invalid-" + std::to_string(generation), "Warning", "InvalidSpec",
          std::to_string(errors.size()) + " problem(s): " + problems);
    entry->phase_reported = "InvalidSpec/" + std::to_string(generation);
  }
  SetPhase(key, "Failed");
  return {};  // nothing to retry: the job is looked at again when it changes
}

}  // namespace headroom::k8s
