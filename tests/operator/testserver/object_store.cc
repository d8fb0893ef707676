#include "tests/operator/testserver/object_store.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "operator/kubeclient/resource_client.h"

namespace headroom::testserver {
namespace {

using nlohmann::json;

std::string KeyOf(const std::string& ns, const std::string& name) { return ns + "/" + name; }

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return std::isalnum(static_cast<unsigned char>(name.front())) &&
         std::isalnum(static_cast<unsigned char>(name.back()));
}

std::string Now() { return kubeclient::FormatTime(std::chrono::system_clock::now()); }

// Everything but metadata and status: what a spec change means for generation.
json SpecPart(const json& object) {
  json copy = object;
  copy.erase("metadata");
  copy.erase("status");
  return copy;
}

std::string NotFoundMessage(const ResourceInfo& r, const std::string& name) {
  return r.QualifiedName() + " \"" + name + "\" not found";
}

std::string ConflictMessage(const ResourceInfo& r, const std::string& name) {
  return "Operation cannot be fulfilled on " + r.QualifiedName() + " \"" + name +
         "\": the object has been modified; please apply your changes to the latest version and try again";
}

bool HasOwner(const json& object, const std::string& uid) {
  const auto& meta = object["metadata"];
  if (!meta.contains("ownerReferences")) return false;
  for (const auto& ref : meta["ownerReferences"]) {
    if (ref.value("uid", "") == uid) return true;
  }
  return false;
}

bool HasFinalizers(const json& object) {
  const auto& meta = object["metadata"];
  return meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
}

}  // namespace

ObjectStore::ObjectStore(size_t history_window) : history_window_(history_window) {}

void ObjectStore::RegisterDefaults() {
  Register({"", "v1", "pods", "Pod", true, false, true, false, "pod", {"po"}, {"all"}});
  Register({"", "v1", "services", "Service", true, false, true, false, "service", {"svc"}, {"all"}});
  Register({"", "v1", "configmaps", "ConfigMap", true, false, false, false, "configmap", {"cm"}, {}});
  Register({"", "v1", "events", "Event", true, false, false, false, "event", {"ev"}, {}});
  Register({"coordination.k8s.io", "v1", "leases", "Lease", true, false, false, false, "lease", {}, {}});
  Register({"apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            false,
            true,
            false,
            "customresourcedefinition",
            {"crd", "crds"},
            {}});
  Register({"headroom.dev",
            "v1alpha1",
            "trainingjobs",
            "TrainingJob",
            true,
            true,
            true,
            true,
            "trainingjob",
            {"tj"},
            {"headroom", "all"}});
}

std::vector<ResourceInfo> ObjectStore::Resources() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  std::vector<ResourceInfo> out;
  for (const auto& [id, info] : resources_) out.push_back(info);
  return out;
}

json ObjectStore::CrdOf(const ResourceInfo& r) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto bucket = objects_.find("apiextensions.k8s.io/customresourcedefinitions");
  if (!r.custom || bucket == objects_.end()) return nullptr;
  auto it = bucket->second.find(KeyOf("", r.plural + "." + r.group));
  return it == bucket->second.end() ? json(nullptr) : it->second;
}

void ObjectStore::ServeCrdLocked(const ResourceInfo& r, const json& object) {
  if (r.Id() != "apiextensions.k8s.io/customresourcedefinitions" || !object.contains("spec")) return;
  const json& spec = object["spec"];
  const json names = spec.value("names", json::object());
  for (const json& v : spec.value("versions", json::array())) {
    if (!v.value("served", true)) continue;
    ResourceInfo info;
    info.group = spec.value("group", "");
    info.version = v.value("name", "");
    info.plural = names.value("plural", "");
    info.kind = names.value("kind", "");
    info.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
    info.custom = true;
    const json sub = v.value("subresources", json::object());
    info.status_subresource = sub.contains("status");
    info.scale_subresource = sub.contains("scale");
    info.singular = names.value("singular", "");
    info.short_names = names.value("shortNames", std::vector<std::string>{});
    info.categories = names.value("categories", std::vector<std::string>{});
    if (info.group.empty() || info.version.empty() || info.plural.empty() || info.kind.empty()) continue;
    resources_[info.Id()] = info;
  }
}

