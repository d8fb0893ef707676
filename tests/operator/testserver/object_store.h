// ObjectStore: the API server's storage and semantics, without HTTP — what etcd plus the
// generic registry give a real API server, for the kinds headroom uses.
//   - one global resourceVersion counter, bumped by every write (etcd's revision); every
//     object carries the revision of its last write; lists report the current one;
//   - metadata.uid, creationTimestamp, generation (bumped on spec changes, never on status);
//   - 409 Conflict on a stale resourceVersion, 409 AlreadyExists, 404 NotFound, 422 Invalid;
//   - status subresource: the main update ignores .status, the status update changes only
//     .status; scale subresource (TrainingJobs: .spec.workers / .status.workers);
//   - merge patch (and JSON patch); strategic merge patch is refused for custom resources
//     (415) as a real server does, and treated as a merge patch for built-in kinds, except
//     that status.conditions merge by type (their patchMergeKey), as a real server's do;
//   - graceful deletion of pods bound to a node (deletionTimestamp, then the kubelet
//     finalises with grace 0), finalizers, ownerReference garbage collection (background
//     and orphan propagation);
//   - an event history for watches, compacted to a window: watching from a revision older
//     than the window is 410 Gone.
// Watchers get events synchronously under the store's lock, so each sees the exact order
// of writes. Errors are thrown as StoreError and become a metav1.Status on the wire.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/operator/testserver/label_selector.h"

namespace headroom::testserver {

struct StoreError : std::runtime_error {
  StoreError(int code, std::string reason, const std::string& message)
      : std::runtime_error(message), code(code), reason(std::move(reason)) {}
  int code;
  std::string reason;
};

struct ResourceInfo {
  std::string group;
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced = true;
  bool custom = false;  // a CRD: no strategic merge patch
  bool status_subresource = false;
  bool scale_subresource = false;  // replicas at spec.workers / status.workers
  // Discovery (what `kubectl` resolves names with): singular, short names, categories.
  std::string singular;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::string Id() const { return group + "/" + plural; }
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  std::string QualifiedName() const { return group.empty() ? plural : plural + "." + group; }
};

struct StoreDeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // "", "Background", "Foreground", "Orphan"
  std::string precondition_uid;
  std::string precondition_resource_version;
};

class ObjectStore {
 public:
  // A watcher: gets (type, object) for each event it matches; returning false
  // unsubscribes it. Called with the store locked: must not call back into the store.
  using Sink = std::function<bool(const std::string& type, const nlohmann::json& object)>;

  explicit ObjectStore(size_t history_window = 10000);

  // Registers the kinds a real cluster with the headroom CRD serves.
  void RegisterDefaults();
  void Register(const ResourceInfo& info);
  const ResourceInfo* Find(const std::string& group, const std::string& version, const std::string& plural) const;
  // Every kind served, for discovery.
  std::vector<ResourceInfo> Resources() const;
  // The CustomResourceDefinition object that defines `r` (null for a built-in kind or a
  // kind registered without one): its printer columns shape `kubectl get`'s table.
  nlohmann::json CrdOf(const ResourceInfo& r) const;

