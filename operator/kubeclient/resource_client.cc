#include "operator/kubeclient/resource_client.h"

#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace headroom::kubeclient {

namespace resources {
const ResourceType kTrainingJobs{"headroom.dev", "v1alpha1", "trainingjobs", "TrainingJob", true};
const ResourceType kPods{"", "v1", "pods", "Pod", true};
const ResourceType kServices{"", "v1", "services", "Service", true};
const ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const ResourceType kEvents{"", "v1", "events", "Event", true};
const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
}  // namespace resources

std::string ResourceType::GroupVersionPath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceType::Path(const std::string& ns, const std::string& name, const std::string& sub) const {
  std::string path = GroupVersionPath();
  if (namespaced && !ns.empty()) path += "/namespaces/" + ns;
  path += "/" + plural;
  if (!name.empty()) path += "/" + name;
  if (!sub.empty()) path += "/" + sub;
  return path;
}

namespace {
void AddParam(std::string& query, const std::string& key, const std::string& value) {
  query += query.empty() ? "?" : "&";
  query += key + "=" + UrlEncode(value);
}
}  // namespace

std::string ListOptions::Query() const {
  std::string q;
  if (!label_selector.empty()) AddParam(q, "labelSelector", label_selector);
  if (!field_selector.empty()) AddParam(q, "fieldSelector", field_selector);
  if (!resource_version.empty()) AddParam(q, "resourceVersion", resource_version);
  if (limit > 0) AddParam(q, "limit", std::to_string(limit));
  if (!continue_token.empty()) AddParam(q, "continue", continue_token);
  return q;
}

nlohmann::json ResourceClient::Get(const std::string& ns, const std::string& name) const {
  return client_->Request("GET", type_.Path(ns, name));
}

std::optional<nlohmann::json> ResourceClient::TryGet(const std::string& ns, const std::string& name) const {
  try {
    return Get(ns, name);
  } catch (const ApiError& e) {
    if (e.IsNotFound()) return std::nullopt;
    throw;
  }
}

nlohmann::json ResourceClient::List(const std::string& ns, const ListOptions& options) const {
  return client_->Request("GET", type_.Path(ns) + options.Query());
}

nlohmann::json ResourceClient::ListAll(const std::string& ns, ListOptions options) const {
  nlohmann::json all = List(ns, options);
  if (!all.contains("items") || all["items"].is_null()) all["items"] = nlohmann::json::array();
  while (true) {
    std::string next = all["metadata"].value("continue", "");
    if (next.empty()) break;
    options.continue_token = next;
    options.resource_version.clear();  // the token pins the snapshot
    nlohmann::json page = List(ns, options);
    if (page.contains("items") && page["items"].is_array()) {
      for (auto& item : page["items"]) all["items"].push_back(std::move(item));
    }
    all["metadata"]["continue"] = page["metadata"].value("continue", "");
  }
  all["metadata"].erase("continue");
  return all;
}

namespace {
nlohmann::json WithTypeMeta(nlohmann::json object, const ResourceType& type) {
  if (!object.contains("apiVersion")) object["apiVersion"] = type.ApiVersion();
  if (!object.contains("kind")) object["kind"] = type.kind;
  return object;
}
}  // namespace

nlohmann::json ResourceClient::Create(const std::string& ns, const nlohmann::json& object) const {
  nlohmann::json body = WithTypeMeta(object, type_);
  return client_->Request("POST", type_.Path(ns), &body);
}

nlohmann::json ResourceClient::Update(const std::string& ns, const nlohmann::json& object) const {
  nlohmann::json body = WithTypeMeta(object, type_);
  return client_->Request("PUT", type_.Path(ns, Name(object)), &body);
}

nlohmann::json ResourceClient::UpdateStatus(const std::string& ns, const nlohmann::json& object) const {
  nlohmann::json body = WithTypeMeta(object, type_);
  return client_->Request("PUT", type_.Path(ns, Name(object), "status"), &body);
}

nlohmann::json ResourceClient::UpdateWithRetry(const std::string& ns, const std::string& name,
                                               const std::function<bool(nlohmann::json&)>& mutate, int attempts,
                                               bool status) const {
  for (int attempt = 1;; ++attempt) {
    nlohmann::json object = Get(ns, name);
    if (!mutate(object)) return object;
    try {
      return status ? UpdateStatus(ns, object) : Update(ns, object);
    } catch (const ApiError& e) {
      if (!e.IsConflict() || attempt >= attempts) throw;
    }
  }
}