void ObjectStore::Register(const ResourceInfo& info) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  resources_[info.Id()] = info;
}

const ResourceInfo* ObjectStore::Find(const std::string& group, const std::string& version,
                                      const std::string& plural) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = resources_.find(group + "/" + plural);
  if (it == resources_.end() || it->second.version != version) return nullptr;
  return &it->second;
}

int64_t ObjectStore::resource_version() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return rv_;
}

int64_t ObjectStore::writes() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return writes_;
}

size_t ObjectStore::watchers() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return watches_.size();
}

void ObjectStore::Compact() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  history_.clear();
  compacted_rv_ = rv_;
}

json& ObjectStore::MustFind(const ResourceInfo& r, const std::string& ns, const std::string& name) {
  Bucket& bucket = BucketOf(r);
  auto it = bucket.find(KeyOf(ns, name));
  if (it == bucket.end()) throw StoreError(404, "NotFound", NotFoundMessage(r, name));
  return it->second;
}

json ObjectStore::Create(const ResourceInfo& r, const std::string& ns, json object) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!object.is_object()) throw StoreError(400, "BadRequest", "body is not a JSON object");
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  std::string name = meta.value("name", "");
  if (name.empty() && meta.contains("generateName")) {
    static const char* kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
    std::mt19937_64 rng(static_cast<uint64_t>(rv_) * 7919 + static_cast<uint64_t>(uid_counter_));
    name = meta["generateName"].get<std::string>();
    for (int i = 0; i < 5; ++i) name.push_back(kAlphabet[rng() % 27]);
    meta["name"] = name;
  }
  if (!ValidName(name)) {
    throw StoreError(422, "Invalid",
                     r.kind + " \"" + name + "\" is invalid: metadata.name: Invalid value: \"" + name +
                         "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                         "'-' or '.'");
  }
  if (r.namespaced) {
    std::string body_ns = meta.value("namespace", "");
    if (!body_ns.empty() && body_ns != ns) {
      throw StoreError(400, "BadRequest",
                       "the namespace of the provided object does not match the namespace sent on the request");
    }
    meta["namespace"] = ns;
  }
  Bucket& bucket = BucketOf(r);
  const std::string key = KeyOf(ns, name);
  if (bucket.count(key)) {
    throw StoreError(409, "AlreadyExists", r.QualifiedName() + " \"" + name + "\" already exists");
  }
  char uid[64];
  ++uid_counter_;
  std::snprintf(uid, sizeof uid, "00000000-0000-4000-8000-%012lld", static_cast<long long>(uid_counter_));
  meta["uid"] = uid;
  meta["creationTimestamp"] = Now();
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  object["apiVersion"] = r.ApiVersion();
  object["kind"] = r.kind;
  if (r.status_subresource) object.erase("status");  // status is set through /status only
  if (r.plural == "pods" && r.group.empty()) object["status"] = {{"phase", "Pending"}};
  meta["resourceVersion"] = std::to_string(Bump());
  bucket[key] = object;
  Record(r, "ADDED", nullptr, object);
  ServeCrdLocked(r, object);
  return object;
}

json ObjectStore::Get(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto bucket = objects_.find(r.Id());
  if (bucket == objects_.end()) throw StoreError(404, "NotFound", NotFoundMessage(r, name));
  auto it = bucket->second.find(KeyOf(ns, name));
  if (it == bucket->second.end()) throw StoreError(404, "NotFound", NotFoundMessage(r, name));
  return it->second;
}

