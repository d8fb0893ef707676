// PeakSampler: the in-step maximum of a reading, sampled on a background timer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/memory/host_memory.h"
#include "core/memory/peak_sampler.h"

namespace headroom::memory {
namespace {

using std::chrono::milliseconds;

TEST(PeakSamplerTest, CatchesASpikeBetweenStepBoundaries) {
  std::atomic<int64_t> value{100};
  PeakSampler sampler([&] { return value.load(); }, milliseconds(1));
  sampler.Start();
  sampler.Reset();
  value = 5000;  // a short spike inside the "step"
  std::this_thread::sleep_for(milliseconds(30));
  value = 200;  // back down before the step ends
  EXPECT_EQ(sampler.TakePeak(), 5000);
  // TakePeak resets: the next window starts from what is read now.
  EXPECT_EQ(sampler.TakePeak(), 200);
  sampler.Stop();
  EXPECT_GT(sampler.samples(), 5);
}

TEST(PeakSamplerTest, TakePeakWithoutTheThreadStillReads) {
  int64_t value = 42;
  PeakSampler sampler([&] { return value; });
  EXPECT_EQ(sampler.TakePeak(), 42);
}

TEST(PeakSamplerTest, AReaderThatThrowsLosesOnlyThatTick) {
  std::atomic<int> calls{0};
  PeakSampler sampler(
      [&]() -> int64_t {
        if (calls.fetch_add(1) % 2 == 0) throw std::runtime_error("transient");
        return 7;
      },
      milliseconds(1));
  sampler.Start();
  std::this_thread::sleep_for(milliseconds(20));
  sampler.Stop();
  EXPECT_EQ(sampler.TakePeak(), 7);
}

TEST(PeakSamplerTest, SeesARealAllocationThroughTheHostProbe) {
  HostMemoryProbe probe;
  PeakSampler sampler([&] { return probe.ReadWorkingSet(); }, milliseconds(2));
  sampler.Start();
  const int64_t before = sampler.TakePeak();
  {
    std::vector<char> block(64 << 20);
    for (size_t i = 0; i < block.size(); i += 4096) block[i] = 1;  // touch: make it resident
    std::this_thread::sleep_for(milliseconds(40));
    asm volatile("" : : "r"(block.data()) : "memory");
  }
  const int64_t peak = sampler.TakePeak();
  sampler.Stop();
  EXPECT_GE(peak, before + (48 << 20)) << "before " << before << " peak " << peak;
}

}  // namespace
}  // namespace headroom::memory
