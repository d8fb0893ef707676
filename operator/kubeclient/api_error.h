// ApiError: a Kubernetes API call that did not succeed, carrying the three fields of the
// metav1.Status the server answered with (HTTP code, machine-readable reason, human
// message) so callers branch on what happened — re-read on Conflict, relist on Gone,
// create on NotFound — instead of parsing message text.
//
// Transport failures (connection refused, TLS handshake, timeout) are ApiErrors too,
// with code 0 and reason "Transport", so one catch handles every failed call.
#pragma once

#include <stdexcept>
#include <string>

namespace headroom::kubeclient {

class ApiError : public std::runtime_error {
 public:
  // `where` names the call ("PUT /apis/headroom.dev/v1alpha1/.../x") for the log line.
  ApiError(int code, std::string reason, std::string message, const std::string& where);

  // Builds the error for an HTTP response: the body is parsed as a metav1.Status when it
  // is one; otherwise the reason is derived from the code and the body becomes the message.
  static ApiError FromResponse(int http_code, const std::string& body, const std::string& where);
  // Builds the error from a Status object that arrived inside a watch stream (ERROR event).
  static ApiError FromStatusJson(const std::string& status_json, const std::string& where);

  int code() const { return code_; }
  const std::string& reason() const { return reason_; }
  const std::string& message() const { return message_; }

  bool IsNotFound() const { return code_ == 404; }
  bool IsAlreadyExists() const { return code_ == 409 && reason_ == "AlreadyExists"; }
  // A stale resourceVersion on update: re-read and try again.
  bool IsConflict() const { return code_ == 409 && reason_ != "AlreadyExists"; }
  // The resourceVersion asked for has been compacted away: relist.
  bool IsGone() const { return code_ == 410; }
  bool IsTransport() const { return code_ == 0; }
  // Worth retrying unchanged after a pause: throttling, server trouble, no connection.
  bool IsRetryable() const {
    return code_ == 0 || code_ == 429 || code_ == 500 || code_ == 502 || code_ == 503 || code_ == 504;
  }

 private:
  int code_;
  std::string reason_;
  std::string message_;
};

// The reason Kubernetes uses for an HTTP code when the body carries none.
std::string ReasonForCode(int http_code);

}  // namespace headroom::kubeclient
