#include "operator/controllerkit/operator_endpoints.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cpprest/http_listener.h>

#include "core/net/free_port.h"

namespace headroom::controllerkit {

namespace http = web::http;

namespace {

std::pair<int, std::string> RunChecks(const std::vector<std::pair<std::string, OperatorEndpoints::Check>>& checks,
                                      const std::vector<std::pair<std::string, std::function<std::string()>>>& info) {
  bool ok = true;
  std::string body;
  for (const auto& [name, check] : checks) {
    std::string detail;
    bool passed = false;
    try {
      passed = check(&detail);
    } catch (const std::exception& e) {
      detail = e.what();
    }
    ok = ok && passed;
    body += (passed ? "[+]" : "[-]") + name + (passed ? " ok" : " failed");
    if (!detail.empty()) body += ": " + detail;
    body += "\n";
  }
  for (const auto& [name, fn] : info) body += "[i]" + name + ": " + fn() + "\n";
  body += ok ? "ok\n" : "not ok\n";
  return {ok ? 200 : 500, body};
}

}  // namespace

struct OperatorEndpoints::Impl {
  std::unique_ptr<http::experimental::listener::http_listener> listener;
};

OperatorEndpoints::OperatorEndpoints(std::string address, int port, std::shared_ptr<OperatorMetrics> metrics)
    : address_(std::move(address)), port_(port), metrics_(std::move(metrics)), impl_(std::make_unique<Impl>()) {}

OperatorEndpoints::~OperatorEndpoints() { Stop(); }

void OperatorEndpoints::AddHealthCheck(const std::string& name, Check check) {
  std::lock_guard<std::mutex> lock(mu_);
  health_.emplace_back(name, std::move(check));
}

void OperatorEndpoints::AddReadinessCheck(const std::string& name, Check check) {
  std::lock_guard<std::mutex> lock(mu_);
  ready_.emplace_back(name, std::move(check));
}

void OperatorEndpoints::AddReadinessInfo(const std::string& name, std::function<std::string()> info) {
  std::lock_guard<std::mutex> lock(mu_);
  info_.emplace_back(name, std::move(info));
}

std::pair<int, std::string> OperatorEndpoints::Healthz() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RunChecks(health_, {});
}

std::pair<int, std::string> OperatorEndpoints::Readyz() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RunChecks(ready_, info_);
}

void OperatorEndpoints::Start() {
  std::string last_error;
  const bool pick = port_ == 0;
  for (int attempt = 0; attempt < (pick ? 10 : 1) && !impl_->listener; ++attempt) {
    const int port = pick ? net::FreePort(address_) : port_;
    auto listener = std::make_unique<http::experimental::listener::http_listener>("http://" + address_ + ":" +
                                                                                  std::to_string(port));
    listener->support(http::methods::GET, [this](http::http_request req) {
      const std::string path = req.relative_uri().path();
      std::pair<int, std::string> answer;
      std::string type = "text/plain; charset=utf-8";
      if (path == "/metrics") {
        answer = {200, metrics_ ? metrics_->Render() : ""};
        type = "text/plain; version=0.0.4; charset=utf-8";
      } else if (path == "/healthz" || path == "/livez") {
        answer = Healthz();
      } else if (path == "/readyz") {
        answer = Readyz();
      } else {
        answer = {404, "not found: " + path + " (try /metrics, /healthz, /readyz)\n"};
      }
      req.reply(answer.first, answer.second, type);
    });
    try {
      listener->open().wait();
      impl_->listener = std::move(listener);
      port_ = port;
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }
  if (!impl_->listener) {
    throw std::runtime_error("operator endpoints: cannot listen on " + address_ + ":" + std::to_string(port_) + ": " +
                             last_error);
  }
}

void OperatorEndpoints::Stop() {
  if (!impl_ || !impl_->listener) return;
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
    // The socket is gone either way.
  }
  impl_->listener.reset();
}

}  // namespace headroom::controllerkit
