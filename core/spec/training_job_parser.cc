// ParseTrainingJob*: document -> typed TrainingJob (types, unknown fields), then
// ApplyDefaults and Validate, every problem collected with its path and line. spec is read
// by walking its field table (training_job_fields.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/spec/closest_name.h"
#include "core/spec/document_tree.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

using Kind = DocumentNode::Kind;

// Collects errors and remembers where each decoded path was written, so that errors
// found later by Validate() (which sees only the typed job) can point at a line.
class Decoder {
 public:
  std::vector<SpecError> errors;
  std::map<std::string, std::pair<int, int>> locations;

  void Error(const std::string& path, const DocumentNode* at, std::string message) {
    errors.push_back({path, std::move(message), at ? at->line : 0, at ? at->column : 0});
  }
  void Locate(const std::string& path, const DocumentNode& node) {
    if (node.line > 0) locations[path] = {node.line, node.column};
  }

  void TypeError(const std::string& path, const DocumentNode& n, const std::string& expected) {
    std::string message = "expected " + expected + ", got " + DescribeNode(n);
    Error(path, &n, std::move(message));
  }

  void Int64(const DocumentNode& n, const std::string& path, int64_t& out) {
    if (n.kind == Kind::kInt && n.int_fits) {
      out = n.int_value;
    } else if (n.kind == Kind::kInt) {
      Error(path, &n, "integer " + n.text + " is out of range");
    } else if (n.kind == Kind::kFloat && std::isfinite(n.float_value) && n.float_value == std::floor(n.float_value) &&
               std::fabs(n.float_value) < 9.0e18) {
      out = static_cast<int64_t>(n.float_value);  // 2.0 is an integer, as in JSON
    } else {
      TypeError(path, n, "integer");
    }
  }

  void Int(const DocumentNode& n, const std::string& path, int& out) {
    int64_t wide = out;
    const size_t before = errors.size();
    Int64(n, path, wide);
    if (errors.size() != before) return;
    if (wide > std::numeric_limits<int>::max()) {
      Error(path, &n, "must be <= " + std::to_string(std::numeric_limits<int>::max()) + ", got " + n.text);
    } else if (wide < std::numeric_limits<int>::min()) {
      Error(path, &n, "must be >= " + std::to_string(std::numeric_limits<int>::min()) + ", got " + n.text);
    } else {
      out = static_cast<int>(wide);
    }
  }

  void Uint64(const DocumentNode& n, const std::string& path, uint64_t& out) {
    int64_t wide = 0;
    const size_t before = errors.size();
    Int64(n, path, wide);
    if (errors.size() != before) return;
    if (wide < 0) {
      Error(path, &n, "must be >= 0, got " + n.text);
    } else {
      out = static_cast<uint64_t>(wide);
    }
  }

  void Double(const DocumentNode& n, const std::string& path, double& out) {
    if (n.kind != Kind::kInt && n.kind != Kind::kFloat) {
      TypeError(path, n, "number");
    } else if (!std::isfinite(n.float_value)) {
      Error(path, &n, "must be a finite number, got " + n.text);
    } else {
      out = n.float_value;
    }
  }

  void Bool(const DocumentNode& n, const std::string& path, bool& out) {
    if (n.kind == Kind::kBool) {
      out = n.bool_value;
    } else {
      TypeError(path, n, "boolean (true or false)");
    }
  }

  void String(const DocumentNode& n, const std::string& path, std::string& out) {
    if (n.kind == Kind::kString) {
      out = n.text;
    } else if (n.kind == Kind::kInt || n.kind == Kind::kFloat || n.kind == Kind::kBool) {
      Error(path, &n, "expected string, got " + DescribeNode(n) + " (quote it: \"" + n.text + "\")");
    } else {
      TypeError(path, n, "string");
    }
  }

