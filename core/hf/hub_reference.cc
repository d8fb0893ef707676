#include "core/hf/hub_reference.h"

#include <cstdlib>

namespace headroom::hf {
namespace {

bool RepoPartChar(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
         ch == '.';
}

std::string RepoPartProblem(const std::string& part) {
  if (part.empty()) return "has an empty part";
  for (char ch : part) {
    if (!RepoPartChar(ch))
      return std::string("has the character '") + ch + "' (allowed: letters, digits, '-', '_', '.')";
  }
  for (char edge : {part.front(), part.back()}) {
    if (edge == '-' || edge == '.') return "has a part that starts or ends with '-' or '.'";
  }
  return "";
}

}  // namespace

std::string HubRepoIdProblem(const std::string& repo) {
  if (repo.empty()) return "is empty";
  if (repo.size() > 96) return "is longer than 96 characters";
  if (repo.find("--") != std::string::npos || repo.find("..") != std::string::npos) {
    return "contains \"--\" or \"..\"";
  }
  const size_t slash = repo.find('/');
  if (slash != std::string::npos && repo.find('/', slash + 1) != std::string::npos) {
    return "has more than one '/' (expected \"namespace/name\")";
  }
  if (slash == std::string::npos) return RepoPartProblem(repo);
  if (std::string why = RepoPartProblem(repo.substr(0, slash)); !why.empty()) return why;
  return RepoPartProblem(repo.substr(slash + 1));
}

std::string HubRevisionProblem(const std::string& revision) {
  if (revision.empty()) return "is empty";
  for (char ch : revision) {
    if (ch == '\\' || ch == '?' || ch == '#' || ch == '%' || static_cast<unsigned char>(ch) <= ' ') {
      return std::string("has the character '") + ch + "'";
    }
  }
  size_t start = 0;
  while (true) {
    const size_t slash = revision.find('/', start);
    const std::string part = revision.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return "has an empty, \".\" or \"..\" part";
    if (slash == std::string::npos) return "";
    start = slash + 1;
  }
}

std::string HubEndpointProblem(const std::string& endpoint) {
  size_t scheme_end = 0;
  if (endpoint.rfind("https://", 0) == 0) {
    scheme_end = 8;
  } else if (endpoint.rfind("http://", 0) == 0) {
    scheme_end = 7;
  } else {
    return "must start with http:// or https://";
  }
  const std::string authority = endpoint.substr(scheme_end, endpoint.find('/', scheme_end) - scheme_end);
  if (authority.empty()) return "has no host";
  if (authority.find('@') != std::string::npos) {
    return "must not carry a user or password (the token comes from HF_TOKEN)";
  }
  return "";
}

std::string ResolveHubEndpoint(const std::string& spec_endpoint) {
  std::string endpoint = spec_endpoint;
  if (endpoint.empty()) {
    const char* env = std::getenv(kHubEndpointEnv);
    endpoint = env != nullptr && *env != '\0' ? env : kDefaultHubEndpoint;
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

}  // namespace headroom::hf
