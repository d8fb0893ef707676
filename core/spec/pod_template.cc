// CheckPodTemplate and PodTemplateJson: the template's own rules (what the API server would
// refuse in the fields the operator relies on) and the refusals that keep what the
// operator owns intact. Each refusal says why, by the field's path.
#include "core/spec/pod_template.h"

#include <algorithm>
#include <set>

#include "core/protocol/environment.h"
#include "core/spec/closest_name.h"
#include "core/spec/document_tree.h"
#include "core/spec/kubernetes_names.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"

namespace headroom::spec {

using nlohmann::json;

std::vector<std::string> OperatorOwnedEnvNames() {
  return {protocol::kRankEnv,
          protocol::kWorldSizeEnv,
          protocol::kLocalRankEnv,
          protocol::kMasterAddrEnv,
          protocol::kMasterPortEnv,
          protocol::kTerminationLogEnv,
          protocol::kGuardHistoryEnv,
          protocol::kMemoryLimitEnv,
          protocol::kJobNameEnv,
          protocol::kGenerationEnv,
          kPodNameEnv,
          kPodNamespaceEnv};
}

std::vector<std::string> OperatorOwnedAnnotations() {
  return {"prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"};
}

bool WorkerContainerTemplate::empty() const {
  return env.empty() && env_from.empty() && volume_mounts.empty() && limits.empty() && requests.empty() &&
         security_context.empty();
}

std::vector<std::pair<const char*, const std::string*>> PodTemplate::NamedStrings() const {
  return {{"priorityClassName", &priority_class_name},
          {"schedulerName", &scheduler_name},
          {"runtimeClassName", &runtime_class_name},
          {"serviceAccountName", &service_account_name}};
}

bool PodTemplate::empty() const {
  return labels.empty() && annotations.empty() && node_selector.empty() && affinity.empty() && tolerations.empty() &&
         priority_class_name.empty() && scheduler_name.empty() && runtime_class_name.empty() &&
         service_account_name.empty() && image_pull_secrets.empty() && volumes.empty() && security_context.empty() &&
         worker.empty();
}

namespace {

// The operator's volumes and where the worker mounts them (children.cc builds them).
const std::vector<std::pair<std::string, std::string>>& OperatorMounts() {
  static const std::vector<std::pair<std::string, std::string>> mounts = {{kSpecVolumeName, kSpecMountDir},
                                                                          {kCheckpointVolumeName, kCheckpointMountDir},
                                                                          {kShmVolumeName, kShmMountDir},
                                                                          {kTmpVolumeName, kTmpMountDir}};
  return mounts;
}

// Whether one directory holds the other (or they are the same): a mount at either hides
// or shadows the other.
bool PathsOverlap(std::string a, std::string b) {
  while (a.size() > 1 && a.back() == '/') a.pop_back();
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  if (a.size() > b.size()) std::swap(a, b);
  if (a == b || a == "/") return true;
  return b.compare(0, a.size(), a) == 0 && b[a.size()] == '/';
}

class TemplateChecker {
 public:
  explicit TemplateChecker(std::vector<SpecError>& errors) : errors_(errors) {}

  void Fail(const std::string& path, std::string message) { errors_.push_back({path, std::move(message), 0, 0}); }

  // Every key of `object` is in `known`; the others are errors. False when not an object.
  bool Fields(const json& object, const std::string& path, const std::vector<std::string>& known) {
    if (!object.is_object()) {
      Fail(path, std::string("expected map, got ") + object.type_name());
      return false;
    }
    for (const auto& [key, value] : object.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        Fail(ChildPath(path, key), "unknown field" + DidYouMean(key, known));
      }
    }
    return true;
  }
  // The string at object[key], "" when absent; an error when it is not a string.
  std::string Text(const json& object, const std::string& key, const std::string& path) {
    if (!object.contains(key) || object[key].is_null()) return "";
    if (!object[key].is_string()) {
      Fail(ChildPath(path, key), std::string("expected string, got ") + object[key].type_name());
      return "";
    }
    return object[key].get<std::string>();
  }
  void Name(const std::string& path, const std::string& problem) {
    if (!problem.empty()) Fail(path, problem);
  }
  void Labels(const std::map<std::string, std::string>& labels, const std::string& path) {
    for (const auto& [key, value] : labels) {
      const std::string at = path + "[" + key + "]";
      Name(at, CheckQualifiedName(key));
      Name(at, CheckLabelValue(value));
    }
  }

