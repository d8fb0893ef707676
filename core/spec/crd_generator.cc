// TrainingJobCrdYaml: the overlay's skeleton, with spec's schema built from the field
// table, written as block YAML. Every string that a YAML reader (the spec loader's YAML
// 1.2, or kubectl's YAML 1.1) could type as something else is quoted.
#include "core/spec/crd_generator.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/spec/crd_overlay.h"
#include "core/spec/document_tree.h"
#include "core/spec/model_presets.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

using ordered_json = nlohmann::ordered_json;
using Kind = DocumentNode::Kind;

ordered_json ToJson(const DocumentNode& n) {
  switch (n.kind) {
    case Kind::kNull: return nullptr;
    case Kind::kBool: return n.bool_value;
    case Kind::kInt: return n.int_value;
    case Kind::kFloat: return n.float_value;
    case Kind::kString: return n.text;
    case Kind::kMap: {
      ordered_json out = ordered_json::object();
      for (const DocumentMember& m : n.members) out[m.key] = ToJson(m.value);
      return out;
    }
    case Kind::kList: {
      ordered_json out = ordered_json::array();
      for (const DocumentNode& item : n.items) out.push_back(ToJson(item));
      return out;
    }
  }
  return nullptr;
}

// The overlay is part of the program: a YAML mistake in it is a bug, not input.
ordered_json LoadOverlay(const std::string& yaml, const std::string& what) {
  DocumentLoad load = LoadYamlDocument(yaml);
  if (!load.usable || !load.errors.empty()) {
    throw std::logic_error("crd_overlay.cc: " + what + ": " +
                           (load.errors.empty() ? "unusable" : load.errors.front().ToString()));
  }
  return ToJson(load.root);
}

// A bound as the schema writes it: 0, not 0.0.
ordered_json Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<int64_t>(v);
  return v;
}

ordered_json Names(const FieldDef& f) {
  ordered_json names = ordered_json::array();
  for (const std::string& n : f.names()) names.push_back(n);
  return names;
}

// The default the struct initialiser gives `f`, as the schema writes it.
ordered_json DefaultOf(const FieldDef& f, void* member) {
  switch (f.kind) {
    case FieldKind::kBool: return *static_cast<bool*>(member);
    case FieldKind::kInt: return *static_cast<int*>(member);
    case FieldKind::kInt64:
    case FieldKind::kByteCount: return *static_cast<int64_t*>(member);
    case FieldKind::kUint64: return *static_cast<uint64_t*>(member);
    case FieldKind::kOptionalInt64: {
      const auto& v = *static_cast<std::optional<int64_t>*>(member);
      return v ? ordered_json(*v) : ordered_json(nullptr);
    }
    case FieldKind::kDouble: return *static_cast<double*>(member);
    case FieldKind::kString:
    case FieldKind::kQuantity: return *static_cast<std::string*>(member);
    case FieldKind::kActions: {
      ordered_json names = ordered_json::array();
      for (GuardAction a : *static_cast<std::vector<GuardAction>*>(member)) names.push_back(GuardActionName(a));
      return names;
    }
    case FieldKind::kStrings: return *static_cast<std::vector<std::string>*>(member);
    case FieldKind::kObject:  // the API server fills its members' defaults in turn
    case FieldKind::kPodTemplate: return ordered_json::object();
  }
  return nullptr;
}

// The overlay's $(presetHidden) and $(presetHeads): each preset's dim as a CEL chain,
// "self.preset == 'tiny' ? 64 : self.preset == 'small' ? 512 : ...", so the CRD resolves
// dims as ApplyDefaults does without a second copy of the presets.
std::string WithPresets(std::string yaml) {
  const std::pair<std::string, int ModelPreset::*> dims[] = {{"$(presetHidden)", &ModelPreset::hidden},
                                                             {"$(presetHeads)", &ModelPreset::heads}};
  for (const auto& [token, dim] : dims) {
    std::string chain;
    for (const std::string& name : ModelPresetNames()) {
      const ModelPreset preset = *FindModelPreset(name);
      chain += (chain.empty() ? "" : " : ") + ("self.preset == '" + name + "' ? ") + std::to_string(preset.*dim);
    }
    for (size_t at = yaml.find(token); at != std::string::npos; at = yaml.find(token, at + chain.size())) {
      yaml.replace(at, token.size(), chain);
    }
  }
  return yaml;
}

