#include "operator/kubeclient/rest_client.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <thread>

#include <boost/asio/ssl.hpp>
#include <cpprest/http_client.h>
#include <cpprest/producerconsumerstream.h>

#include "operator/kubeclient/bearer_token.h"

namespace headroom::kubeclient {

namespace http = web::http;
namespace client = web::http::client;

struct StreamCanceller::State {
  pplx::cancellation_token_source source;
  std::atomic<bool> cancelled{false};
};

StreamCanceller::StreamCanceller() : state_(std::make_shared<State>()) {}
void StreamCanceller::Cancel() {
  state_->cancelled = true;
  state_->source.cancel();
}
bool StreamCanceller::cancelled() const { return state_->cancelled; }

std::string UrlEncode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

namespace {

// Loads the CA, client certificate and key into an SSL context. With a CA given, it
// replaces the system roots (what kubectl does): only the cluster's CA is trusted.
void ConfigureTls(boost::asio::ssl::context& ctx, const KubeConfig& config) {
  if (!config.ca_pem.empty()) {
    SSL_CTX_set_cert_store(ctx.native_handle(), X509_STORE_new());
    ctx.add_certificate_authority(boost::asio::buffer(config.ca_pem.data(), config.ca_pem.size()));
  }
  if (!config.client_cert_pem.empty()) {
    ctx.use_certificate_chain(boost::asio::buffer(config.client_cert_pem.data(), config.client_cert_pem.size()));
    ctx.use_private_key(boost::asio::buffer(config.client_key_pem.data(), config.client_key_pem.size()),
                        boost::asio::ssl::context::pem);
  }
}

client::http_client_config MakeClientConfig(const KubeConfig& config, std::chrono::milliseconds timeout) {
  client::http_client_config cfg;
  cfg.set_timeout(timeout);
  cfg.set_validate_certificates(true);  // always; there is no switch to turn this off
  cfg.set_ssl_context_callback([config](boost::asio::ssl::context& ctx) { ConfigureTls(ctx, config); });
  return cfg;
}

bool SafeToRetry(const std::string& method, int code) {
  if (code == 429) return true;  // rejected before any work was done
  return method == "GET" && (code == 0 || code == 500 || code == 502 || code == 503 || code == 504);
}

}  // namespace

struct RestClient::Impl {
  Impl(const KubeConfig& config, const RestClientOptions& options)
      : token(config.token, config.token_file, config.token_refresh),
        requests(web::uri(config.server), MakeClientConfig(config, options.request_timeout)),
        streams(web::uri(config.server), MakeClientConfig(config, options.stream_timeout)) {}

  BearerToken token;
  client::http_client requests;  // short timeout
  client::http_client streams;   // watches: long-lived responses
  std::atomic<int64_t> sent{0};

