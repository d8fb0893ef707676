// WorkQueue: the controller's queue of object keys to reconcile, with client-go's
// rate-limiting work queue semantics:
//   - de-duplicating: a key added while already queued is queued once;
//   - a key being processed is never handed to a second worker: added again meanwhile,
//     it is marked dirty and re-queued when the first worker calls Done;
//   - AddAfter delays a key (the earliest pending time wins); AddRateLimited delays it by
//     the rate limiter (per-key exponential backoff, max'd with an overall token bucket);
//     Forget resets the key's backoff after a success;
//   - ShutDown stops accepting keys; Get hands out what is still queued, then returns
//     nullopt; ShutDownWithDrain also waits (up to a deadline) for keys in processing.
// Thread-safe. Time comes from a Clock so tests use a FakeClock.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "operator/controllerkit/clock.h"
#include "operator/controllerkit/rate_limiter.h"

namespace headroom::controllerkit {

class WorkQueue {
 public:
  // Defaults: the real clock and DefaultControllerRateLimiter.
  explicit WorkQueue(std::shared_ptr<Clock> clock = nullptr, std::unique_ptr<RateLimiter> limiter = nullptr);

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is ready; nullopt once shut down with nothing left queued.
  std::optional<std::string> Get();
  // Does not block: a ready key (due delayed keys included) or nullopt.
  std::optional<std::string> TryGet();
  void Done(const std::string& key);

  void ShutDown();
  // ShutDown, then wait until every handed-out key is Done or `timeout` passes. True when
  // everything in flight finished.
  bool ShutDownWithDrain(std::chrono::milliseconds timeout);
  bool shutting_down() const;

  size_t Len() const;      // keys ready to hand out
  size_t Waiting() const;  // keys delayed into the future
  size_t Processing() const;

 private:
  void AddLocked(const std::string& key);
  // Moves delayed keys whose time has come into the queue; returns the next due time.
  std::optional<Clock::TimePoint> PromoteDueLocked();
  std::optional<std::string> PopLocked();

  std::shared_ptr<Clock> clock_;
  std::unique_ptr<RateLimiter> limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;                      // needs processing (queued, or re-added while processing)
  std::set<std::string> processing_;                 // handed out, not yet Done
  std::map<std::string, Clock::TimePoint> waiting_;  // delayed key -> when it is due
  // The same keys by due time: promoting what is due costs the keys promoted, not every
  // delayed key (a running job is requeued every few seconds, so all of them wait here).
  std::set<std::pair<Clock::TimePoint, std::string>> due_order_;
  bool shutting_down_ = false;
};

}  // namespace headroom::controllerkit
