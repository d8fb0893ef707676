#include "operator/controllerkit/work_queue.h"

#include <algorithm>

namespace headroom::controllerkit {

WorkQueue::WorkQueue(std::shared_ptr<Clock> clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(clock ? std::move(clock) : std::make_shared<RealClock>()),
      limiter_(limiter ? std::move(limiter) : DefaultControllerRateLimiter(clock_)) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // re-queued by Done
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  const auto due = clock_->Now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= due) return;  // an earlier wake-up already stands
    due_order_.erase({it->second, key});
    it->second = due;
  } else {
    waiting_.emplace(key, due);
  }
  due_order_.emplace(due, key);
  cv_.notify_all();  // a sleeping Get may need to wake sooner
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_->When(key)); }
void WorkQueue::Forget(const std::string& key) { limiter_->Forget(key); }
int WorkQueue::NumRequeues(const std::string& key) { return limiter_->NumRequeues(key); }

std::optional<Clock::TimePoint> WorkQueue::PromoteDueLocked() {
  if (due_order_.empty()) return std::nullopt;
  const auto now = clock_->Now();
  // Due keys go in in due-time order, so the longest-waiting key is served first.
  while (!due_order_.empty() && due_order_.begin()->first <= now) {
    auto node = due_order_.extract(due_order_.begin());
    waiting_.erase(node.value().second);
    AddLocked(node.value().second);
  }
  if (due_order_.empty()) return std::nullopt;
  return due_order_.begin()->first;
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    std::optional<Clock::TimePoint> next = shutting_down_ ? std::nullopt : PromoteDueLocked();
    if (!queue_.empty()) return PopLocked();
    if (shutting_down_) return std::nullopt;
    if (next) {
      // Sleep until the next key is due; at most 50 ms at a time so a FakeClock moved
      // by a test is noticed without a wake-up call.
      auto wait = std::min<Clock::Duration>(*next - clock_->Now(), std::chrono::milliseconds(50));
      cv_.wait_for(lock, std::max<Clock::Duration>(wait, Clock::Duration(0)));
    } else {
      cv_.wait(lock);
    }
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!shutting_down_) PromoteDueLocked();
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key)) {
    queue_.push_back(key);  // added again while it was being processed
    cv_.notify_one();
  }
  if (processing_.empty()) cv_.notify_all();  // ShutDownWithDrain may be waiting
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  waiting_.clear();  // delayed keys are dropped: nobody will process them
  due_order_.clear();
  cv_.notify_all();
}

bool WorkQueue::ShutDownWithDrain(std::chrono::milliseconds timeout) {
  ShutDown();
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return processing_.empty() && queue_.empty(); });
}

bool WorkQueue::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t WorkQueue::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

size_t WorkQueue::Processing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return processing_.size();
}

}  // namespace headroom::controllerkit
