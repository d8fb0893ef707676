// HTTP as a Hugging Face Hub client needs it: no automatic redirects (a resolve call
// answers 302 to a content URL, possibly on another host, and its headers carry the
// file's metadata), and the token sent only to the endpoint's own origin (scheme, host,
// port), never to a redirect's other host.
#pragma once

#include <cpprest/http_client.h>

#include <chrono>
#include <exception>
#include <string>

namespace headroom::hf {

class HubHttp {
 public:
  // `endpoint` as ResolveHubEndpoint returns it; `token` "" for anonymous requests;
  // `timeout`: how long a request may wait for the server (its answer, or the next bytes
  // of a body) before it fails with std::errc::timed_out (see TimedOut()).
  HubHttp(std::string endpoint, std::string token, std::chrono::seconds timeout = std::chrono::seconds(60));

  const std::string& endpoint() const { return endpoint_; }

  // One request to the absolute `url`, redirects not followed, the response's headers
  // read (the body left to the caller). Authorization: Bearer <token> only when `url` has
  // the endpoint's origin. `range_from` > 0 adds "Range: bytes=<range_from>-".
  // Throws web::http::http_exception when the server cannot be reached.
  web::http::http_response Send(const web::http::method& method, const std::string& url, int64_t range_from = 0) const;

  // True when `url` has the endpoint's scheme, host and port.
  bool SameOrigin(const std::string& url) const;

  // `location` made absolute against `base` (a Location header may be a path).
  static std::string Absolute(const std::string& base, const std::string& location);

  // True when `e` is a request or body read that waited longer than the timeout.
  static bool TimedOut(const std::exception& e);

 private:
  std::string endpoint_;
  std::string token_;
  std::chrono::seconds timeout_;
};

// The value of a response header, "" when absent.
std::string HeaderValue(const web::http::http_response& response, const std::string& name);

}  // namespace headroom::hf
