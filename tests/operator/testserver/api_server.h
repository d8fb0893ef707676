// TestApiServer: an in-process Kubernetes API server for tests and benchmarks — real
// HTTP (or HTTPS) on 127.0.0.1 at a free port, speaking the API's paths, verbs, query
// parameters and JSON, with ObjectStore's semantics behind it.
//
// Watches stream with Transfer-Encoding: chunked, one JSON event per line, flushed per
// event; they honour resourceVersion (410 Gone as an ERROR event for a compacted one),
// allowWatchBookmarks (a BOOKMARK every bookmark_interval and before the watch ends) and
// timeoutSeconds.
//
// Faults for robustness tests, all from a seeded RNG so a failure reproduces:
// a fraction of requests answered 500 or 429 before touching the store; watches dropped
// after N events or at random; a forced 410 on the next watch; added latency.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "operator/kubeclient/kube_config.h"
#include "tests/operator/testserver/object_store.h"

namespace headroom::testserver {

struct FaultOptions {
  double error_fraction = 0;          // of requests (watches included), answered 500 or 429
  int drop_watch_after_events = 0;    // end every watch after this many events (0 = never)
  double drop_watch_probability = 0;  // after each event, end the watch with this chance
  std::chrono::milliseconds latency{0};
  uint64_t seed = 1;
};

struct TestApiServerOptions {
  // HTTPS when a certificate is given (PEM); the CA to trust goes in ClientConfig().
  std::string server_cert_pem;
  std::string server_key_pem;
  std::string ca_pem;             // handed to clients by ClientConfig()
  std::string client_ca_pem;      // when set, clients must present a certificate signed by it
  std::string required_token;     // when set, requests must carry "Bearer <token>" (else 401)
  size_t history_window = 10000;  // watch history kept; older revisions are 410 Gone
  std::chrono::milliseconds bookmark_interval{1000};
  int port = 0;  // 0: a free port
};

class TestApiServer {
 public:
  explicit TestApiServer(TestApiServerOptions options = {});
  ~TestApiServer();
  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  // Binds options.port (or a free port) on 127.0.0.1 and starts serving. Throws when it
  // cannot.
  void Start();
  // Ends every watch and stops listening. Idempotent.
  void Stop();

  std::string url() const { return url_; }
  // A config pointing at this server (CA included when serving HTTPS).
  kubeclient::KubeConfig ClientConfig(const std::string& ns = "default") const;
  ObjectStore& store() { return store_; }

  void SetFaults(const FaultOptions& faults);
  // The next watch request gets 410: as an HTTP status (`as_http_status`) or, as a real
  // server does, as an ERROR event in a 200 stream.
  void ForceGoneOnNextWatch(bool as_http_status = false);
  // Ends every open watch now (a connection drop, as seen by clients).
  void DropAllWatches();
  // Changes the token required from now on (token rotation tests).
  void SetRequiredToken(const std::string& token);
  // Several credentials at once (e.g. one per leader-election candidate, to revoke one).
  void SetAcceptedTokens(const std::set<std::string>& tokens);

  int64_t requests() const { return requests_; }
  // Requests with a write verb (POST, PUT, PATCH, DELETE) that reached the store.
  int64_t write_requests() const { return write_requests_; }
  int64_t injected_faults() const { return injected_faults_; }
  int open_watches() const;

 private:
  struct Impl;
  TestApiServerOptions options_;
  ObjectStore store_;
  std::string url_;
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> write_requests_{0};
  std::atomic<int64_t> injected_faults_{0};
};

}  // namespace headroom::testserver
