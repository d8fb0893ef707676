// JSON objects (how headroom builds Kubernetes manifests) written as YAML (how people
// read them and what `kubectl apply -f` takes).
//
// Contract: parsing the output as YAML gives back the same JSON value, types included:
// strings that would read as another type ("2", "true", "null", "") are quoted;
// multi-line strings become literal blocks.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace headroom::manifests {

std::string JsonToYaml(const nlohmann::json& value);
// Several documents, each introduced by `---`.
std::string JsonToYamlDocuments(const std::vector<nlohmann::json>& documents);

}  // namespace headroom::manifests
