#include "operator/controllerkit/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace headroom::controllerkit {

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(Clock::Duration base, Clock::Duration max)
    : base_(base), max_(max) {}

Clock::Duration ItemExponentialFailureRateLimiter::When(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  const int exp = failures_[item]++;
  // base * 2^exp, computed in floating point so a long failure streak cannot overflow.
  const double delay = static_cast<double>(base_.count()) * std::pow(2.0, exp);
  if (delay > static_cast<double>(max_.count())) return max_;
  return Clock::Duration(static_cast<Clock::Duration::rep>(delay));
}

void ItemExponentialFailureRateLimiter::Forget(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(item);
}

int ItemExponentialFailureRateLimiter::NumRequeues(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

BucketRateLimiter::BucketRateLimiter(double qps, int burst, std::shared_ptr<Clock> clock)
    : qps_(qps), burst_(burst), clock_(std::move(clock)), tokens_(burst), last_(clock_->Now()) {}

Clock::Duration BucketRateLimiter::When(const std::string&) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_->Now();
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;  // may go negative: that is a reservation in the future
  if (tokens_ >= 0) return Clock::Duration::zero();
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

Clock::Duration MaxOfRateLimiter::When(const std::string& item) {
  Clock::Duration longest = Clock::Duration::zero();
  for (auto& l : limiters_) longest = std::max(longest, l->When(item));
  return longest;
}

void MaxOfRateLimiter::Forget(const std::string& item) {
  for (auto& l : limiters_) l->Forget(item);
}

int MaxOfRateLimiter::NumRequeues(const std::string& item) {
  int most = 0;
  for (auto& l : limiters_) most = std::max(most, l->NumRequeues(item));
  return most;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(std::shared_ptr<Clock> clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(
      std::make_unique<ItemExponentialFailureRateLimiter>(std::chrono::milliseconds(5), std::chrono::seconds(1000)));
  limiters.push_back(std::make_unique<BucketRateLimiter>(10.0, 100, std::move(clock)));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace headroom::controllerkit
