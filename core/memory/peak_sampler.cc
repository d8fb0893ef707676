#include "core/memory/peak_sampler.h"

#include <algorithm>
#include <exception>

namespace headroom::memory {

PeakSampler::PeakSampler(Reader reader, std::chrono::milliseconds period)
    : reader_(std::move(reader)), period_(std::max(period, std::chrono::milliseconds(1))) {}

PeakSampler::~PeakSampler() { Stop(); }

void PeakSampler::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PeakSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeakSampler::Sample() {
  int64_t v = 0;
  try {
    v = reader_();
  } catch (const std::exception&) {
    return;  // a transient read failure loses one tick, not the step
  }
  samples_.fetch_add(1, std::memory_order_relaxed);
  int64_t prev = peak_.load(std::memory_order_relaxed);
  while (v > prev && !peak_.compare_exchange_weak(prev, v, std::memory_order_relaxed)) {
  }
}

void PeakSampler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Sample();
    lock.lock();
    cv_.wait_for(lock, period_, [this] { return stop_; });
  }
}

int64_t PeakSampler::TakePeak() {
  Sample();
  return peak_.exchange(0, std::memory_order_relaxed);
}

void PeakSampler::Reset() { peak_.store(0, std::memory_order_relaxed); }

}  // namespace headroom::memory
