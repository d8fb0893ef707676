// ResourceClient: typed access to one kind of Kubernetes object — the verbs client-go's
// typed clients give (get, list, create, update, patch, delete, watch, and the status
// and scale subresources) — over a RestClient. Objects are nlohmann::json as the API
// server sends them; helpers below read the common metadata fields.
//
// Updates are PUTs carrying metadata.resourceVersion: a stale one fails with 409 Conflict
// (ApiError::IsConflict) and UpdateWithRetry re-reads and re-applies the mutation.
// Patches are JSON merge patches (RFC 7386): the API server does not accept strategic
// merge patches for custom resources, so headroom uses merge patches everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/kubeclient/rest_client.h"

namespace headroom::kubeclient {

// Where a kind lives in the API: /api/v1 for the core group, /apis/<group>/<version> else.
struct ResourceType {
  std::string group;    // "" for core
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "trainingjobs"
  std::string kind;     // "Pod", "TrainingJob"
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "/api/v1" or "/apis/headroom.dev/v1alpha1".
  std::string GroupVersionPath() const;
  // The collection path in `ns` ("" = all namespaces), or an object's path when `name` is
  // given, with an optional subresource ("status", "scale").
  std::string Path(const std::string& ns, const std::string& name = "", const std::string& subresource = "") const;
};

namespace resources {
extern const ResourceType kTrainingJobs;  // headroom.dev/v1alpha1 trainingjobs
extern const ResourceType kPods;
extern const ResourceType kServices;
extern const ResourceType kConfigMaps;
extern const ResourceType kEvents;  // core/v1 events
extern const ResourceType kLeases;  // coordination.k8s.io/v1 leases
}  // namespace resources

struct ListOptions {
  std::string label_selector;    // "a=b,c in (x,y)"
  std::string field_selector;    // "spec.nodeName=n1"
  std::string resource_version;  // "" = most recent
  int64_t limit = 0;             // 0 = all in one page
  std::string continue_token;
  // Query string ("?..."; "" when nothing is set).
  std::string Query() const;
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // "Background" | "Foreground" | "Orphan" | "" (server default)
  std::string precondition_uid;    // delete only this incarnation of the object
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // watch events after this
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // the server ends the watch after this
};

class ResourceClient {
 public:
  ResourceClient(RestClient& client, ResourceType type) : client_(&client), type_(std::move(type)) {}

  const ResourceType& type() const { return type_; }
  RestClient& rest() const { return *client_; }

  nlohmann::json Get(const std::string& ns, const std::string& name) const;
  // Returns nullopt on 404, the object otherwise.
  std::optional<nlohmann::json> TryGet(const std::string& ns, const std::string& name) const;
  // One page: {metadata: {resourceVersion, continue}, items: [...]}.
  nlohmann::json List(const std::string& ns, const ListOptions& options = {}) const;
  // Every page, following `continue`; the result's metadata.resourceVersion is the first
  // page's (the point a following watch must start from).
  nlohmann::json ListAll(const std::string& ns, ListOptions options = {}) const;

  nlohmann::json Create(const std::string& ns, const nlohmann::json& object) const;
  // PUT; object must carry metadata.resourceVersion. 409 -> ApiError::IsConflict.
  nlohmann::json Update(const std::string& ns, const nlohmann::json& object) const;
  nlohmann::json UpdateStatus(const std::string& ns, const nlohmann::json& object) const;
  // Reads the object, calls mutate(obj); when mutate returns false nothing is written and
  // the read object is returned. On 409 re-reads and tries again (up to `attempts`).
  nlohmann::json UpdateWithRetry(const std::string& ns, const std::string& name,
                                 const std::function<bool(nlohmann::json&)>& mutate, int attempts = 5,
                                 bool status = false) const;
  // JSON merge patch (application/merge-patch+json).
  nlohmann::json Patch(const std::string& ns, const std::string& name, const nlohmann::json& patch) const;
  nlohmann::json PatchStatus(const std::string& ns, const std::string& name, const nlohmann::json& patch) const;
  // Returns false when the object was already gone (404), true otherwise.
  bool Delete(const std::string& ns, const std::string& name, const DeleteOptions& options = {}) const;

  // autoscaling/v1 Scale of the object (TrainingJobs: .spec.workers / .status.workers).
  nlohmann::json GetScale(const std::string& ns, const std::string& name) const;
  nlohmann::json UpdateScale(const std::string& ns, const std::string& name, const nlohmann::json& scale) const;

  // The URL of a watch (for Watcher / RestClient::Stream).
  std::string WatchTarget(const std::string& ns, const WatchOptions& options) const;

 private:
  RestClient* client_;
  ResourceType type_;
};

// --- metadata helpers -------------------------------------------------------------------
std::string Name(const nlohmann::json& object);
std::string Namespace(const nlohmann::json& object);
std::string Uid(const nlohmann::json& object);
std::string ResourceVersionOf(const nlohmann::json& object);
// "namespace/name" (or "name" for cluster-scoped objects): the key caches and queues use.
std::string KeyOf(const nlohmann::json& object);
std::string Key(const std::string& ns, const std::string& name);
// Splits a key back into namespace and name.
std::pair<std::string, std::string> SplitKey(const std::string& key);
// The label's value, or "" when absent.
std::string Label(const nlohmann::json& object, const std::string& key);
// Uid of the owner with controller: true, or "".
std::string ControllerUid(const nlohmann::json& object);
// metav1.Time "2026-01-02T03:04:05Z" and metav1.MicroTime "2026-01-02T03:04:05.123456Z".
std::string FormatTime(std::chrono::system_clock::time_point t);
std::string FormatMicroTime(std::chrono::system_clock::time_point t);
// Parses either form (and RFC 3339 offsets); throws std::invalid_argument on bad input.
std::chrono::system_clock::time_point ParseTime(const std::string& text);

}  // namespace headroom::kubeclient
