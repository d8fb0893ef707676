#include "operator/kubeclient/kube_config.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace headroom::kubeclient {
namespace {

namespace fs = std::filesystem;

std::string ReadFileOrThrow(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(what + ": cannot read file " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Base64DecodeOrThrow(const std::string& text, const std::string& what) {
  std::string clean;
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') clean.push_back(c);
  }
  if (clean.empty()) return "";
  if (clean.size() % 4 != 0) throw std::runtime_error(what + ": not valid base64 (length)");
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (n < 0) throw std::runtime_error(what + ": not valid base64");
  size_t pad = 0;
  if (clean.size() >= 1 && clean[clean.size() - 1] == '=') ++pad;
  if (clean.size() >= 2 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).string();
}

// Finds the entry `name` in a kubeconfig list (clusters/users/contexts) and returns
// its inner map (e.g. the `cluster:` of a named cluster).
YAML::Node FindNamed(const YAML::Node& root, const std::string& list, const std::string& inner, const std::string& name,
                     const std::string& where) {
  const YAML::Node entries = root[list];
  if (entries && !entries.IsSequence()) throw std::runtime_error(where + ": " + list + " is not a list");
  if (entries) {
    for (const auto& entry : entries) {
      if (entry["name"] && entry["name"].as<std::string>() == name) {
        YAML::Node node = entry[inner];
        if (!node || !node.IsMap()) {
          throw std::runtime_error(where + ": " + list + "[name=" + name + "]." + inner + " is missing");
        }
        return node;
      }
    }
  }
  throw std::runtime_error(where + ": no entry named \"" + name + "\" in " + list);
}

std::string Str(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  if (!v || v.IsNull()) return "";
  return v.as<std::string>();
}

// Reads either `<key>-data` (base64) or `<key>` (a file path).
std::string DataOrFile(const YAML::Node& map, const std::string& key, const std::string& base_dir,
                       const std::string& where) {
  std::string data = Str(map, (key + "-data").c_str());
  if (!data.empty()) return Base64DecodeOrThrow(data, where + "." + key + "-data");
  std::string file = Str(map, key.c_str());
  if (!file.empty()) return ReadFileOrThrow(Resolve(file, base_dir), where + "." + key);
  return "";
}

}  // namespace

KubeConfig ParseKubeconfig(const std::string& yaml_text, const std::string& base_dir, const std::string& context_name,
                           const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(source_name + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) throw std::runtime_error(source_name + ": not a kubeconfig (expected a map)");

  std::string context = context_name.empty() ? Str(root, "current-context") : context_name;
  if (context.empty()) {
    throw std::runtime_error(source_name + ": no current-context set and no --context given");
  }
  const std::string ctx_where = source_name + ": contexts[name=" + context + "]";
  YAML::Node ctx = FindNamed(root, "contexts", "context", context, source_name);
  const std::string cluster_name = Str(ctx, "cluster");
  const std::string user_name = Str(ctx, "user");
  if (cluster_name.empty()) throw std::runtime_error(ctx_where + ".context.cluster is missing");

  KubeConfig config;
  config.source = source_name + ", context " + context;
  config.ns = Str(ctx, "namespace");
  if (config.ns.empty()) config.ns = "default";

  const std::string cl_where = source_name + ": clusters[name=" + cluster_name + "].cluster";
  YAML::Node cluster = FindNamed(root, "clusters", "cluster", cluster_name, source_name);
  config.server = Str(cluster, "server");
  if (config.server.empty()) throw std::runtime_error(cl_where + ".server is missing");
  if (cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>()) {
    throw std::runtime_error(cl_where + ".insecure-skip-tls-verify: refused; headroom always verifies the "
                                        "API server's certificate (set certificate-authority-data instead)");
  }
  config.ca_pem = DataOrFile(cluster, "certificate-authority", base_dir, cl_where);

  if (!user_name.empty()) {
    const std::string us_where = source_name + ": users[name=" + user_name + "].user";
    YAML::Node user = FindNamed(root, "users", "user", user_name, source_name);
    if (user["exec"]) throw std::runtime_error(us_where + ".exec: credential plugins are not supported");
    if (user["auth-provider"]) {
      throw std::runtime_error(us_where + ".auth-provider: auth provider plugins are not supported");
    }
    if (user["username"] || user["password"]) {
      throw std::runtime_error(us_where + ".username/password: basic auth is not supported");
    }
    config.client_cert_pem = DataOrFile(user, "client-certificate", base_dir, us_where);
    config.client_key_pem = DataOrFile(user, "client-key", base_dir, us_where);
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      throw std::runtime_error(us_where + ": client-certificate and client-key must be given together");
    }
    config.token = Str(user, "token");
    const std::string token_file = Str(user, "tokenFile");
    if (!token_file.empty()) {
      config.token_file = Resolve(token_file, base_dir);
      // Fail now, not on the first request, when the file is not there.
      ReadFileOrThrow(config.token_file, us_where + ".tokenFile");
    }
  }
  return config;
}

KubeConfig LoadKubeconfig(const std::string& path_arg, const std::string& context) {
  std::string path = path_arg;
  if (path.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
      path = env;
      path = path.substr(0, path.find(':'));  // merging several files is not supported
    } else if (const char* home = std::getenv("HOME")) {
      path = std::string(home) + "/.kube/config";
    }
  }
  if (path.empty()) throw std::runtime_error("no kubeconfig: pass --kubeconfig or set KUBECONFIG");
  const std::string text = ReadFileOrThrow(path, "kubeconfig");
  return ParseKubeconfig(text, fs::path(path).parent_path().string(), context, "kubeconfig " + path);
}

namespace {
std::string EnvOr(const std::string& value, const char* name) {
  if (!value.empty()) return value;
  const char* env = std::getenv(name);
  return env ? env : "";
}
}  // namespace

bool InCluster(const InClusterOptions& options) {
  return !EnvOr(options.host, "KUBERNETES_SERVICE_HOST").empty() &&
         fs::exists(fs::path(options.service_account_dir) / "token");
}

KubeConfig LoadInClusterConfig(const InClusterOptions& options) {
  const std::string host = EnvOr(options.host, "KUBERNETES_SERVICE_HOST");
  const std::string port = EnvOr(options.port, "KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    throw std::runtime_error("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
                             "(not running in a pod?)");
  }
  const fs::path dir(options.service_account_dir);
  KubeConfig config;
  config.source = "in-cluster service account " + dir.string();
  // An IPv6 service host needs brackets in a URL.
  config.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  config.token_file = (dir / "token").string();
  ReadFileOrThrow(config.token_file, "in-cluster config: token");
  config.ca_pem = ReadFileOrThrow((dir / "ca.crt").string(), "in-cluster config: ca.crt");
  std::error_code ec;
  if (fs::exists(dir / "namespace", ec)) {
    std::string ns = ReadFileOrThrow((dir / "namespace").string(), "in-cluster config: namespace");
    while (!ns.empty() && (ns.back() == '\n' || ns.back() == ' ')) ns.pop_back();
    if (!ns.empty()) config.ns = ns;
  }
  return config;
}

}  // namespace headroom::kubeclient