ordered_json Properties(const std::vector<FieldDef>& fields, void* defaults, const std::string& parent);

// One row's schema; `defaults` is the default-constructed struct the row points into.
ordered_json FieldSchema(const FieldDef& f, void* defaults, const std::string& path) {
  ordered_json s = ordered_json::object();
  switch (f.kind) {
    case FieldKind::kBool: s["type"] = "boolean"; break;
    case FieldKind::kInt: s["type"] = "integer", s["format"] = "int32"; break;
    case FieldKind::kInt64:
    case FieldKind::kUint64:
    case FieldKind::kOptionalInt64: s["type"] = "integer", s["format"] = "int64"; break;
    case FieldKind::kDouble: s["type"] = "number"; break;
    case FieldKind::kString: s["type"] = "string"; break;
    case FieldKind::kQuantity:
    case FieldKind::kByteCount: s["x-kubernetes-int-or-string"] = true; break;
    case FieldKind::kActions:
      s["type"] = "array";
      s["x-kubernetes-list-type"] = "set";  // each action at most once
      s["maxItems"] = f.names().size();
      break;
    case FieldKind::kStrings:
      s["type"] = "array";
      s["x-kubernetes-list-type"] = "set";  // each name at most once
      if (f.names != nullptr) s["maxItems"] = f.names().size();
      break;
    case FieldKind::kObject:
    case FieldKind::kPodTemplate: s["type"] = "object"; break;
  }
  if (f.kind == FieldKind::kString && f.names != nullptr) s["enum"] = Names(f);
  if (f.min_length) s["minLength"] = *f.min_length;
  if (f.max_length) s["maxLength"] = *f.max_length;
  if (!f.pattern.empty()) s["pattern"] = f.pattern;
  if (f.minimum) {
    s["minimum"] = Number(*f.minimum);
    if (f.exclusive_minimum) s["exclusiveMinimum"] = true;
  }
  if (f.maximum) {
    s["maximum"] = Number(*f.maximum);
    if (f.exclusive_maximum) s["exclusiveMaximum"] = true;
  }
  if (!f.required.empty()) s["required"] = f.required;
  void* member = f.member(defaults);
  if (f.crd_default) s["default"] = DefaultOf(f, member);
  s["description"] = f.doc;
  if (const char* rules = CelRulesYaml(path)) s["x-kubernetes-validations"] = LoadOverlay(WithPresets(rules), path);
  if (f.kind == FieldKind::kActions) {
    s["items"] = {{"type", "string"}, {"enum", Names(f)}, {"description", f.items_doc}};
  }
  if (f.kind == FieldKind::kStrings) {
    s["items"] = {{"type", "string"}};
    if (f.names != nullptr) s["items"]["enum"] = Names(f);
    if (!f.items_doc.empty()) s["items"]["description"] = f.items_doc;
  }
  if (f.kind == FieldKind::kObject) s["properties"] = Properties(f.fields, member, path);
  if (f.kind == FieldKind::kPodTemplate) s["properties"] = LoadOverlay(PodTemplateSchemaYaml(), path);
  return s;
}

ordered_json Properties(const std::vector<FieldDef>& fields, void* defaults, const std::string& parent) {
  ordered_json props = ordered_json::object();
  for (const FieldDef& f : fields) props[f.name] = FieldSchema(f, defaults, parent + "." + f.name);
  return props;
}

// --- YAML ------------------------------------------------------------------------------

bool IsScalar(const ordered_json& v) { return !v.is_structured(); }

// Words YAML 1.1 (kubectl's reader) types as booleans.
bool IsYaml11Bool(const std::string& s) {
  for (const char* w :
       {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}) {
    if (s == w) return true;
  }
  return false;
}

