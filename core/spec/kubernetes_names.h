// Kubernetes name rules (k8s.io/apimachinery/pkg/util/validation), for metadata and for
// the names the operator derives from a job (pods, the headless Service, PVCs).
// Each check returns "" when `value` is valid, else a message saying what is wrong.
#pragma once

#include <string>

namespace headroom::spec {

inline constexpr size_t kDns1123LabelMaxLength = 63;
inline constexpr size_t kDns1123SubdomainMaxLength = 253;

// At most 63 characters of [a-z0-9-], starting and ending with [a-z0-9].
std::string CheckDns1123Label(const std::string& value);
// At most 63 characters of [a-z0-9-], starting with [a-z], ending with [a-z0-9]
// (Service names).
std::string CheckDns1035Label(const std::string& value);
// At most 253 characters; dot-separated DNS-1123 labels (PVC and ConfigMap names).
std::string CheckDns1123Subdomain(const std::string& value);
// A label or annotation key: [prefix/]name, prefix a DNS-1123 subdomain, name at most 63
// characters of [A-Za-z0-9-_.] starting and ending alphanumeric.
std::string CheckQualifiedName(const std::string& value);
// A label value: empty, or at most 63 characters of [A-Za-z0-9-_.] starting and ending
// alphanumeric.
std::string CheckLabelValue(const std::string& value);

}  // namespace headroom::spec
