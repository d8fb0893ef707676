#include "core/spec/kubernetes_names.h"

#include <algorithm>

namespace headroom::spec {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

std::string TooLong(size_t max, size_t got) {
  return "must be no more than " + std::to_string(max) + " characters, got " + std::to_string(got);
}

// Shared by labels and subdomain parts: [a-z0-9]([-a-z0-9]*[a-z0-9])?, without length.
bool MatchesLabelCharacters(const std::string& v) {
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
bool MatchesQualifiedNamePart(const std::string& v) {
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

std::string CheckDns1123Label(const std::string& value) {
  if (value.size() > kDns1123LabelMaxLength) return TooLong(kDns1123LabelMaxLength, value.size());
  if (!MatchesLabelCharacters(value)) {
    return "must be a DNS-1123 label: lower case letters, digits and '-', starting and "
           "ending with a letter or digit (like \"my-job\"), got \"" +
           value + "\"";
  }
  return "";
}

std::string CheckDns1035Label(const std::string& value) {
  std::string label = CheckDns1123Label(value);
  if (!label.empty()) return label;
  if (!(value.front() >= 'a' && value.front() <= 'z')) {
    return "must start with a letter (a DNS-1035 label), got \"" + value + "\"";
  }
  return "";
}

std::string CheckDns1123Subdomain(const std::string& value) {
  if (value.size() > kDns1123SubdomainMaxLength) {
    return TooLong(kDns1123SubdomainMaxLength, value.size());
  }
  size_t start = 0;
  while (true) {
    const size_t dot = value.find('.', start);
    const std::string part = value.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!MatchesLabelCharacters(part)) {
      return "must be a DNS-1123 subdomain: lower case letters, digits, '-' and '.', each "
             "part starting and ending with a letter or digit, got \"" +
             value + "\"";
    }
    if (dot == std::string::npos) return "";
    start = dot + 1;
  }
}

std::string CheckQualifiedName(const std::string& value) {
  std::string name = value;
  const size_t slash = value.find('/');
  if (slash != std::string::npos) {
    const std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) return "key prefix must not be empty, got \"" + value + "\"";
    std::string bad_prefix = CheckDns1123Subdomain(prefix);
    if (!bad_prefix.empty()) return "key prefix " + bad_prefix;
  }
  if (name.size() > kDns1123LabelMaxLength) {
    return "key name " + TooLong(kDns1123LabelMaxLength, name.size());
  }
  if (!MatchesQualifiedNamePart(name)) {
    return "key must be [prefix/]name with name of letters, digits, '-', '_' and '.', "
           "starting and ending with a letter or digit, got \"" +
           value + "\"";
  }
  return "";
}

std::string CheckLabelValue(const std::string& value) {
  if (value.empty()) return "";
  if (value.size() > kDns1123LabelMaxLength) return TooLong(kDns1123LabelMaxLength, value.size());
  if (!MatchesQualifiedNamePart(value)) {
    return "label value must be letters, digits, '-', '_' and '.', starting and ending with "
           "a letter or digit, got \"" +
           value + "\"";
  }
  return "";
}

}  // namespace headroom::spec