 private:
  std::vector<SpecError>& errors_;
};

void CheckMetadata(TemplateChecker& c, const PodTemplate& t, const std::string& path) {
  const std::string labels = path + ".metadata.labels";
  c.Labels(t.labels, labels);
  for (const auto& [key, value] : t.labels) {
    const bool owned = key == kLabelManagedBy || key.rfind("headroom.dev/", 0) == 0;
    if (owned) c.Fail(labels + "[" + key + "]", key + " is set by the operator (it selects the job's pods by it)");
  }
  const std::vector<std::string> owned = OperatorOwnedAnnotations();
  for (const auto& [key, value] : t.annotations) {
    const std::string at = path + ".metadata.annotations[" + key + "]";
    c.Name(at, CheckQualifiedName(key));
    if (std::find(owned.begin(), owned.end(), key) != owned.end()) {
      c.Fail(at, key + " is set by the operator (its scraper reads the worker's metrics by it)");
    }
  }
}

void CheckTolerations(TemplateChecker& c, const json& tolerations, const std::string& path) {
  for (size_t i = 0; i < tolerations.size(); ++i) {
    const std::string at = IndexPath(path, i);
    const json& t = tolerations[i];
    if (!c.Fields(t, at, {"key", "operator", "value", "effect", "tolerationSeconds"})) continue;
    const std::string op = c.Text(t, "operator", at);
    const std::string effect = c.Text(t, "effect", at);
    const std::string key = c.Text(t, "key", at);
    const std::string value = c.Text(t, "value", at);
    if (!op.empty() && op != "Exists" && op != "Equal") {
      c.Fail(at + ".operator", "must be Exists or Equal, got \"" + op + "\"");
    }
    if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
      c.Fail(at + ".effect", "must be NoSchedule, PreferNoSchedule or NoExecute, got \"" + effect + "\"");
    }
    if (op == "Exists" && !value.empty()) c.Fail(at + ".value", "must be empty when operator is Exists");
    if (key.empty() && op != "Exists") c.Fail(at + ".operator", "must be Exists when key is empty");
    if (t.contains("tolerationSeconds") && !t["tolerationSeconds"].is_number_integer()) {
      c.Fail(at + ".tolerationSeconds", "expected integer");
    }
  }
}

