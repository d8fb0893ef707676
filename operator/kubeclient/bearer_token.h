// BearerToken: the token sent as "Authorization: Bearer ...", either fixed or read from
// a file that the kubelet rotates underneath us (projected service-account tokens are
// replaced well before they expire). The file is re-read when the cached copy is older
// than the refresh period, and at once after the server answered 401 (Invalidate), so a
// rotation never costs more than one failed request. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace headroom::kubeclient {

class BearerToken {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  BearerToken() = default;  // no token
  BearerToken(std::string fixed_token, std::string token_file, std::chrono::seconds refresh,
              Clock clock = std::chrono::steady_clock::now);

  // The current token ("" when none). Throws std::runtime_error when the file vanished
  // and no token was ever read.
  std::string Get();
  // Forget the cached copy: the next Get re-reads the file (after a 401).
  void Invalidate();
  bool from_file() const { return !file_.empty(); }

 private:
  std::string fixed_;
  std::string file_;
  std::chrono::seconds refresh_{60};
  Clock clock_ = std::chrono::steady_clock::now;

  std::mutex mu_;
  std::string cached_;
  bool have_cached_ = false;
  bool stale_ = false;
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace headroom::kubeclient