nlohmann::json ResourceClient::Patch(const std::string& ns, const std::string& name,
                                     const nlohmann::json& patch) const {
  return client_->Request("PATCH", type_.Path(ns, name), &patch, "application/merge-patch+json");
}

nlohmann::json ResourceClient::PatchStatus(const std::string& ns, const std::string& name,
                                           const nlohmann::json& patch) const {
  return client_->Request("PATCH", type_.Path(ns, name, "status"), &patch, "application/merge-patch+json");
}

bool ResourceClient::Delete(const std::string& ns, const std::string& name, const DeleteOptions& options) const {
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (!options.precondition_uid.empty()) body["preconditions"] = {{"uid", options.precondition_uid}};
  try {
    client_->Request("DELETE", type_.Path(ns, name), &body);
    return true;
  } catch (const ApiError& e) {
    if (e.IsNotFound()) return false;
    throw;
  }
}

nlohmann::json ResourceClient::GetScale(const std::string& ns, const std::string& name) const {
  return client_->Request("GET", type_.Path(ns, name, "scale"));
}

nlohmann::json ResourceClient::UpdateScale(const std::string& ns, const std::string& name,
                                           const nlohmann::json& scale) const {
  nlohmann::json body = scale;
  if (!body.contains("apiVersion")) body["apiVersion"] = "autoscaling/v1";
  if (!body.contains("kind")) body["kind"] = "Scale";
  body["metadata"]["name"] = name;
  body["metadata"]["namespace"] = ns;
  return client_->Request("PUT", type_.Path(ns, name, "scale"), &body);
}

std::string ResourceClient::WatchTarget(const std::string& ns, const WatchOptions& options) const {
  std::string q = "?watch=true";
  if (!options.label_selector.empty()) AddParam(q, "labelSelector", options.label_selector);
  if (!options.field_selector.empty()) AddParam(q, "fieldSelector", options.field_selector);
  if (!options.resource_version.empty()) AddParam(q, "resourceVersion", options.resource_version);
  if (options.allow_bookmarks) AddParam(q, "allowWatchBookmarks", "true");
  if (options.timeout_seconds > 0) AddParam(q, "timeoutSeconds", std::to_string(options.timeout_seconds));
  return type_.Path(ns) + q;
}

// --- metadata helpers -------------------------------------------------------------------
namespace {
std::string MetaString(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto v = meta->find(key);
  return v != meta->end() && v->is_string() ? v->get<std::string>() : "";
}
}  // namespace

std::string Name(const nlohmann::json& o) { return MetaString(o, "name"); }
std::string Namespace(const nlohmann::json& o) { return MetaString(o, "namespace"); }
std::string Uid(const nlohmann::json& o) { return MetaString(o, "uid"); }
std::string ResourceVersionOf(const nlohmann::json& o) { return MetaString(o, "resourceVersion"); }
std::string Key(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }
std::string KeyOf(const nlohmann::json& o) { return Key(Namespace(o), Name(o)); }

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string Label(const nlohmann::json& o, const std::string& key) {
  if (!o.is_object() || !o.contains("metadata")) return "";
  const auto& meta = o["metadata"];
  if (!meta.is_object() || !meta.contains("labels") || !meta["labels"].is_object()) return "";
  auto v = meta["labels"].find(key);
  return v != meta["labels"].end() && v->is_string() ? v->get<std::string>() : "";
}

std::string ControllerUid(const nlohmann::json& o) {
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].contains("ownerReferences")) return "";
  for (const auto& ref : o["metadata"]["ownerReferences"]) {
    if (ref.value("controller", false)) return ref.value("uid", "");
  }
  return "";
}

std::string FormatTime(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  if (micros < 0) micros += 1000000;
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(micros));
  return out;
}

std::chrono::system_clock::time_point ParseTime(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    throw std::invalid_argument("not an RFC 3339 time: \"" + text + "\"");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  auto t = std::chrono::system_clock::from_time_t(timegm(&tm));
  size_t pos = static_cast<size_t>(consumed);
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    long long frac = 0;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 9) {
        frac = frac * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    while (digits < 9) {
      frac *= 10;
      ++digits;
    }
    t += std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(frac));
  }
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int hh = 0, mm = 0;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &hh, &mm) != 2) {
      throw std::invalid_argument("bad time zone offset in \"" + text + "\"");
    }
    auto offset = std::chrono::hours(hh) + std::chrono::minutes(mm);
    t += text[pos] == '+' ? -offset : offset;
  } else if (pos >= text.size() || text[pos] != 'Z') {
    throw std::invalid_argument("time \"" + text + "\" has no zone (Z or +hh:mm)");
  }
  return t;
}

}  // namespace headroom::kubeclient
