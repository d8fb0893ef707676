#include "tests/operator/testserver/discovery.h"

#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include "operator/kubeclient/resource_client.h"

namespace headroom::testserver {

using nlohmann::json;

namespace {

std::vector<std::string> Verbs() {
  return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
}

// Age as kubectl prints it (apimachinery's HumanDuration, rounded the same way).
std::string HumanAge(const std::string& timestamp) {
  std::tm tm{};
  if (timestamp.size() < 19 || ::strptime(timestamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return "<unknown>";
  const int64_t then = ::timegm(&tm);
  const int64_t s = std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
             then);
  if (s < 120) return std::to_string(s) + "s";
  const int64_t m = s / 60;
  if (m < 10) return std::to_string(m) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  if (m < 180) return std::to_string(m) + "m";
  const int64_t h = m / 60;
  if (h < 8) return std::to_string(h) + "h" + (m % 60 ? std::to_string(m % 60) + "m" : "");
  if (h < 48) return std::to_string(h) + "h";
  return std::to_string(h / 24) + "d";
}

// A printer column's JSONPath: the simple field paths (".status.phase") CRDs use.
json Lookup(const json& object, const std::string& path) {
  const json* at = &object;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] != '.') return nullptr;
    size_t end = path.find('.', i + 1);
    if (end == std::string::npos) end = path.size();
    const std::string key = path.substr(i + 1, end - i - 1);
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    i = end;
  }
  return *at;
}

}  // namespace

json VersionInfo() {
  return {
      {"major", "1"},        {"minor", "32"},     {"gitVersion", "v1.32.0-headroom-test"}, {"platform", "linux/amd64"},
      {"goVersion", "none"}, {"compiler", "none"}};
}

