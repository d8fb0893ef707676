#include "local/local_pod_template.h"

#include <filesystem>
#include <map>

namespace headroom::local {

using nlohmann::json;

namespace {

// The pod-level fields a scheduler or kubelet acts on: no meaning for local processes.
void IgnorePodFields(const spec::PodTemplate& t, std::vector<std::string>& ignored) {
  if (!t.labels.empty()) ignored.push_back("metadata.labels");
  if (!t.annotations.empty()) ignored.push_back("metadata.annotations");
  if (!t.node_selector.empty()) ignored.push_back("nodeSelector");
  if (!t.affinity.empty()) ignored.push_back("affinity");
  if (!t.tolerations.empty()) ignored.push_back("tolerations");
  for (const auto& [field, value] : t.NamedStrings()) {
    if (!value->empty()) ignored.push_back(field);
  }
  if (!t.image_pull_secrets.empty()) ignored.push_back("imagePullSecrets");
  if (!t.security_context.empty()) ignored.push_back("securityContext");
  const spec::WorkerContainerTemplate& w = t.worker;
  if (!w.env_from.empty()) ignored.push_back("envFrom (ConfigMaps and Secrets exist only on a cluster)");
  if (!w.limits.empty() || !w.requests.empty()) ignored.push_back("containers[0].resources");
  if (!w.security_context.empty()) ignored.push_back("containers[0].securityContext");
}

// The kind of a volume: its one source's key ("hostPath", "persistentVolumeClaim", ...).
std::string VolumeKind(const json& volume) {
  for (const auto& [key, value] : volume.items()) {
    if (key != "name") return key;
  }
  return "no source";
}

void IgnoreUnusableMounts(const spec::PodTemplate& t, std::vector<std::string>& ignored) {
  std::map<std::string, const json*> volumes;
  for (const json& v : t.volumes) volumes[v.value("name", "")] = &v;
  std::map<std::string, bool> mounted;
  for (const json& m : t.worker.volume_mounts) {
    const std::string name = m.value("name", "");
    const std::string dir = m.value("mountPath", "");
    mounted[name] = true;
    auto it = volumes.find(name);
    if (it == volumes.end()) continue;
    const json& v = *it->second;
    const std::string kind = VolumeKind(v);
    if (kind != "hostPath") {
      ignored.push_back("volume " + name + " (" + kind + ") mounted at " + dir);
    } else if (const std::string host = v["hostPath"].value("path", ""); host != dir) {
      ignored.push_back("volume " + name + " (hostPath " + host + ") mounted at " + dir +
                        ": only a hostPath mounted at its own path applies here");
    } else if (std::error_code ec; !std::filesystem::exists(host, ec)) {
      ignored.push_back("volume " + name + " (hostPath " + host + "): no such path on this machine");
    }
  }
  for (const auto& [name, volume] : volumes) {
    if (!mounted[name]) ignored.push_back("volume " + name + " (not mounted)");
  }
}

}  // namespace

LocalPodTemplate ApplicableOnOneMachine(const spec::PodTemplate& t) {
  LocalPodTemplate local;
  IgnorePodFields(t, local.ignored);
  for (const json& e : t.worker.env) {
    const std::string name = e.value("name", "");
    if (e.contains("valueFrom")) {
      local.ignored.push_back("env " + name + " (valueFrom: resolved only on a cluster)");
    } else {
      local.env.emplace_back(name, e.value("value", ""));
    }
  }
  IgnoreUnusableMounts(t, local.ignored);
  return local;
}

std::string IgnoredTemplateNotice(const LocalPodTemplate& local) {
  if (local.ignored.empty()) return "";
  std::string line = "spec.template: ignored on this machine: ";
  for (size_t i = 0; i < local.ignored.size(); ++i) line += (i == 0 ? "" : "; ") + local.ignored[i];
  return line;
}

}  // namespace headroom::local