bool PlainIsSafe(const std::string& s, bool in_flow) {
  if (s.empty() || IsYaml11Bool(s)) return false;
  if (std::string("-?:,[]{}#&*!|>'\"%@` +0123456789").find(s.front()) != std::string::npos) return false;
  if (s.back() == ' ' || s.back() == ':') return false;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return false;
  if (in_flow && s.find_first_of(",[]{}") != std::string::npos) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  DocumentLoad probe = LoadYamlDocument("x: " + s);
  if (!probe.usable || probe.root.kind != Kind::kMap) return false;
  const DocumentNode* value = probe.root.Find("x");
  return value != nullptr && value->kind == Kind::kString && value->text == s;
}

std::string Quoted(const std::string& s) {
  bool plain_text = true;  // no control characters: single quotes need no escapes
  for (unsigned char c : s) plain_text = plain_text && c >= 0x20 && c != 0x7f;
  if (plain_text && (s.find('\'') == std::string::npos || s.find_first_of("\"\\") != std::string::npos)) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Scalar(const ordered_json& v, bool in_flow) {
  switch (v.type()) {
    case ordered_json::value_t::null: return "null";
    case ordered_json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case ordered_json::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case ordered_json::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case ordered_json::value_t::number_float: {
      // Plain decimals ("0.0003"): YAML 1.1 readers want a point in a float.
      char buf[400];
      const double d = v.get<double>();
      std::string s(buf, std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed).ptr);
      if (s.find('.') == std::string::npos) s += ".0";  // a number, not an integer
      return s;
    }
    case ordered_json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      return PlainIsSafe(s, in_flow) ? s : Quoted(s);
    }
    default: break;
  }
  return v.empty() ? (v.is_array() ? "[]" : "{}") : "?";
}

void EmitMap(std::string& out, const ordered_json& map, int indent);

// `key: value` (or `key:` and a nested block) at `indent`.
void EmitMember(std::string& out, const std::string& key, const ordered_json& v, int indent) {
  out += std::string(indent, ' ') + Scalar(key, false) + ":";
  if (IsScalar(v) || v.empty()) {
    out += " " + Scalar(v, false) + "\n";
  } else if (v.is_object()) {
    out += "\n";
    EmitMap(out, v, indent + 2);
  } else if (std::all_of(v.begin(), v.end(), IsScalar)) {
    std::string items;
    for (const ordered_json& item : v) items += (items.empty() ? "" : ", ") + Scalar(item, true);
    out += " [" + items + "]\n";
  } else {
    out += "\n";
    for (const ordered_json& item : v) {
      if (!item.is_object() || item.empty()) throw std::logic_error("crd: a list item that is not a map");
      std::string block;
      EmitMap(block, item, indent + 4);
      out += std::string(indent + 2, ' ') + "- " + block.substr(indent + 4);
    }
  }
}

void EmitMap(std::string& out, const ordered_json& map, int indent) {
  for (const auto& [key, value] : map.items()) EmitMember(out, key, value, indent);
}

}  // namespace

std::string TrainingJobCrdYaml() {
  ordered_json crd = LoadOverlay(CrdSkeletonYaml(), "skeleton");
  ordered_json& versions = crd["spec"]["versions"];
  for (ordered_json& version : versions) {
    ordered_json& spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    // Rules before properties, as a person would write them.
    ordered_json filled = ordered_json::object();
    for (const auto& [key, value] : spec.items()) {
      if (key == "properties") {
        if (const char* rules = CelRulesYaml("spec")) filled["x-kubernetes-validations"] = LoadOverlay(rules, "spec");
        TrainingJobSpec defaults;
        filled["properties"] = Properties(SpecFields(), &defaults, "spec");
      } else {
        filled[key] = value;
      }
    }
    spec = std::move(filled);
  }
  std::string out = CrdHeaderComment();
  EmitMap(out, crd, 0);
  return out;
}

}  // namespace headroom::spec
