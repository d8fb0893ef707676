#include "operator/kubeclient/bearer_token.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace headroom::kubeclient {

BearerToken::BearerToken(std::string fixed_token, std::string token_file, std::chrono::seconds refresh, Clock clock)
    : fixed_(std::move(fixed_token)), file_(std::move(token_file)), refresh_(refresh), clock_(std::move(clock)) {}

std::string BearerToken::Get() {
  if (file_.empty()) return fixed_;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_();
  if (have_cached_ && !stale_ && now - read_at_ < refresh_) return cached_;
  std::ifstream in(file_);
  if (!in) {
    // Mid-rotation the file can briefly be missing: keep using the last token we had.
    if (have_cached_) return cached_;
    throw std::runtime_error("bearer token file " + file_ + " cannot be read");
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  cached_ = token;
  have_cached_ = true;
  stale_ = false;
  read_at_ = now;
  return cached_;
}

void BearerToken::Invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  stale_ = true;  // the cached value stays as a fallback while the file is being replaced
}

}  // namespace headroom::kubeclient
