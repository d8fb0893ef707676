// RestClient: one connection pool to one API server, speaking JSON over HTTPS
// (cpprestsdk underneath; nlohmann::json at this boundary, so nothing above sees cpprest).
//
// Every non-2xx answer becomes an ApiError carrying the server's metav1.Status. Safe
// requests (GET) are retried on throttling, 5xx and transport errors with exponential
// backoff; any request is retried on 429, which the server sends before doing anything
// (honouring Retry-After). A 401 re-reads a rotating token file once and retries.
// Writes that failed with 5xx are not retried here: the caller (a reconciler) re-reads
// and decides, because the write may have happened.
//
// Streams (watches) are read incrementally: each line of the body is handed to the
// caller as soon as it arrives, not when the response ends. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/base/non_copyable.h"
#include "operator/kubeclient/api_error.h"
#include "operator/kubeclient/kube_config.h"

namespace headroom::kubeclient {

struct RestClientOptions {
  std::chrono::milliseconds request_timeout{30000};
  // Inactivity limit on a stream; watches ask the server for a shorter timeoutSeconds.
  std::chrono::milliseconds stream_timeout{600000};
  int max_retries = 4;
  std::chrono::milliseconds retry_base_delay{25};  // doubles per attempt
  std::chrono::milliseconds retry_max_delay{2000};
  std::string user_agent = "headroom/0.1";
};

// Cancels an open stream from another thread: Stream() returns promptly.
class StreamCanceller {
 public:
  StreamCanceller();
  void Cancel();
  bool cancelled() const;
  struct State;

 private:
  friend class RestClient;
  std::shared_ptr<State> state_;
};

class RestClient : NonCopyable {
 public:
  // Throws std::runtime_error when the config's certificates or keys do not load, naming
  // the config's source.
  explicit RestClient(KubeConfig config, RestClientOptions options = {});
  ~RestClient();

  // `target` is the path plus an already-encoded query ("/api/v1/pods?limit=5").
  // Returns the parsed body (null for an empty one). Throws ApiError.
  nlohmann::json Request(const std::string& method, const std::string& target, const nlohmann::json* body = nullptr,
                         const std::string& content_type = "application/json");

  // GETs `target` and calls on_line for every complete line of the body, as it arrives.
  // Returns when the server ends the body, or when `canceller` fires (then quietly).
  // Throws ApiError when the server answers with anything but 200, or the connection fails.
  void Stream(const std::string& target, const std::function<void(const std::string&)>& on_line,
              const StreamCanceller& canceller);

  const KubeConfig& config() const { return config_; }
  // Requests sent (every attempt, streams included): benchmarks count API writes with it.
  int64_t requests_sent() const;

 private:
  struct Impl;
  KubeConfig config_;
  RestClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& value);

}  // namespace headroom::kubeclient
