// A stop request for a background loop: the loop tests stopped() and waits between tries
// with SleepUnlessStopped(), which Stop() from any thread ends at once. The flag is set and
// the sleepers woken under one lock, so a sleeper that has just found the flag clear cannot
// miss the wake-up and sleep out its whole delay.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/base/non_copyable.h"

namespace headroom {

class StopFlag : NonCopyable {
 public:
  StopFlag() = default;

  // Sets the flag and wakes every sleeper. False when it was set already.
  bool Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      stop_ = true;
    }
    cv_.notify_all();
    return true;
  }

  bool stopped() const { return stop_.load(); }

  // Waits `delay` or until Stop(), whichever comes first: true when the whole delay passed.
  bool SleepUnlessStopped(std::chrono::milliseconds delay) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, delay, [this] { return stop_.load(); });
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace headroom
