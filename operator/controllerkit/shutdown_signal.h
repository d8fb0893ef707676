// ShutdownSignal: turns SIGTERM and SIGINT into an orderly stop. The first signal sets a
// flag and wakes everyone waiting (the operator then stops its queue, lets reconciles in
// flight finish within a deadline and releases its lease); a second signal exits at once
// with status 1, as client-go's signal handler does, for an operator that will not stop.
// The handler only writes to a pipe; a thread turns that into the condition variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace headroom::controllerkit {

class ShutdownSignal {
 public:
  // Installs the handlers (once per process) and returns the process-wide instance.
  static ShutdownSignal& Install();

  bool requested() const;
  // Requests shutdown without a signal (tests, fatal errors elsewhere).
  void Request();
  void Wait();
  // True when shutdown was requested within the timeout.
  bool WaitFor(std::chrono::milliseconds timeout);
  // Signals received so far (tests).
  int signals_received() const;

 private:
  ShutdownSignal();
  void Watch();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
  std::thread watcher_;
};

}  // namespace headroom::controllerkit
