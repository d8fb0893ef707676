// Clock: the time source of the work queue, rate limiters and leader election, so tests
// drive time by hand (FakeClock) instead of sleeping.
#pragma once

#include <chrono>
#include <mutex>

namespace headroom::controllerkit {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class RealClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

// Starts at an arbitrary fixed point; moves only when told.
class FakeClock : public Clock {
 public:
  TimePoint Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_ = TimePoint{} + std::chrono::hours(1000);
};

}  // namespace headroom::controllerkit
