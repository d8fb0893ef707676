// Rate limiters deciding how long a work item waits before it is retried — client-go's
// workqueue.DefaultControllerRateLimiter, which headroom reproduces exactly:
//   - per item, exponential: 5 ms after the first failure, doubling per consecutive
//     failure, capped at 1000 s; Forget(item) after a success resets it;
//   - overall, a token bucket of 10 per second with a burst of 100, so a storm of failing
//     items cannot hammer the API server;
//   - the delay used is the larger of the two.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/controllerkit/clock.h"

namespace headroom::controllerkit {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // How long `item` must wait now; also records the attempt.
  virtual Clock::Duration When(const std::string& item) = 0;
  // The item succeeded: stop tracking it.
  virtual void Forget(const std::string& item) = 0;
  virtual int NumRequeues(const std::string& item) = 0;
};

class ItemExponentialFailureRateLimiter : public RateLimiter {
 public:
  ItemExponentialFailureRateLimiter(Clock::Duration base, Clock::Duration max);
  Clock::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  Clock::Duration base_, max_;
  std::mutex mu_;
  std::map<std::string, int> failures_;
};

// golang.org/x/time/rate's Limiter as client-go uses it: each When() reserves a token;
// with none left, the reservation is in the future and When() returns the wait.
class BucketRateLimiter : public RateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, std::shared_ptr<Clock> clock);
  Clock::Duration When(const std::string& item) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  double qps_;
  double burst_;
  std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  double tokens_;
  Clock::TimePoint last_;
};

class MaxOfRateLimiter : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  Clock::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// 5 ms .. 1000 s per item, max with 10 qps / burst 100 overall.
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(std::shared_ptr<Clock> clock);

}  // namespace headroom::controllerkit
