// KubeConfig: where the API server is and how to prove who we are to it, loaded from a
// kubeconfig file (what kubectl uses) or from the pod's service account (in-cluster).
//
// TLS is always verified: the server certificate must chain to the configured CA (or,
// with no CA configured, to the system roots) and match the host. A kubeconfig that asks
// for insecure-skip-tls-verify is refused with an error naming the cluster.
//
// Supported credentials: client certificate + key (files or base64 data), a bearer
// token, a token file (re-read as it rotates). exec and auth-provider plugins are not
// supported and are reported as such. Relative file paths are resolved against the
// kubeconfig's directory, as kubectl does. Every problem names the file and the entry.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace headroom::kubeclient {

struct KubeConfig {
  std::string server;                      // "https://host:port" (http:// only for tests on loopback)
  std::string ca_pem;                      // PEM of the CA bundle; empty = system roots
  std::string client_cert_pem;             // PEM client certificate chain; empty = none
  std::string client_key_pem;              // PEM private key for client_cert_pem
  std::string token;                       // static bearer token; empty = none
  std::string token_file;                  // file holding the bearer token, re-read as it rotates
  std::chrono::seconds token_refresh{60};  // re-read token_file when older than this
  std::string ns = "default";              // namespace of the current context / service account
  std::string source;                      // where this came from, for messages ("kubeconfig x, context y")
};

// Loads `path` (empty: $KUBECONFIG's first entry, else ~/.kube/config) and resolves
// `context` (empty: current-context). Throws std::runtime_error naming file and entry.
KubeConfig LoadKubeconfig(const std::string& path, const std::string& context = "");
// Same, from text already read; `base_dir` resolves relative paths.
KubeConfig ParseKubeconfig(const std::string& yaml_text, const std::string& base_dir, const std::string& context,
                           const std::string& source_name);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT from the environment (or the overrides), the
// service account's token (as a rotating token_file), ca.crt and namespace.
struct InClusterOptions {
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string host;  // empty: $KUBERNETES_SERVICE_HOST
  std::string port;  // empty: $KUBERNETES_SERVICE_PORT
};
KubeConfig LoadInClusterConfig(const InClusterOptions& options = {});

// True when the process runs in a pod (the service host variable and token are present).
bool InCluster(const InClusterOptions& options = {});

}  // namespace headroom::kubeclient
