// Test support: wait for something another thread or process makes true.
#pragma once

#include <chrono>
#include <thread>

namespace headroom::testing {

// Polls pred() every `poll` until it holds or `timeout` has passed; true when it held.
// The last look is taken after the deadline, so a condition that became true while the
// test slept is not reported as a timeout.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(10000),
                std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(poll);
  }
  return pred();
}

}  // namespace headroom::testing