  nlohmann::json Create(const ResourceInfo& r, const std::string& ns, nlohmann::json object);
  nlohmann::json Get(const ResourceInfo& r, const std::string& ns, const std::string& name) const;
  nlohmann::json List(const ResourceInfo& r, const std::string& ns, const LabelSelector& labels,
                      const FieldSelector& fields, int64_t limit, const std::string& continue_token) const;
  // subresource: "" (main), "status".
  nlohmann::json Update(const ResourceInfo& r, const std::string& ns, const std::string& name, nlohmann::json object,
                        const std::string& subresource);
  // content_type: application/merge-patch+json, application/json-patch+json,
  // application/strategic-merge-patch+json.
  nlohmann::json Patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
                       const nlohmann::json& patch, const std::string& content_type, const std::string& subresource);
  nlohmann::json Delete(const ResourceInfo& r, const std::string& ns, const std::string& name,
                        const StoreDeleteOptions& options);
  nlohmann::json GetScale(const ResourceInfo& r, const std::string& ns, const std::string& name) const;
  nlohmann::json UpdateScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                             const nlohmann::json& scale);
  // pods/<name>/binding: sets spec.nodeName once.
  nlohmann::json Bind(const std::string& ns, const std::string& name, const std::string& node);
  // pods/<name>/eviction (what `kubectl drain` calls), as a real server with the pod
  // disruption conditions (on by default since 1.26) does it: a pod still running first
  // gets status.conditions DisruptionTarget (reason EvictionByEvictionAPI), then is deleted
  // with the eviction's options (its grace period, else the pod's). There are no
  // PodDisruptionBudgets here, so every eviction is allowed. Returns the Status.
  nlohmann::json Evict(const std::string& ns, const std::string& name, const StoreDeleteOptions& options);

  // Starts a watch on `r` in `ns` ("" = all) from `resource_version` ("" or "0": the current
  // objects as ADDED first). Throws StoreError 410 when that revision was compacted away.
  // Returns an id for Unsubscribe / Bookmark.
  int64_t Subscribe(const ResourceInfo& r, const std::string& ns, const std::string& resource_version,
                    LabelSelector labels, FieldSelector fields, Sink sink);
  void Unsubscribe(int64_t id);
  // Sends the watcher a BOOKMARK at the current revision.
  void Bookmark(int64_t id);
  size_t watchers() const;

  int64_t resource_version() const;
  // Forgets all history: any watch from an older revision gets 410.
  void Compact();
  // Number of writes that changed something (create/update/patch/delete), for benches.
  int64_t writes() const;

 private:
  struct Event {
    int64_t rv;
    std::string resource;  // ResourceInfo::Id()
    std::string type;
    nlohmann::json old_object;  // null for ADDED
    nlohmann::json object;
  };
  struct Watch {
    std::string resource;
    std::string api_version;
    std::string kind;
    std::string ns;
    LabelSelector labels;
    FieldSelector fields;
    Sink sink;
  };
  using Bucket = std::map<std::string, nlohmann::json>;  // "ns/name" -> object

  Bucket& BucketOf(const ResourceInfo& r) { return objects_[r.Id()]; }
  nlohmann::json& MustFind(const ResourceInfo& r, const std::string& ns, const std::string& name);
  nlohmann::json UpdateLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                              nlohmann::json object, const std::string& subresource);
  nlohmann::json DeleteLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                              const StoreDeleteOptions& options);
  void RemoveLocked(const ResourceInfo& r, const std::string& key, const std::string& policy);
  // A CustomResourceDefinition written: its kind is served from now on, as a real server's
  // apiextensions controller does (the kind stays served after the CRD goes, here).
  void ServeCrdLocked(const ResourceInfo& r, const nlohmann::json& object);
  void CollectGarbageLocked(const std::string& owner_uid, const std::string& policy);
  void Record(const ResourceInfo& r, const std::string& type, const nlohmann::json& old_object,
              const nlohmann::json& object);
  void Deliver(const Event& e);
  bool Offer(int64_t id, Watch& w, const Event& e);
  int64_t Bump() { return ++rv_; }

  mutable std::recursive_mutex mu_;
  std::map<std::string, ResourceInfo> resources_;  // Id() -> info
  std::map<std::string, Bucket> objects_;
  std::deque<Event> history_;
  size_t history_window_;
  int64_t compacted_rv_ = 0;  // watching from below this is 410
  int64_t rv_ = 100;
  int64_t uid_counter_ = 0;
  int64_t writes_ = 0;
  std::map<int64_t, Watch> watches_;
  int64_t next_watch_id_ = 1;
};

}  // namespace headroom::testserver