  // Quantities are int-or-string in Kubernetes: keep the text as written.
  void QuantityText(const DocumentNode& n, const std::string& path, std::string& out) {
    if (n.kind == Kind::kString || n.kind == Kind::kInt || n.kind == Kind::kFloat) {
      out = n.text;
    } else {
      TypeError(path, n, "quantity (a string like \"4Gi\" or a number)");
    }
  }

  // Byte counts: an integer, or a quantity string ("48Mi").
  void ByteCount(const DocumentNode& n, const std::string& path, int64_t& out) {
    if (n.kind == Kind::kInt) {
      Int64(n, path, out);
    } else if (n.kind == Kind::kString || n.kind == Kind::kFloat) {
      std::string why;
      std::optional<int64_t> bytes = ParseQuantityBytes(n.text, &why);
      if (bytes) {
        out = *bytes;
      } else {
        Error(path, &n, "invalid byte count: " + why);
      }
    } else {
      TypeError(path, n, "byte count (an integer or a quantity like \"48Mi\")");
    }
  }
};

// Reads one map's fields by name; Finish() reports every member nobody asked for.
class MapReader {
 public:
  MapReader(Decoder& d, const DocumentNode& node, std::string path) : d_(d), node_(node), path_(std::move(path)) {
    ok_ = node.kind == Kind::kMap;
    if (!ok_) d_.TypeError(path_, node, "map");
    d_.Locate(path_, node);
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  std::string Child(const std::string& name) const { return ChildPath(path_, name); }

  // The member `name` when present and not null; registers `name` as known.
  const DocumentNode* Field(const std::string& name) {
    known_.push_back(name);
    if (!ok_) return nullptr;
    const DocumentNode* n = node_.Find(name);
    if (n == nullptr) return nullptr;
    d_.Locate(Child(name), *n);
    return n->is_null() ? nullptr : n;
  }
  void Ignore(const std::string& name) { ignored_.insert(name); }
  const DocumentNode& node() const { return node_; }
  Decoder& decoder() const { return d_; }

  // The member `name` as a map, read by `decode(reader, out)` and then checked
  // for unknown fields; false when it is absent or null.
  template <typename T, typename Decode>
  bool Map(const std::string& name, T& out, Decode&& decode) {
    const DocumentNode* n = Field(name);
    if (n == nullptr) return false;
    MapReader member(d_, *n, Child(name));
    decode(member, out);
    member.Finish();
    return true;
  }
  // The member `name` of any kind (a list), read by `decode(decoder, node, path, out)`.
  template <typename T, typename Decode>
  void Other(const std::string& name, T& out, Decode&& decode) {
    if (const DocumentNode* n = Field(name)) decode(d_, *n, Child(name), out);
  }

  void Int(const std::string& name, int& out) {
    if (const DocumentNode* n = Field(name)) d_.Int(*n, Child(name), out);
  }
  void Int64(const std::string& name, int64_t& out) {
    if (const DocumentNode* n = Field(name)) d_.Int64(*n, Child(name), out);
  }
  void OptionalInt64(const std::string& name, std::optional<int64_t>& out) {
    const DocumentNode* n = Field(name);
    if (n == nullptr) return;
    int64_t v = 0;
    d_.Int64(*n, Child(name), v);
    out = v;
  }
  void Uint64(const std::string& name, uint64_t& out) {
    if (const DocumentNode* n = Field(name)) d_.Uint64(*n, Child(name), out);
  }
  void Double(const std::string& name, double& out) {
    if (const DocumentNode* n = Field(name)) d_.Double(*n, Child(name), out);
  }
  void Bool(const std::string& name, bool& out) {
    if (const DocumentNode* n = Field(name)) d_.Bool(*n, Child(name), out);
  }
  void String(const std::string& name, std::string& out) {
    if (const DocumentNode* n = Field(name)) d_.String(*n, Child(name), out);
  }
  void QuantityText(const std::string& name, std::string& out) {
    if (const DocumentNode* n = Field(name)) d_.QuantityText(*n, Child(name), out);
  }
  void ByteCount(const std::string& name, int64_t& out) {
    if (const DocumentNode* n = Field(name)) d_.ByteCount(*n, Child(name), out);
  }
  void StringMap(const std::string& name, std::map<std::string, std::string>& out) {
    const DocumentNode* n = Field(name);
    if (n == nullptr) return;
    if (n->kind != Kind::kMap) {
      d_.TypeError(Child(name), *n, "map of strings");
      return;
    }
    for (const DocumentMember& m : n->members) {
      const std::string path = Child(name) + "[" + m.key + "]";
      d_.Locate(path, m.value);
      std::string text;
      d_.String(m.value, path, text);
      out[m.key] = text;
    }
  }

  void Finish() {
    if (!ok_) return;
    for (const DocumentMember& m : node_.members) {
      if (ignored_.count(m.key) != 0) continue;
      if (std::find(known_.begin(), known_.end(), m.key) != known_.end()) continue;
      d_.Error(Child(m.key), &m.value, "unknown field" + DidYouMean(m.key, known_));
    }
  }

 private:
  Decoder& d_;
  const DocumentNode& node_;
  std::string path_;
  bool ok_ = false;
  std::vector<std::string> known_;
  std::set<std::string> ignored_;
};

void DecodeMetadata(MapReader& r, ObjectMeta& m) {
  r.String("name", m.name);
  r.String("namespace", m.namespace_);
  r.StringMap("labels", m.labels);
  r.StringMap("annotations", m.annotations);
  r.String("uid", m.uid);
  r.String("resourceVersion", m.resource_version);
  r.Int64("generation", m.generation);
  r.String("creationTimestamp", m.creation_timestamp);
  r.String("deletionTimestamp", m.deletion_timestamp);
  // Server-managed fields the operator receives and has no use for here.
  for (const char* tolerated :
       {"managedFields", "ownerReferences", "finalizers", "generateName", "selfLink", "deletionGracePeriodSeconds"}) {
    r.Ignore(tolerated);
  }
}

void DecodeActions(Decoder& d, const DocumentNode& node, const std::string& path, std::vector<GuardAction>& out) {
  if (node.kind != Kind::kList) {
    d.TypeError(path, node, "list of actions");
    return;
  }
  out.clear();
  std::vector<size_t> first_index;  // document index of each action in `out`
  for (size_t i = 0; i < node.items.size(); ++i) {
    const DocumentNode& item = node.items[i];
    const std::string item_path = IndexPath(path, i);
    d.Locate(item_path, item);
    std::string name;
    const size_t before = d.errors.size();
    d.String(item, item_path, name);
    if (d.errors.size() != before) continue;
    std::optional<GuardAction> action = GuardActionFromName(name);
    if (!action) {
      std::string expected;
      for (const std::string& n : GuardActionNames()) expected += (expected.empty() ? "" : ", ") + n;
      d.Error(
          item_path, &item,
          "unknown action \"" + name + "\"" + DidYouMean(name, GuardActionNames()) + "; expected one of " + expected);
      continue;
    }
    // Named here, by the index in the document, since items dropped above would shift
    // the indices Validate sees.
    const auto seen = std::find(out.begin(), out.end(), *action);
    if (seen != out.end()) {
      d.Error(
          item_path, &item,
          "duplicate action \"" + name + "\" (already at [" + std::to_string(first_index[seen - out.begin()]) + "])");
      continue;
    }
    out.push_back(*action);
    first_index.push_back(i);
  }
}

// A list of strings; which names are allowed, and repeats, are the validator's (by index).
void DecodeStrings(Decoder& d, const DocumentNode& node, const std::string& path, std::vector<std::string>& out) {
  if (node.kind != Kind::kList) {
    d.TypeError(path, node, "list of strings");
    return;
  }
  out.clear();
  for (size_t i = 0; i < node.items.size(); ++i) {
    const std::string item_path = IndexPath(path, i);
    d.Locate(item_path, node.items[i]);
    std::string item;
    d.String(node.items[i], item_path, item);
    out.push_back(std::move(item));
  }
}

// --- spec.template ----------------------------------------------------------------
// Kubernetes sub-objects are kept as JSON trees (core/spec/pod_template.h), each node
// located so that CheckPodTemplate's errors point at their line.
nlohmann::json Tree(Decoder& d, const DocumentNode& n, const std::string& path) {
  d.Locate(path, n);
  switch (n.kind) {
    case Kind::kNull: return nullptr;
    case Kind::kBool: return n.bool_value;
    case Kind::kInt: return n.int_fits ? nlohmann::json(n.int_value) : nlohmann::json(n.float_value);
    case Kind::kFloat: return n.float_value;
    case Kind::kString: return n.text;
    case Kind::kMap: {
      nlohmann::json out = nlohmann::json::object();
      for (const DocumentMember& m : n.members) out[m.key] = Tree(d, m.value, ChildPath(path, m.key));
      return out;
    }
    case Kind::kList: {
      nlohmann::json out = nlohmann::json::array();
      for (size_t i = 0; i < n.items.size(); ++i) out.push_back(Tree(d, n.items[i], IndexPath(path, i)));
      return out;
    }
  }
  return nullptr;
}

// The member `name` of `r` as a tree of the kind `expected` (kMap or kList).
void TreeField(MapReader& r, const std::string& name, Kind expected, nlohmann::json& out) {
  Decoder& d = r.decoder();
  const DocumentNode* n = r.Field(name);
  if (n == nullptr) return;
  if (n->kind != expected) {
    d.TypeError(r.Child(name), *n, expected == Kind::kMap ? "map" : "list");
    return;
  }
  out = Tree(d, *n, r.Child(name));
}

// Fields of a pod or container the operator sets: named, not unknown.
void RefuseOwned(MapReader& r, const std::vector<std::string>& owned) {
  for (const std::string& field : owned) {
    r.Ignore(field);
    if (const DocumentNode* n = r.node().Find(field)) r.decoder().Error(r.Child(field), n, "is set by the operator");
  }
}

void DecodeQuantityMap(MapReader& r, const std::string& name, std::map<std::string, std::string>& out) {
  Decoder& d = r.decoder();
  const DocumentNode* n = r.Field(name);
  if (n == nullptr) return;
  if (n->kind != Kind::kMap) {
    d.TypeError(r.Child(name), *n, "map of quantities");
    return;
  }
  for (const DocumentMember& m : n->members) {
    const std::string path = r.Child(name) + "[" + m.key + "]";
    d.Locate(path, m.value);
    d.QuantityText(m.value, path, out[m.key]);
  }
}

void DecodeWorkerContainer(MapReader& r, WorkerContainerTemplate& w) {
  std::string name = kWorkerContainerName;
  r.String("name", name);
  if (name != kWorkerContainerName) {
    r.decoder().Error(r.Child("name"), r.node().Find("name"),
                      std::string("must be \"") + kWorkerContainerName +
                          "\": the template adds to the worker container only, got \"" + name + "\"");
  }
  TreeField(r, "env", Kind::kList, w.env);
  TreeField(r, "envFrom", Kind::kList, w.env_from);
  TreeField(r, "volumeMounts", Kind::kList, w.volume_mounts);
  r.Map("resources", w, [](MapReader& resources, WorkerContainerTemplate& container) {
    DecodeQuantityMap(resources, "limits", container.limits);
    DecodeQuantityMap(resources, "requests", container.requests);
  });
  TreeField(r, "securityContext", Kind::kMap, w.security_context);
  RefuseOwned(r, {"command", "args", "image", "imagePullPolicy", "ports", "workingDir", "readinessProbe",
                  "livenessProbe", "startupProbe", "terminationMessagePath", "terminationMessagePolicy"});
}

void DecodeContainers(Decoder& d, const DocumentNode& node, const std::string& path, WorkerContainerTemplate& w) {
  if (node.kind != Kind::kList) {
    d.TypeError(path, node, "list of one container (the worker)");
    return;
  }
  d.Locate(path, node);
  for (size_t i = 0; i < node.items.size(); ++i) {
    if (i == 0) {
      MapReader r(d, node.items[0], IndexPath(path, 0));
      DecodeWorkerContainer(r, w);
      r.Finish();
    } else {
      d.Error(IndexPath(path, i), &node.items[i],
              "the template adds to the worker container only; no other containers");
    }
  }
}

void DecodeImagePullSecrets(Decoder& d, const DocumentNode& node, const std::string& path,
                            std::vector<std::string>& out) {
  if (node.kind != Kind::kList) {
    d.TypeError(path, node, "list of {name}");
    return;
  }
  for (size_t i = 0; i < node.items.size(); ++i) {
    MapReader r(d, node.items[i], IndexPath(path, i));
    std::string name;
    r.String("name", name);
    r.Finish();
    out.push_back(name);
  }
}

void DecodePodTemplateSpec(MapReader& r, PodTemplate& t) {
  r.StringMap("nodeSelector", t.node_selector);
  TreeField(r, "affinity", Kind::kMap, t.affinity);
  TreeField(r, "tolerations", Kind::kList, t.tolerations);
  r.String("priorityClassName", t.priority_class_name);
  r.String("schedulerName", t.scheduler_name);
  r.String("runtimeClassName", t.runtime_class_name);
  r.String("serviceAccountName", t.service_account_name);
  r.Other("imagePullSecrets", t.image_pull_secrets, DecodeImagePullSecrets);
  TreeField(r, "volumes", Kind::kList, t.volumes);
  TreeField(r, "securityContext", Kind::kMap, t.security_context);
  r.Other("containers", t.worker, DecodeContainers);
  RefuseOwned(r, {"restartPolicy", "hostname", "subdomain", "terminationGracePeriodSeconds"});
}

void DecodePodTemplate(MapReader& r, PodTemplate& t) {
  r.Map("metadata", t, [](MapReader& metadata, PodTemplate& pod) {
    metadata.StringMap("labels", pod.labels);
    metadata.StringMap("annotations", pod.annotations);
  });
  r.Map("spec", t, DecodePodTemplateSpec);
}

// Reads the members `fields` names from `r` into `object` (a struct the rows point into).
void DecodeFields(MapReader& r, const std::vector<FieldDef>& fields, void* object) {
  for (const FieldDef& f : fields) {
    void* member = f.member(object);
    switch (f.kind) {
      case FieldKind::kBool: r.Bool(f.name, *static_cast<bool*>(member)); break;
      case FieldKind::kInt: r.Int(f.name, *static_cast<int*>(member)); break;
      case FieldKind::kInt64: r.Int64(f.name, *static_cast<int64_t*>(member)); break;
      case FieldKind::kUint64: r.Uint64(f.name, *static_cast<uint64_t*>(member)); break;
      case FieldKind::kOptionalInt64: r.OptionalInt64(f.name, *static_cast<std::optional<int64_t>*>(member)); break;
      case FieldKind::kDouble: r.Double(f.name, *static_cast<double*>(member)); break;
      case FieldKind::kString: r.String(f.name, *static_cast<std::string*>(member)); break;
      case FieldKind::kQuantity: r.QuantityText(f.name, *static_cast<std::string*>(member)); break;
      case FieldKind::kByteCount: r.ByteCount(f.name, *static_cast<int64_t*>(member)); break;
      case FieldKind::kActions: r.Other(f.name, *static_cast<std::vector<GuardAction>*>(member), DecodeActions); break;
      case FieldKind::kStrings: r.Other(f.name, *static_cast<std::vector<std::string>*>(member), DecodeStrings); break;
      case FieldKind::kPodTemplate: r.Map(f.name, *static_cast<PodTemplate*>(member), DecodePodTemplate); break;
      case FieldKind::kObject:
        r.Map(f.name, member, [&f](MapReader& child, void* nested) { DecodeFields(child, f.fields, nested); });
        break;
    }
  }
}

void DecodeSpec(MapReader& r, TrainingJobSpec& s) { DecodeFields(r, SpecFields(), &s); }

// The line of `path`, else of its nearest written ancestor ("spec.model.layers" missing
// from the file points at "spec.model").
std::pair<int, int> LocationOf(const Decoder& d, std::string path) {
  while (!path.empty()) {
    auto it = d.locations.find(path);
    if (it != d.locations.end()) return it->second;
    size_t cut = path.back() == ']' ? path.rfind('[') : path.find_last_of(".[");
    if (cut == std::string::npos) break;
    path.resize(cut);
  }
  return {0, 0};
}

ParseResult DecodeDocument(DocumentLoad load, const ValidateOptions& options = {}) {
  Decoder d;
  d.errors = std::move(load.errors);
  ParseResult result;
  if (!load.usable) {
    result.errors = std::move(d.errors);
    return result;
  }
  const DocumentNode& root = load.root;
  TrainingJob job;
  if (root.kind != Kind::kMap) {
    d.Error("", &root,
            "expected a TrainingJob (a map with apiVersion, kind, metadata, spec), got " + DescribeNode(root));
    result.errors = std::move(d.errors);
    return result;
  }
  MapReader top(d, root, "");
  if (const DocumentNode* n = top.Field("apiVersion")) {
    d.String(*n, "apiVersion", job.api_version);
  } else {
    d.Error("apiVersion", nullptr, std::string("required (") + kApiVersion + ")");
  }
  if (const DocumentNode* n = top.Field("kind")) {
    d.String(*n, "kind", job.kind);
  } else {
    d.Error("kind", nullptr, std::string("required (") + kKind + ")");
  }
  top.Map("metadata", job.metadata, DecodeMetadata);
  if (!top.Map("spec", job.spec, DecodeSpec)) d.Error("spec", nullptr, "required");
  top.Ignore("status");  // the operator reads status on its own
  top.Finish();

  ApplyDefaults(job);
  std::set<std::string> decoded_paths;
  for (const SpecError& e : d.errors) decoded_paths.insert(e.path);
  for (SpecError& e : Validate(job, options)) {
    if (decoded_paths.count(e.path) != 0) continue;  // already reported as a type error
    std::tie(e.line, e.column) = LocationOf(d, e.path);
    e.column = 0;  // the line is the useful part for a field
    d.errors.push_back(std::move(e));
  }
  // Document order: located errors by line, then the rest in the order found.
  std::stable_sort(d.errors.begin(), d.errors.end(), [](const SpecError& a, const SpecError& b) {
    const int la = a.line > 0 ? a.line : std::numeric_limits<int>::max();
    const int lb = b.line > 0 ? b.line : std::numeric_limits<int>::max();
    return la < lb;
  });
  result.errors = std::move(d.errors);
  if (result.errors.empty()) result.job = std::move(job);
  return result;
}

}  // namespace

ParseResult ParseTrainingJob(const std::string& yaml_text, const ValidateOptions& options) {
  return DecodeDocument(LoadYamlDocument(yaml_text), options);
}

ParseResult ParseTrainingJobJson(const nlohmann::json& object) { return DecodeDocument(LoadJsonDocument(object)); }

ParseResult ParseTrainingJobFile(const std::string& path, const ValidateOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    ParseResult result;
    result.errors.push_back({"", "cannot read " + path + ": it is a directory"});
    return result;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ParseResult result;
    result.errors.push_back({"", "cannot read " + path + ": " + std::strerror(errno)});
    return result;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    ParseResult result;
    result.errors.push_back({"", "cannot read " + path + ": " + std::strerror(errno)});
    return result;
  }
  return ParseTrainingJob(text.str(), options);
}

}  // namespace headroom::spec