json ObjectStore::List(const ResourceInfo& r, const std::string& ns, const LabelSelector& labels,
                       const FieldSelector& fields, int64_t limit, const std::string& continue_token) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  json items = json::array();
  std::string list_rv = std::to_string(rv_);
  std::string after;
  if (!continue_token.empty()) {
    // Token: "<rv>|<last key>". A token older than the history window has expired, as
    // a real server's does when etcd compacted its revision.
    auto bar = continue_token.find('|');
    if (bar == std::string::npos) throw StoreError(400, "BadRequest", "malformed continue token");
    list_rv = continue_token.substr(0, bar);
    after = continue_token.substr(bar + 1);
    if (std::stoll(list_rv) < compacted_rv_) {
      throw StoreError(410, "Expired",
                       "The provided continue parameter is too old to display a consistent list result.");
    }
  }
  std::string next;
  auto bucket = objects_.find(r.Id());
  if (bucket != objects_.end()) {
    auto it = after.empty() ? bucket->second.begin() : bucket->second.upper_bound(after);
    for (; it != bucket->second.end(); ++it) {
      const json& object = it->second;
      if (!ns.empty() && object["metadata"].value("namespace", "") != ns) continue;
      if (!labels.Matches(object) || !fields.Matches(object)) continue;
      if (limit > 0 && static_cast<int64_t>(items.size()) == limit) {
        next = list_rv + "|" + std::prev(it)->first;
        break;
      }
      items.push_back(object);
    }
  }
  json list = {{"apiVersion", r.ApiVersion()},
               {"kind", r.kind + "List"},
               {"metadata", {{"resourceVersion", list_rv}}},
               {"items", std::move(items)}};
  if (!next.empty()) list["metadata"]["continue"] = next;
  return list;
}

json ObjectStore::Update(const ResourceInfo& r, const std::string& ns, const std::string& name, json object,
                         const std::string& subresource) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return UpdateLocked(r, ns, name, std::move(object), subresource);
}

json ObjectStore::UpdateLocked(const ResourceInfo& r, const std::string& ns, const std::string& name, json object,
                               const std::string& subresource) {
  if (!object.is_object() || !object.contains("metadata")) {
    throw StoreError(400, "BadRequest", "body must be an object with metadata");
  }
  json& current = MustFind(r, ns, name);
  const json& cur_meta = current["metadata"];
  json& meta = object["metadata"];
  if (meta.value("name", name) != name) {
    throw StoreError(
        400, "BadRequest",
        "the name of the object (" + meta.value("name", "") + ") does not match the name on the URL (" + name + ")");
  }
  const std::string want_rv = meta.value("resourceVersion", "");
  if (!want_rv.empty() && want_rv != cur_meta.value("resourceVersion", "")) {
    throw StoreError(409, "Conflict", ConflictMessage(r, name));
  }
  if (r.custom && subresource.empty() && want_rv.empty()) {
    throw StoreError(422, "Invalid",
                     r.kind + " \"" + name +
                         "\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be "
                         "specified for an update");
  }
  const std::string want_uid = meta.value("uid", "");
  if (!want_uid.empty() && want_uid != cur_meta.value("uid", "")) {
    throw StoreError(
        409, "Conflict",
        "Precondition failed: UID in precondition: " + want_uid + ", UID in object meta: " + cur_meta.value("uid", ""));
  }
  json updated;
  if (subresource == "status") {
    updated = current;
    if (object.contains("status")) {
      updated["status"] = object["status"];
    } else {
      updated.erase("status");
    }
  } else {
    updated = std::move(object);
    // Server-owned metadata survives whatever the client sent.
    for (const char* key :
         {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"}) {
      if (cur_meta.contains(key)) {
        updated["metadata"][key] = cur_meta[key];
      } else {
        updated["metadata"].erase(key);
      }
    }
    updated["metadata"]["name"] = name;
    updated["apiVersion"] = r.ApiVersion();
    updated["kind"] = r.kind;
    if (r.status_subresource) {
      if (current.contains("status")) {
        updated["status"] = current["status"];
      } else {
        updated.erase("status");
      }
    }
    if (SpecPart(updated) != SpecPart(current)) {
      updated["metadata"]["generation"] = cur_meta.value("generation", 1) + 1;
    }
  }
  updated["metadata"]["resourceVersion"] = cur_meta["resourceVersion"];
  if (updated == current) return current;  // no-op writes do not bump the revision (as etcd/guaranteedUpdate)
  // Removing the last finalizer of an object being deleted completes the deletion.
  if (updated["metadata"].contains("deletionTimestamp") && !HasFinalizers(updated) && HasFinalizers(current)) {
    json old = current;
    updated["metadata"]["resourceVersion"] = std::to_string(Bump());
    current = updated;
    Record(r, "MODIFIED", old, updated);
    RemoveLocked(r, KeyOf(ns, name), "Background");
    return updated;
  }
  updated["metadata"]["resourceVersion"] = std::to_string(Bump());
  json old = current;
  current = updated;
  Record(r, "MODIFIED", old, updated);
  ServeCrdLocked(r, updated);
  return updated;
}

json ObjectStore::Patch(const ResourceInfo& r, const std::string& ns, const std::string& name, const json& patch,
                        const std::string& content_type, const std::string& subresource) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  json current = MustFind(r, ns, name);
  json patched = current;
  if (content_type.rfind("application/merge-patch+json", 0) == 0) {
    patched.merge_patch(patch);
  } else if (content_type.rfind("application/strategic-merge-patch+json", 0) == 0) {
    if (r.custom) {
      throw StoreError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media types include: "
                       "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
    }
    // Close enough for the fields headroom touches, but conditions merge by type (what a
    // scheduler adding DisruptionTarget to a pod relies on).
    json merged = patch;
    if (patch.contains("status") && patch["status"].is_object() && patch["status"].contains("conditions") &&
        patch["status"]["conditions"].is_array() && current.contains("status") &&
        current["status"].contains("conditions") && current["status"]["conditions"].is_array()) {
      json conditions = current["status"]["conditions"];
      for (const json& c : patch["status"]["conditions"]) {
        auto same = std::find_if(conditions.begin(), conditions.end(), [&](const json& have) {
          return c.is_object() && have.is_object() && have.value("type", "") == c.value("type", "");
        });
        if (same != conditions.end()) {
          same->merge_patch(c);
        } else {
          conditions.push_back(c);
        }
      }
      merged["status"]["conditions"] = conditions;
    }
    patched.merge_patch(merged);
  } else if (content_type.rfind("application/json-patch+json", 0) == 0) {
    try {
      patched = current.patch(patch);
    } catch (const std::exception& e) {
      throw StoreError(422, "Invalid", std::string("json patch failed: ") + e.what());
    }
  } else {
    throw StoreError(415, "UnsupportedMediaType", "unsupported patch type " + content_type);
  }
  return UpdateLocked(r, ns, name, std::move(patched), subresource);
}

