#include "core/hf/hub_http.h"

#include <cerrno>
#include <chrono>

namespace headroom::hf {
namespace http = web::http;

namespace {

std::string Origin(const web::uri& u) {
  return u.scheme() + "://" + u.host() + ":" +
         std::to_string(u.port() > 0 ? u.port() : (u.scheme() == "https" ? 443 : 80));
}

}  // namespace

HubHttp::HubHttp(std::string endpoint, std::string token, std::chrono::seconds timeout)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), timeout_(timeout) {}

bool HubHttp::TimedOut(const std::exception& e) {
  // cpprest reports its own timer's expiry as ETIMEDOUT, whatever the socket said.
  const auto* h = dynamic_cast<const http::http_exception*>(&e);
  return h != nullptr && h->error_code().value() == ETIMEDOUT;
}

bool HubHttp::SameOrigin(const std::string& url) const { return Origin(web::uri(url)) == Origin(web::uri(endpoint_)); }

std::string HubHttp::Absolute(const std::string& base, const std::string& location) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
  const web::uri b(base);
  web::uri_builder built;
  built.set_scheme(b.scheme()).set_host(b.host()).set_port(b.port());
  return built.to_string() + (location.rfind('/', 0) == 0 ? "" : "/") + location;
}

http::http_response HubHttp::Send(const http::method& method, const std::string& url, int64_t range_from) const {
  const web::uri target(url);
  web::uri_builder origin;
  origin.set_scheme(target.scheme()).set_host(target.host()).set_port(target.port());
  http::client::http_client_config config;
  config.set_max_redirects(0);
  config.set_timeout(timeout_);
  http::client::http_client client(origin.to_uri(), config);
  http::http_request request(method);
  request.set_request_uri(target.resource());
  request.headers().add("Accept-Encoding", "identity");  // sizes and checksums are of the raw bytes
  request.headers().add(http::header_names::user_agent, "headroom");
  if (!token_.empty() && SameOrigin(url)) request.headers().add(http::header_names::authorization, "Bearer " + token_);
  if (range_from > 0) request.headers().add("Range", "bytes=" + std::to_string(range_from) + "-");
  return client.request(request).get();
}

std::string HeaderValue(const http::http_response& response, const std::string& name) {
  std::string value;
  response.headers().match(name, value);
  return value;
}

}  // namespace headroom::hf