// The guarantees the worker pod runs under: non-root, no privilege, a read-only root.
void CheckSecurityContext(TemplateChecker& c, const json& sc, const std::string& path, bool container) {
  std::vector<std::string> known = {"runAsUser",      "runAsGroup",      "runAsNonRoot",  "seLinuxOptions",
                                    "seccompProfile", "appArmorProfile", "windowsOptions"};
  if (container) {
    known.insert(known.end(),
                 {"privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "procMount"});
  } else {
    known.insert(known.end(),
                 {"fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy", "sysctls"});
  }
  if (sc.empty() || !c.Fields(sc, path, known)) return;
  auto refuse = [&](const char* field, const json& bad, const std::string& why) {
    if (sc.contains(field) && sc[field] == bad) c.Fail(ChildPath(path, field), why);
  };
  refuse("runAsNonRoot", false, "must not be false: worker pods run as non-root");
  refuse("runAsUser", 0, "must not be 0 (root): worker pods run as non-root");
  refuse("privileged", true, "must not be true: worker pods run unprivileged");
  refuse("allowPrivilegeEscalation", true, "must not be true: worker pods never escalate privileges");
  refuse("readOnlyRootFilesystem", false, "must not be false: the worker writes only to its volumes");
  if (sc.contains("capabilities")) {
    const std::string at = ChildPath(path, "capabilities");
    if (c.Fields(sc["capabilities"], at, {"add", "drop"}) && sc["capabilities"].contains("drop")) {
      c.Fail(at + ".drop", "is set by the operator (ALL); name what the worker needs in add");
    }
  }
}

// The template's volumes: named, one source each, none of the operator's names.
std::set<std::string> CheckVolumes(TemplateChecker& c, const json& volumes, const std::string& path) {
  std::set<std::string> names;
  for (size_t i = 0; i < volumes.size(); ++i) {
    const std::string at = IndexPath(path, i);
    const json& v = volumes[i];
    if (!v.is_object()) {
      c.Fail(at, std::string("expected map, got ") + v.type_name());
      continue;
    }
    const std::string name = c.Text(v, "name", at);
    if (name.empty()) {
      c.Fail(at + ".name", "required");
    } else if (std::string bad = CheckDns1123Label(name); !bad.empty()) {
      c.Fail(at + ".name", bad);
    } else if (!names.insert(name).second) {
      c.Fail(at + ".name", "duplicate volume \"" + name + "\"");
    }
    for (const auto& [owned, dir] : OperatorMounts()) {
      if (name == owned) c.Fail(at + ".name", name + " is the operator's volume (mounted at " + dir + ")");
    }
    const size_t sources = v.size() - (v.contains("name") ? 1 : 0);
    if (sources != 1) {
      c.Fail(at, "needs exactly one volume source (persistentVolumeClaim, hostPath, secret, ...), got " +
                     std::to_string(sources));
    }
  }
  return names;
}

void CheckVolumeMounts(TemplateChecker& c, const json& mounts, const std::set<std::string>& volumes,
                       const std::string& path) {
  std::set<std::string> paths;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string at = IndexPath(path, i);
    const json& m = mounts[i];
    if (!c.Fields(
            m, at,
            {"name", "mountPath", "readOnly", "subPath", "subPathExpr", "mountPropagation", "recursiveReadOnly"})) {
      continue;
    }
    const std::string name = c.Text(m, "name", at);
    const std::string dir = c.Text(m, "mountPath", at);
    const auto owned = std::find_if(OperatorMounts().begin(), OperatorMounts().end(),
                                    [&](const auto& mount) { return mount.first == name; });
    if (name.empty()) {
      c.Fail(at + ".name", "required");
    } else if (owned != OperatorMounts().end()) {
      c.Fail(at + ".name", name + " is the operator's volume, mounted at " + owned->second);
    } else if (volumes.count(name) == 0) {
      c.Fail(at + ".name", "names no volume of spec.template.spec.volumes: \"" + name + "\"");
    }
    if (dir.empty() || dir[0] != '/') {
      c.Fail(at + ".mountPath", "must be an absolute path, got \"" + dir + "\"");
      continue;
    }
    if (!paths.insert(dir).second) c.Fail(at + ".mountPath", "duplicate mount path " + dir);
    for (const auto& [owned, owned_dir] : OperatorMounts()) {
      if (PathsOverlap(dir, owned_dir)) {
        c.Fail(at + ".mountPath", dir + " overlaps the operator's mount " + owned_dir + " (volume " + owned + ")");
      }
    }
    if (m.contains("readOnly") && !m["readOnly"].is_boolean()) c.Fail(at + ".readOnly", "expected boolean");
  }
}

void CheckEnv(TemplateChecker& c, const json& env, const std::string& path) {
  const std::vector<std::string> owned = OperatorOwnedEnvNames();
  std::set<std::string> seen;
  for (size_t i = 0; i < env.size(); ++i) {
    const std::string at = IndexPath(path, i);
    const json& e = env[i];
    if (!c.Fields(e, at, {"name", "value", "valueFrom"})) continue;
    const std::string name = c.Text(e, "name", at);
    c.Text(e, "value", at);
    if (name.empty()) {
      c.Fail(at + ".name", "required");
    } else if (name.find('=') != std::string::npos) {
      c.Fail(at + ".name", "must not contain '=', got \"" + name + "\"");
    } else if (std::find(owned.begin(), owned.end(), name) != owned.end()) {
      c.Fail(at + ".name", name + " is set by the operator");
    } else if (!seen.insert(name).second) {
      c.Fail(at + ".name", "duplicate variable " + name);
    }
    if (e.contains("value") && e.contains("valueFrom")) c.Fail(at, "value and valueFrom are exclusive");
    if (e.contains("valueFrom") && !e["valueFrom"].is_object()) c.Fail(at + ".valueFrom", "expected map");
  }
}

void CheckEnvFrom(TemplateChecker& c, const json& env_from, const std::string& path) {
  for (size_t i = 0; i < env_from.size(); ++i) {
    const std::string at = IndexPath(path, i);
    const json& e = env_from[i];
    if (!c.Fields(e, at, {"prefix", "configMapRef", "secretRef"})) continue;
    c.Text(e, "prefix", at);
    const int sources = static_cast<int>(e.contains("configMapRef")) + static_cast<int>(e.contains("secretRef"));
    if (sources != 1) c.Fail(at, "needs exactly one of configMapRef and secretRef");
    for (const char* ref : {"configMapRef", "secretRef"}) {
      if (!e.contains(ref)) continue;
      const std::string ref_at = ChildPath(at, ref);
      if (!c.Fields(e[ref], ref_at, {"name", "optional"})) continue;
      const std::string name = c.Text(e[ref], "name", ref_at);
      c.Name(ref_at + ".name", name.empty() ? "required" : CheckDns1123Subdomain(name));
    }
  }
}

void CheckResources(TemplateChecker& c, const WorkerContainerTemplate& w, const std::string& path) {
  for (const auto& [kind, quantities] : {std::pair{"limits", &w.limits}, std::pair{"requests", &w.requests}}) {
    for (const auto& [resource, text] : *quantities) {
      const std::string at = path + "." + kind + "[" + resource + "]";
      if (resource == "cpu" || resource == "memory" || resource == kGpuResourceName) {
        c.Fail(at, resource + " is set by the operator from spec.resources");
        continue;
      }
      c.Name(at, CheckQualifiedName(resource));
      std::string why;
      if (!Quantity::Parse(text, &why)) c.Fail(at, "invalid quantity: " + why);
    }
  }
}

void CheckPodFields(TemplateChecker& c, const PodTemplate& t, const std::string& spec) {
  c.Labels(t.node_selector, spec + ".nodeSelector");
  if (!t.affinity.empty()) c.Fields(t.affinity, spec + ".affinity", {"nodeAffinity", "podAffinity", "podAntiAffinity"});
  CheckTolerations(c, t.tolerations, spec + ".tolerations");
  for (const auto& [field, value] : t.NamedStrings()) {
    if (!value->empty()) c.Name(spec + "." + field, CheckDns1123Subdomain(*value));
  }
  for (size_t i = 0; i < t.image_pull_secrets.size(); ++i) {
    const std::string& name = t.image_pull_secrets[i];
    c.Name(IndexPath(spec + ".imagePullSecrets", i) + ".name", name.empty() ? "required" : CheckDns1123Subdomain(name));
  }
  CheckSecurityContext(c, t.security_context, spec + ".securityContext", /*container=*/false);
}

}  // namespace