json ObjectStore::Delete(const ResourceInfo& r, const std::string& ns, const std::string& name,
                         const StoreDeleteOptions& options) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return DeleteLocked(r, ns, name, options);
}

json ObjectStore::DeleteLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                               const StoreDeleteOptions& options) {
  json& current = MustFind(r, ns, name);
  json& meta = current["metadata"];
  if (!options.precondition_uid.empty() && options.precondition_uid != meta.value("uid", "")) {
    throw StoreError(409, "Conflict",
                     "Precondition failed: UID in precondition: " + options.precondition_uid +
                         ", UID in object meta: " + meta.value("uid", ""));
  }
  if (!options.precondition_resource_version.empty() &&
      options.precondition_resource_version != meta.value("resourceVersion", "")) {
    throw StoreError(409, "Conflict", ConflictMessage(r, name));
  }
  const std::string key = KeyOf(ns, name);
  // Graceful deletion: a pod running on a node gets a deletionTimestamp and stays until
  // its kubelet confirms with grace 0. Unscheduled or finished pods go at once.
  int64_t grace = 0;
  if (r.plural == "pods" && r.group.empty()) {
    grace = options.grace_period_seconds.value_or(current["spec"].value("terminationGracePeriodSeconds", 30));
    const std::string phase = current.contains("status") ? current["status"].value("phase", "") : "";
    if (current["spec"].value("nodeName", "").empty() || phase == "Succeeded" || phase == "Failed") grace = 0;
  }
  if (grace > 0 || HasFinalizers(current)) {
    if (meta.contains("deletionTimestamp")) {
      // Already terminating: only a shorter grace period changes anything.
      if (grace == 0 || grace >= meta.value("deletionGracePeriodSeconds", int64_t{0})) return current;
    }
    json old = current;
    meta["deletionTimestamp"] = kubeclient::FormatTime(std::chrono::system_clock::now() + std::chrono::seconds(grace));
    meta["deletionGracePeriodSeconds"] = grace;
    meta["resourceVersion"] = std::to_string(Bump());
    Record(r, "MODIFIED", old, current);
    return current;
  }
  json final_object = current;
  RemoveLocked(r, key, options.propagation_policy);
  return final_object;
}

