// Per-step peak of a memory reading, sampled on a cheap background timer.
//
// End-of-step numbers miss the spike inside a step (activations, generation buffers)
// that actually gets a process killed, and kernel peak counters are not always there or
// resettable (v2 memory.peak is per cgroup and resettable only on new kernels; v1's is
// shared by the cgroup). PeakSampler calls a reader every `period` on its own thread and
// keeps the maximum since the last TakePeak()/Reset().
//
// Contract: Start() launches the thread, Stop() (and the destructor) joins it. The reader
// must be thread-safe with respect to itself only (it is called from one thread). A reader
// that throws is ignored for that tick. TakePeak() returns the max of everything sampled
// since the last reset *and* one fresh reading taken inside the call, then resets, so a
// step shorter than the period still gets a value.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "core/base/non_copyable.h"

namespace headroom::memory {

class PeakSampler : NonCopyable {
 public:
  using Reader = std::function<int64_t()>;

  PeakSampler(Reader reader, std::chrono::milliseconds period = std::chrono::milliseconds(5));
  ~PeakSampler();

  void Start();
  void Stop();
  // Max since the last reset (including a reading taken now); then resets.
  int64_t TakePeak();
  // Forgets the max so far (start of a step).
  void Reset();
  // How many samples the thread took (for tests and the bench).
  int64_t samples() const { return samples_.load(); }

 private:
  void Loop();
  void Sample();

  Reader reader_;
  std::chrono::milliseconds period_;
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> samples_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace headroom::memory