void CheckPodTemplate(const PodTemplate& t, const std::string& path, std::vector<SpecError>& errors) {
  TemplateChecker c(errors);
  CheckMetadata(c, t, path);
  const std::string spec = path + ".spec";
  CheckPodFields(c, t, spec);
  const std::set<std::string> volumes = CheckVolumes(c, t.volumes, spec + ".volumes");
  const std::string worker = spec + ".containers[0]";
  CheckEnv(c, t.worker.env, worker + ".env");
  CheckEnvFrom(c, t.worker.env_from, worker + ".envFrom");
  CheckVolumeMounts(c, t.worker.volume_mounts, volumes, worker + ".volumeMounts");
  CheckResources(c, t.worker, worker + ".resources");
  CheckSecurityContext(c, t.worker.security_context, worker + ".securityContext", /*container=*/true);
}

nlohmann::ordered_json PodTemplateJson(const PodTemplate& t) {
  using ordered_json = nlohmann::ordered_json;
  ordered_json out = ordered_json::object();
  if (t.empty()) return out;
  ordered_json meta = ordered_json::object();
  if (!t.labels.empty()) meta["labels"] = t.labels;
  if (!t.annotations.empty()) meta["annotations"] = t.annotations;
  if (!meta.empty()) out["metadata"] = meta;
  ordered_json spec = ordered_json::object();
  if (!t.node_selector.empty()) spec["nodeSelector"] = t.node_selector;
  if (!t.affinity.empty()) spec["affinity"] = ordered_json(t.affinity);
  if (!t.tolerations.empty()) spec["tolerations"] = ordered_json(t.tolerations);
  for (const auto& [field, value] : t.NamedStrings()) {
    if (!value->empty()) spec[field] = *value;
  }
  for (const std::string& name : t.image_pull_secrets) spec["imagePullSecrets"].push_back({{"name", name}});
  if (!t.volumes.empty()) spec["volumes"] = ordered_json(t.volumes);
  if (!t.security_context.empty()) spec["securityContext"] = ordered_json(t.security_context);
  if (!t.worker.empty()) {
    const WorkerContainerTemplate& w = t.worker;
    ordered_json c = {{"name", kWorkerContainerName}};
    if (!w.env.empty()) c["env"] = ordered_json(w.env);
    if (!w.env_from.empty()) c["envFrom"] = ordered_json(w.env_from);
    if (!w.volume_mounts.empty()) c["volumeMounts"] = ordered_json(w.volume_mounts);
    if (!w.limits.empty()) c["resources"]["limits"] = w.limits;
    if (!w.requests.empty()) c["resources"]["requests"] = w.requests;
    if (!w.security_context.empty()) c["securityContext"] = ordered_json(w.security_context);
    spec["containers"] = ordered_json::array({c});
  }
  if (!spec.empty()) out["spec"] = spec;
  return out;
}

}  // namespace headroom::spec