void ObjectStore::RemoveLocked(const ResourceInfo& r, const std::string& key, const std::string& policy) {
  Bucket& bucket = BucketOf(r);
  auto it = bucket.find(key);
  if (it == bucket.end()) return;
  json old = it->second;
  json gone = it->second;
  gone["metadata"]["resourceVersion"] = std::to_string(Bump());
  bucket.erase(it);
  Record(r, "DELETED", old, gone);
  const std::string uid = gone["metadata"].value("uid", "");
  CollectGarbageLocked(uid, policy);
}

void ObjectStore::CollectGarbageLocked(const std::string& owner_uid, const std::string& policy) {
  if (owner_uid.empty()) return;
  for (auto& [id, info] : resources_) {
    Bucket& bucket = objects_[id];
    std::vector<std::string> dependents;
    for (const auto& [key, object] : bucket) {
      if (HasOwner(object, owner_uid)) dependents.push_back(key);
    }
    for (const std::string& key : dependents) {
      auto it = bucket.find(key);
      if (it == bucket.end()) continue;
      if (policy == "Orphan") {
        json old = it->second;
        json& refs = it->second["metadata"]["ownerReferences"];
        json kept = json::array();
        for (const auto& ref : refs) {
          if (ref.value("uid", "") != owner_uid) kept.push_back(ref);
        }
        refs = kept;
        it->second["metadata"]["resourceVersion"] = std::to_string(Bump());
        Record(info, "MODIFIED", old, it->second);
        continue;
      }
      const json& meta = it->second["metadata"];
      if (meta.contains("deletionTimestamp") && !HasFinalizers(it->second)) continue;  // already going
      DeleteLocked(info, meta.value("namespace", ""), meta.value("name", ""), StoreDeleteOptions{});
    }
  }
}

json ObjectStore::GetScale(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  if (!r.scale_subresource) throw StoreError(404, "NotFound", "the server could not find the requested resource");
  json object = Get(r, ns, name);
  const json& meta = object["metadata"];
  json scale = {{"apiVersion", "autoscaling/v1"},
                {"kind", "Scale"},
                {"metadata",
                 {{"name", name},
                  {"namespace", ns},
                  {"uid", meta["uid"]},
                  {"resourceVersion", meta["resourceVersion"]},
                  {"creationTimestamp", meta["creationTimestamp"]}}},
                {"spec", {{"replicas", object["spec"].value("workers", 0)}}},
                {"status", {{"replicas", object.contains("status") ? object["status"].value("workers", 0) : 0}}}};
  return scale;
}

json ObjectStore::UpdateScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                              const json& scale) {
  if (!r.scale_subresource) throw StoreError(404, "NotFound", "the server could not find the requested resource");
  std::lock_guard<std::recursive_mutex> lock(mu_);
  json object = MustFind(r, ns, name);
  if (!scale.contains("spec") || !scale["spec"].contains("replicas") ||
      !scale["spec"]["replicas"].is_number_integer()) {
    throw StoreError(422, "Invalid", "Scale.spec.replicas: Required value");
  }
  const std::string want_rv = scale.contains("metadata") ? scale["metadata"].value("resourceVersion", "") : "";
  if (!want_rv.empty()) object["metadata"]["resourceVersion"] = want_rv;
  object["spec"]["workers"] = scale["spec"]["replicas"];
  UpdateLocked(r, ns, name, std::move(object), "");
  return GetScale(r, ns, name);
}

json ObjectStore::Bind(const std::string& ns, const std::string& name, const std::string& node) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const ResourceInfo& pods = resources_.at("/pods");
  json& pod = MustFind(pods, ns, name);
  const std::string bound = pod["spec"].value("nodeName", "");
  if (!bound.empty()) {
    throw StoreError(409, "Conflict", "pod " + name + " is already assigned to node \"" + bound + "\"");
  }
  json old = pod;
  pod["spec"]["nodeName"] = node;
  pod["metadata"]["resourceVersion"] = std::to_string(Bump());
  Record(pods, "MODIFIED", old, pod);
  return pod;
}