  http::http_request Build(const std::string& method, const std::string& target, const std::string& user_agent) {
    http::http_request req(method);
    req.set_request_uri(target);
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", user_agent);
    const std::string bearer = token.Get();
    if (!bearer.empty()) req.headers().add("Authorization", "Bearer " + bearer);
    return req;
  }
};

RestClient::RestClient(KubeConfig config, RestClientOptions options)
    : config_(std::move(config)), options_(std::move(options)) {
  const std::string& server = config_.server;
  // TLS always: plain http is accepted only for a server on this machine's loopback
  // (the in-process test API server, the operator's own endpoints), never over a network.
  const bool loopback_http = server.rfind("http://127.0.0.1:", 0) == 0 || server.rfind("http://localhost:", 0) == 0 ||
                             server.rfind("http://[::1]:", 0) == 0;
  if (server.rfind("https://", 0) != 0 && !loopback_http) {
    throw std::runtime_error(config_.source + ": server \"" + server +
                             "\" must start with https:// (plain http only on loopback)");
  }
  // Load the certificates once now, so a bad PEM fails here with a clear message rather
  // than on every connection attempt.
  try {
    boost::asio::ssl::context probe(boost::asio::ssl::context::sslv23);
    ConfigureTls(probe, config_);
  } catch (const std::exception& e) {
    throw std::runtime_error(config_.source + ": cannot load TLS certificates or key: " + e.what());
  }
  impl_ = std::make_unique<Impl>(config_, options_);
}

RestClient::~RestClient() = default;

int64_t RestClient::requests_sent() const { return impl_->sent.load(); }

nlohmann::json RestClient::Request(const std::string& method, const std::string& target, const nlohmann::json* body,
                                   const std::string& content_type) {
  const std::string where = method + " " + target;
  const std::string payload = body ? body->dump() : std::string();
  bool reauthenticated = false;
  std::chrono::milliseconds delay = options_.retry_base_delay;
  for (int attempt = 0;; ++attempt) {
    int code = 0;
    std::string text;
    std::chrono::milliseconds retry_after{0};
    try {
      http::http_request req = impl_->Build(method, target, options_.user_agent);
      if (body) req.set_body(payload, content_type);
      ++impl_->sent;
      http::http_response resp = impl_->requests.request(req).get();
      code = resp.status_code();
      text = resp.extract_utf8string(/*ignore_content_type=*/true).get();
      if (code == 429 && resp.headers().has("Retry-After")) {
        try {
          retry_after = std::chrono::seconds(std::stoi(resp.headers()["Retry-After"]));
        } catch (...) {
        }
      }
    } catch (const std::exception& e) {
      code = 0;
      text = e.what();
    }
    if (code >= 200 && code < 300) {
      if (text.empty()) return nullptr;
      auto parsed = nlohmann::json::parse(text, nullptr, false);
      if (parsed.is_discarded()) throw ApiError(code, "BadResponse", "body is not JSON: " + text.substr(0, 200), where);
      return parsed;
    }
    if (code == 401 && impl_->token.from_file() && !reauthenticated) {
      impl_->token.Invalidate();  // the token may have rotated under us
      reauthenticated = true;
      continue;
    }
    ApiError error = code == 0 ? ApiError(0, "Transport", text, where) : ApiError::FromResponse(code, text, where);
    if (attempt >= options_.max_retries || !SafeToRetry(method, code)) throw error;
    std::this_thread::sleep_for(std::min(std::max(delay, retry_after), options_.retry_max_delay));
    delay = std::min(delay * 2, options_.retry_max_delay);
  }
}

void RestClient::Stream(const std::string& target, const std::function<void(const std::string&)>& on_line,
                        const StreamCanceller& canceller) {
  const std::string where = "GET " + target;
  // A source of our own, linked to the caller's: leaving early (an exception from
  // on_line) must also close this connection, or the server would keep streaming into it.
  pplx::cancellation_token caller_token = canceller.state_->source.get_token();
  auto request_source = pplx::cancellation_token_source::create_linked_source(caller_token);
  struct CancelOnExit {
    pplx::cancellation_token_source& source;
    ~CancelOnExit() { source.cancel(); }
  } cancel_on_exit{request_source};
  auto token = request_source.get_token();
  http::http_response resp;
  for (int auth_attempt = 0;; ++auth_attempt) {
    try {
      http::http_request req = impl_->Build("GET", target, options_.user_agent);
      ++impl_->sent;
      resp = impl_->streams.request(req, token).get();
    } catch (const std::exception& e) {
      if (canceller.cancelled()) return;
      throw ApiError(0, "Transport", e.what(), where);
    }
    if (resp.status_code() == 401 && impl_->token.from_file() && auth_attempt == 0) {
      impl_->token.Invalidate();
      continue;
    }
    break;
  }
  if (resp.status_code() != 200) {
    std::string text;
    try {
      text = resp.extract_utf8string(true).get();
    } catch (...) {
    }
    throw ApiError::FromResponse(resp.status_code(), text, where);
  }
  // Read what has arrived, never waiting for more than one byte at a time: a read of N
  // bytes on cpprest's body buffer would block until N bytes came, holding back events.
  auto buffer = resp.body().streambuf();
  std::string pending;
  std::vector<uint8_t> chunk(64 * 1024);
  try {
    while (!canceller.cancelled()) {
      size_t available = buffer.in_avail();
      size_t want = available > 0 ? std::min(available, chunk.size()) : 1;
      size_t got = buffer.getn(chunk.data(), want).get();
      if (got == 0) break;  // end of body
      pending.append(reinterpret_cast<const char*>(chunk.data()), got);
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        if (nl > start) on_line(pending.substr(start, nl - start));
      }
      pending.erase(0, start);
    }
  } catch (const ApiError&) {
    throw;
  } catch (const std::exception& e) {
    if (canceller.cancelled()) return;
    throw ApiError(0, "Transport", std::string("stream broke: ") + e.what(), where);
  }
  if (!pending.empty() && !canceller.cancelled()) on_line(pending);
}

}  // namespace headroom::kubeclient