json ApiVersions(const std::string& server_address) {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

std::optional<json> ApiGroup(const std::vector<ResourceInfo>& resources, const std::string& group) {
  std::set<std::string> versions;
  for (const ResourceInfo& r : resources) {
    if (r.group == group) versions.insert(r.version);
  }
  if (group.empty() || versions.empty()) return std::nullopt;
  json list = json::array();
  for (const std::string& v : versions) list.push_back({{"groupVersion", group + "/" + v}, {"version", v}});
  return json{{"kind", "APIGroup"},
              {"apiVersion", "v1"},
              {"name", group},
              {"versions", list},
              {"preferredVersion", list.back()}};
}

json ApiGroupList(const std::vector<ResourceInfo>& resources) {
  std::set<std::string> groups;
  for (const ResourceInfo& r : resources) {
    if (!r.group.empty()) groups.insert(r.group);
  }
  json out = json::array();
  for (const std::string& g : groups) {
    json group = *ApiGroup(resources, g);
    group.erase("kind");
    group.erase("apiVersion");
    out.push_back(group);
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", out}};
}

std::optional<json> ApiResourceList(const std::vector<ResourceInfo>& resources, const std::string& group,
                                    const std::string& version) {
  json list = json::array();
  for (const ResourceInfo& r : resources) {
    if (r.group != group || r.version != version) continue;
    json entry{{"name", r.plural},
               {"singularName", r.singular},
               {"namespaced", r.namespaced},
               {"kind", r.kind},
               {"verbs", Verbs()}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    if (!r.categories.empty()) entry["categories"] = r.categories;
    list.push_back(entry);
    if (r.status_subresource) {
      list.push_back({{"name", r.plural + "/status"},
                      {"singularName", ""},
                      {"namespaced", r.namespaced},
                      {"kind", r.kind},
                      {"verbs", {"get", "patch", "update"}}});
    }
    if (r.scale_subresource) {
      list.push_back({{"name", r.plural + "/scale"},
                      {"singularName", ""},
                      {"namespaced", r.namespaced},
                      {"group", "autoscaling"},
                      {"version", "v1"},
                      {"kind", "Scale"},
                      {"verbs", {"get", "patch", "update"}}});
    }
    if (r.plural == "pods" && r.group.empty()) {
      list.push_back({{"name", "pods/binding"},
                      {"singularName", ""},
                      {"namespaced", true},
                      {"kind", "Binding"},
                      {"verbs", {"create"}}});
    }
  }
  if (list.empty()) return std::nullopt;
  return json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", list}};
}

json OpenApiV3Root(const std::vector<ResourceInfo>& resources) {
  json paths = json::object();
  for (const ResourceInfo& r : resources) {
    const std::string gv = r.group.empty() ? "api/" + r.version : "apis/" + r.group + "/" + r.version;
    paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv}};
  }
  return {{"paths", paths}};
}

std::optional<json> OpenApiV3Document(const std::vector<ResourceInfo>& resources, const std::string& group,
                                      const std::string& version) {
  json paths = json::object();
  const json query_params = json::array({
      {{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
      {{"name", "fieldManager"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
      {{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
  });
  const json responses = {{"200", {{"description", "OK"}}}};
  for (const ResourceInfo& r : resources) {
    if (r.group != group || r.version != version) continue;
    const json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
    const std::string base = (r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version) +
                             (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural;
    auto op = [&](const char* action) {
      return json{{"x-kubernetes-action", action},
                  {"x-kubernetes-group-version-kind", gvk},
                  {"parameters", query_params},
                  {"responses", responses}};
    };
    paths[base] = {{"get", op("list")}, {"post", op("post")}};
    paths[base + "/{name}"] = {
        {"get", op("get")}, {"put", op("put")}, {"patch", op("patch")}, {"delete", op("delete")}};
    if (r.status_subresource) paths[base + "/{name}/status"] = {{"get", op("get")}, {"patch", op("patch")}};
  }
  if (paths.empty()) return std::nullopt;
  return json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0-headroom-test"}}},
              {"paths", paths},
              {"components", {{"schemas", json::object()}}}};
}

namespace {

void Prune(json& value, const json& schema, const std::string& path, std::vector<std::string>& unknown) {
  if (!schema.is_object() || schema.value("x-kubernetes-preserve-unknown-fields", false)) return;
  if (value.is_object()) {
    const auto props = schema.find("properties");
    const auto additional = schema.find("additionalProperties");
    if (props != schema.end() && props->is_object()) {
      for (auto it = value.begin(); it != value.end();) {
        const std::string field = path.empty() ? it.key() : path + "." + it.key();
        if (props->contains(it.key())) {
          if (field != "metadata") Prune(it.value(), (*props)[it.key()], field, unknown);
          ++it;
        } else if (path.empty() && (it.key() == "apiVersion" || it.key() == "kind" || it.key() == "metadata")) {
          ++it;
        } else {
          unknown.push_back(field);
          it = value.erase(it);
        }
      }
    } else if (additional != schema.end() && additional->is_object()) {
      for (auto& [key, child] : value.items()) Prune(child, *additional, path + "." + key, unknown);
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      Prune(value[i], schema["items"], path + "[" + std::to_string(i) + "]", unknown);
    }
  }
}

}  // namespace

std::vector<std::string> PruneUnknownFields(json& object, const json& crd, const std::string& version) {
  std::vector<std::string> unknown;
  if (!crd.is_object() || !object.is_object()) return unknown;
  for (const json& v : crd["spec"].value("versions", json::array())) {
    if (v.value("name", "") != version || !v.contains("schema")) continue;
    Prune(object, v["schema"].value("openAPIV3Schema", json::object()), "", unknown);
  }
  return unknown;
}

bool WantsTable(const std::string& accept) { return accept.find("as=Table") != std::string::npos; }

json ToTable(const ResourceInfo& r, const std::vector<json>& objects, const json& crd,
             const std::string& resource_version) {
  struct Column {
    std::string name, type, format, description, path;
    int priority = 0;
  };
  std::vector<Column> columns{{"Name", "string", "name", "Name must be unique within a namespace.", "", 0}};
  bool printer_columns = false;
  if (crd.is_object()) {
    for (const json& v : crd["spec"].value("versions", json::array())) {
      if (v.value("name", "") != r.version || !v.contains("additionalPrinterColumns")) continue;
      printer_columns = true;
      for (const json& c : v["additionalPrinterColumns"]) {
        columns.push_back({c.value("name", ""), c.value("type", "string"), c.value("format", ""),
                           c.value("description", ""), c.value("jsonPath", ""), c.value("priority", 0)});
      }
    }
  }
  if (!printer_columns) {
    columns.push_back(
        {"Age", "date", "", "CreationTimestamp is when the object was created.", ".metadata.creationTimestamp", 0});
  }
  json definitions = json::array();
  for (const Column& c : columns) {
    definitions.push_back({{"name", c.name},
                           {"type", c.type},
                           {"format", c.format},
                           {"description", c.description},
                           {"priority", c.priority}});
  }
  json rows = json::array();
  for (const json& object : objects) {
    json cells = json::array();
    for (const Column& c : columns) {
      if (c.path.empty()) {
        cells.push_back(object["metadata"].value("name", ""));
        continue;
      }
      json value = Lookup(object, c.path);
      if (c.type == "date" && value.is_string()) value = HumanAge(value.get<std::string>());
      cells.push_back(value);
    }
    json partial{{"kind", "PartialObjectMetadata"},
                 {"apiVersion", "meta.k8s.io/v1"},
                 {"metadata", object.value("metadata", json::object())}};
    rows.push_back({{"cells", cells}, {"object", partial}});
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", {{"resourceVersion", resource_version}}},
          {"columnDefinitions", definitions},
          {"rows", rows}};
}

}  // namespace headroom::testserver
