// ToYaml / ToJson: the full object, defaults included, camelCase names, in the order
// docs/design.md lists the fields (spec: the order of its field table, training_job_fields.h). The YAML is typed so that ParseTrainingJob reads back an
// equal job: strings that would read as numbers, booleans or null are quoted, and
// numbers are written in their shortest round-trip form.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/spec/document_tree.h"
#include "core/spec/training_job.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json MetadataJson(const ObjectMeta& m) {
  ordered_json j = ordered_json::object();
  j["name"] = m.name;
  if (!m.namespace_.empty()) j["namespace"] = m.namespace_;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (!m.resource_version.empty()) j["resourceVersion"] = m.resource_version;
  if (m.generation != 0) j["generation"] = m.generation;
  if (!m.creation_timestamp.empty()) j["creationTimestamp"] = m.creation_timestamp;
  if (!m.deletion_timestamp.empty()) j["deletionTimestamp"] = m.deletion_timestamp;
  return j;
}

// The members `fields` names of `object` (a struct the rows point into), in table order.
ordered_json FieldsJson(const std::vector<FieldDef>& fields, void* object) {
  ordered_json j = ordered_json::object();
  for (const FieldDef& f : fields) {
    void* member = f.member(object);
    if (f.written != nullptr && !f.written(member)) continue;
    switch (f.kind) {
      case FieldKind::kBool: j[f.name] = *static_cast<bool*>(member); break;
      case FieldKind::kInt: j[f.name] = *static_cast<int*>(member); break;
      case FieldKind::kInt64:
      case FieldKind::kByteCount: j[f.name] = *static_cast<int64_t*>(member); break;
      case FieldKind::kUint64: j[f.name] = *static_cast<uint64_t*>(member); break;
      case FieldKind::kOptionalInt64:
        if (const auto& v = *static_cast<std::optional<int64_t>*>(member)) j[f.name] = *v;
        break;
      case FieldKind::kDouble: j[f.name] = *static_cast<double*>(member); break;
      case FieldKind::kString:
      case FieldKind::kQuantity: j[f.name] = *static_cast<std::string*>(member); break;
      case FieldKind::kActions: {
        ordered_json actions = ordered_json::array();
        for (GuardAction a : *static_cast<std::vector<GuardAction>*>(member)) actions.push_back(GuardActionName(a));
        j[f.name] = std::move(actions);
        break;
      }
      case FieldKind::kStrings: j[f.name] = *static_cast<std::vector<std::string>*>(member); break;
      case FieldKind::kPodTemplate: j[f.name] = PodTemplateJson(*static_cast<PodTemplate*>(member)); break;
      case FieldKind::kObject: j[f.name] = FieldsJson(f.fields, member); break;
    }
  }
  return j;
}

ordered_json SpecJson(const TrainingJobSpec& s) {
  // The walk only reads; the rows' accessors take a mutable struct.
  return FieldsJson(SpecFields(), const_cast<TrainingJobSpec*>(&s));
}

ordered_json JobJson(const TrainingJob& job) {
  ordered_json j;
  j["apiVersion"] = job.api_version;
  j["kind"] = job.kind;
  j["metadata"] = MetadataJson(job.metadata);
  j["spec"] = SpecJson(job.spec);
  return j;
}

std::string ShortestDouble(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  // Shortest round-trip digits; plain decimals ("0.0003") unless exponents are much shorter.
  char fixed[400];
  char shortest[64];
  auto fixed_end = std::to_chars(fixed, fixed + sizeof(fixed), v, std::chars_format::fixed).ptr;
  auto shortest_end = std::to_chars(shortest, shortest + sizeof(shortest), v).ptr;
  std::string s = (fixed_end - fixed) <= (shortest_end - shortest) + 3 ? std::string(fixed, fixed_end)
                                                                       : std::string(shortest, shortest_end);
  // "1e-05" is a YAML 1.2 float already; make integral values read as floats too.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A string that a YAML reader would type as something else must be quoted.
bool NeedsQuotes(const std::string& s) {
  DocumentLoad probe = LoadYamlDocument("x: " + s);
  if (!probe.usable || probe.root.kind != DocumentNode::Kind::kMap) return true;
  const DocumentNode* value = probe.root.Find("x");
  return value == nullptr || value->kind != DocumentNode::Kind::kString || value->text != s;
}

void EmitYaml(YAML::Emitter& out, const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key << key << YAML::Value;
        EmitYaml(out, value);
      }
      out << YAML::EndMap;
      break;
    case ordered_json::value_t::array:
      // Lists of scalars on one line; lists of maps (a template's env, volumes) as blocks.
      if (std::none_of(j.begin(), j.end(), [](const ordered_json& item) { return item.is_structured(); })) {
        out << YAML::Flow;
      }
      out << YAML::BeginSeq;
      for (const auto& item : j) EmitYaml(out, item);
      out << YAML::EndSeq;
      break;
    case ordered_json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (s.empty() || NeedsQuotes(s)) {
        out << YAML::DoubleQuoted << s;
      } else {
        out << s;
      }
      break;
    }
    case ordered_json::value_t::boolean: out << (j.get<bool>() ? "true" : "false"); break;
    case ordered_json::value_t::number_integer: out << j.get<int64_t>(); break;
    case ordered_json::value_t::number_unsigned: out << j.get<uint64_t>(); break;
    case ordered_json::value_t::number_float: out << ShortestDouble(j.get<double>()); break;
    default: out << YAML::Null; break;
  }
}

}  // namespace

// A job built in code may hold bytes that are not UTF-8 (the parser refuses them): they
// become U+FFFD rather than an exception in the middle of a reconcile.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

nlohmann::json ToJsonValue(const TrainingJob& job) {
  return nlohmann::json::parse(JobJson(job).dump(-1, ' ', false, kReplaceInvalidUtf8));
}

std::string ToJson(const TrainingJob& job, int indent) {
  return JobJson(job).dump(indent, ' ', false, kReplaceInvalidUtf8) + "\n";
}

std::string ToYaml(const TrainingJob& job) {
  YAML::Emitter out;
  EmitYaml(out, JobJson(job));
  return std::string(out.c_str()) + "\n";
}

}  // namespace headroom::spec
