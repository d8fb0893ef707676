#include "operator/manifests/json_yaml.h"

#include <yaml-cpp/yaml.h>

#include <regex>

namespace headroom::manifests {
namespace {

// True when a plain (unquoted) scalar with this text would be read back as something
// other than a string by a YAML 1.1/1.2 reader (kubectl uses YAML 1.1 rules).
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex kNonString(
      R"(^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N)$)");
  return std::regex_match(s, kNonString);
}

void Emit(YAML::Emitter& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = v.begin(); it != v.end(); ++it) {
        out << YAML::Key;
        if (NeedsQuotes(it.key())) out << YAML::DoubleQuoted;
        out << it.key() << YAML::Value;
        Emit(out, it.value());
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& e : v) Emit(out, e);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos) {
        out << YAML::Literal << s;
      } else {
        if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
        out << s;
      }
      break;
    }
    case nlohmann::json::value_t::boolean: out << v.get<bool>(); break;
    case nlohmann::json::value_t::number_integer: out << v.get<int64_t>(); break;
    case nlohmann::json::value_t::number_unsigned: out << v.get<uint64_t>(); break;
    case nlohmann::json::value_t::number_float:
      out << v.dump();  // nlohmann prints the shortest round-tripping form
      break;
    default: out << YAML::Null;
  }
}

}  // namespace

std::string JsonToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string JsonToYamlDocuments(const std::vector<nlohmann::json>& documents) {
  std::string text;
  for (const auto& d : documents) text += "---\n" + JsonToYaml(d);
  return text;
}

}  // namespace headroom::manifests
