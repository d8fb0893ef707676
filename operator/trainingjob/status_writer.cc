#include "operator/trainingjob/status_writer.h"

#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"

namespace headroom::trainingjob {

using nlohmann::json;

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

void StatusWriter::Write(JobEntry& entry, const json& object, const json& written_status) {
  // The scale subresource's labelSelectorPath (.status.selector) lets `kubectl scale` and
  // autoscalers find the job's pods.
  json status = written_status;
  status["selector"] = std::string(manifests::kLabelJobName) + "=" + kubeclient::Name(object);
  const json current = object.value("status", json::object());
  // Compare with what we last wrote too: the cache may not have caught up with our own
  // write yet, and writing it again would be a wasted (and conflicting) write.
  if ((entry.written && *entry.written == status) || current == status) {
    if (current == status) entry.written = status;
    return;
  }
  const json patch{{"status", MergePatchBetween(current, status)}};
  kubeclient::ResourceClient jobs(*client_, kubeclient::resources::kTrainingJobs);
  jobs.PatchStatus(kubeclient::Namespace(object), kubeclient::Name(object), patch);
  entry.written = status;
  ++writes_;
}

}  // namespace headroom::trainingjob