json ObjectStore::Evict(const std::string& ns, const std::string& name, const StoreDeleteOptions& options) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const ResourceInfo& pods = resources_.at("/pods");
  json pod = MustFind(pods, ns, name);
  const std::string phase = pod.contains("status") ? pod["status"].value("phase", "") : "";
  if (phase != "Succeeded" && phase != "Failed" && !pod["metadata"].contains("deletionTimestamp")) {
    json status = pod.value("status", json::object());
    json conditions = json::array();
    for (const json& c : status.value("conditions", json::array())) {
      if (c.value("type", "") != "DisruptionTarget") conditions.push_back(c);
    }
    conditions.push_back({{"type", "DisruptionTarget"},
                          {"status", "True"},
                          {"reason", "EvictionByEvictionAPI"},
                          {"message", "Eviction API: evicting"},
                          {"lastTransitionTime", kubeclient::FormatTime(std::chrono::system_clock::now())}});
    status["conditions"] = std::move(conditions);
    pod["status"] = std::move(status);
    UpdateLocked(pods, ns, name, std::move(pod), "status");
  }
  DeleteLocked(pods, ns, name, options);
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}, {"code", 201}};
}

// --- history and watches ----------------------------------------------------------------

void ObjectStore::Record(const ResourceInfo& r, const std::string& type, const json& old_object, const json& object) {
  ++writes_;
  Event e{rv_, r.Id(), type, old_object, object};
  history_.push_back(e);
  while (history_.size() > history_window_) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
  Deliver(history_.back());
}

bool ObjectStore::Offer(int64_t /*id*/, Watch& w, const Event& e) {
  if (e.resource != w.resource) return true;
  auto visible = [&](const json& object) {
    if (object.is_null()) return false;
    if (!w.ns.empty() && object["metadata"].value("namespace", "") != w.ns) return false;
    return w.labels.Matches(object) && w.fields.Matches(object);
  };
  // Selectors apply to both sides of a change: an object that stops matching is DELETED
  // for this watcher, one that starts matching is ADDED — what a real watch cache does.
  const bool was = e.type != "ADDED" && visible(e.old_object);
  const bool is = visible(e.object);
  std::string type = e.type;
  if (e.type == "DELETED") {
    if (!was) return true;
  } else if (was && !is) {
    type = "DELETED";
  } else if (!was && is) {
    type = "ADDED";
  } else if (!was && !is) {
    return true;
  }
  return w.sink(type, e.object);
}

void ObjectStore::Deliver(const Event& e) {
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (!Offer(it->first, it->second, e)) {
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t ObjectStore::Subscribe(const ResourceInfo& r, const std::string& ns, const std::string& resource_version,
                               LabelSelector labels, FieldSelector fields, Sink sink) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const int64_t id = next_watch_id_++;
  Watch w{r.Id(), r.ApiVersion(), r.kind, ns, std::move(labels), std::move(fields), std::move(sink)};
  if (resource_version.empty() || resource_version == "0") {
    // Start with the current state, as synthetic ADDED events.
    for (const auto& [key, object] : BucketOf(r)) {
      if (!w.ns.empty() && object["metadata"].value("namespace", "") != w.ns) continue;
      if (!w.labels.Matches(object) || !w.fields.Matches(object)) continue;
      if (!w.sink("ADDED", object)) return id;
    }
  } else {
    int64_t from = 0;
    try {
      from = std::stoll(resource_version);
    } catch (...) {
      throw StoreError(400, "BadRequest", "invalid resourceVersion \"" + resource_version + "\"");
    }
    if (from < compacted_rv_) {
      throw StoreError(410, "Expired",
                       "too old resource version: " + resource_version + " (" + std::to_string(compacted_rv_) + ")");
    }
    for (const Event& e : history_) {
      if (e.rv <= from) continue;
      if (!Offer(id, w, e)) return id;
    }
  }
  watches_.emplace(id, std::move(w));
  return id;
}

void ObjectStore::Unsubscribe(int64_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  watches_.erase(id);
}

void ObjectStore::Bookmark(int64_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  json object = {{"apiVersion", it->second.api_version},
                 {"kind", it->second.kind},
                 {"metadata", {{"resourceVersion", std::to_string(rv_)}}}};
  if (!it->second.sink("BOOKMARK", object)) watches_.erase(it);
}

}  // namespace headroom::testserver
