#include "operator/manifests/pod_template_overlay.h"

namespace headroom::manifests {

using nlohmann::json;

namespace {

void Append(json& list, const json& items) {
  if (!list.is_array()) list = json::array();
  for (const json& item : items) list.push_back(item);
}

// The template's fields over the operator's, one by one; capabilities' add joins drop.
void OverlaySecurityContext(json& target, const json& overlay) {
  for (const auto& [key, value] : overlay.items()) {
    if (key == "capabilities" && target.contains(key)) {
      if (value.contains("add")) target[key]["add"] = value["add"];
    } else {
      target[key] = value;
    }
  }
}

void OverlayWorkerContainer(const spec::WorkerContainerTemplate& w, json& container) {
  Append(container["env"], w.env);
  if (!w.env_from.empty()) container["envFrom"] = w.env_from;
  Append(container["volumeMounts"], w.volume_mounts);
  for (const auto& [resource, quantity] : w.limits) container["resources"]["limits"][resource] = quantity;
  for (const auto& [resource, quantity] : w.requests) container["resources"]["requests"][resource] = quantity;
  OverlaySecurityContext(container["securityContext"], w.security_context);
}

}  // namespace

void OverlayPodTemplate(const spec::PodTemplate& t, json& pod) {
  if (t.empty()) return;
  json& meta = pod["metadata"];
  for (const auto& [key, value] : t.labels) meta["labels"][key] = value;
  for (const auto& [key, value] : t.annotations) meta["annotations"][key] = value;

  json& s = pod["spec"];
  if (!t.node_selector.empty()) s["nodeSelector"] = t.node_selector;
  if (!t.affinity.empty()) s["affinity"] = t.affinity;
  if (!t.tolerations.empty()) Append(s["tolerations"], t.tolerations);
  for (const auto& [field, value] : t.NamedStrings()) {
    if (!value->empty()) s[field] = *value;
  }
  for (const std::string& name : t.image_pull_secrets) s["imagePullSecrets"].push_back({{"name", name}});
  Append(s["volumes"], t.volumes);
  OverlaySecurityContext(s["securityContext"], t.security_context);
  for (json& container : s["containers"]) {
    if (container.value("name", "") == spec::kWorkerContainerName) OverlayWorkerContainer(t.worker, container);
  }
}

}  // namespace headroom::manifests
