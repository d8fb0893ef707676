// Shared by the local_* tests: the fake worker's path and small job specs for it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/spec/training_job.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::local::testing {

inline std::string FakeWorkerPath() { return std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-fake-worker"; }

using headroom::testing::TempDir;

struct JobShape {
  std::string name = "fake";
  int workers = 1;
  int max_workers = 4;
  int steps = 12;
  std::string memory = "256Mi";
  std::string leak = "0";
  int checkpoint_every = 5;
  bool guard = true;
  double threshold = 0.85;
  int max_restarts = 5;
  int micro_batch = 32;
  int ranks_per_pod = 1;
};

inline spec::TrainingJob MakeJob(const JobShape& s) {
  std::ostringstream y;
  y << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: " << s.name << "}\n"
    << "spec:\n  workers: " << s.workers << "\n  ranksPerPod: " << s.ranks_per_pod
    << "\n  minWorkers: 1\n  maxWorkers: " << s.max_workers << "\n"
    << "  resources: {cpu: \"1\", memory: " << s.memory << ", gpus: 0}\n"
    << "  model: {preset: tiny}\n  task: {name: reverse, digits: 3, seed: 1}\n"
    << "  grpo: {steps: " << s.steps << ", promptsPerStep: 8, groupSize: 4, maxPromptLength: 8, "
    << "maxResponseLength: 6, microBatchSize: " << s.micro_batch << ", klCoef: 0.0}\n"
    << "  sharding: {stage: 1}\n  checkpoint: {everySteps: " << s.checkpoint_every << ", keep: 2}\n"
    << "  memoryGuard: {enabled: " << (s.guard ? "true" : "false") << ", hostThreshold: " << s.threshold
    << ", horizonSteps: 2, maxRestarts: " << s.max_restarts << "}\n"
    << "  debug: {hostLeakBytesPerStep: " << s.leak << "}\n";
  spec::ParseResult parsed = spec::ParseTrainingJob(y.str());
  if (!parsed.ok()) {
    std::string all;
    for (const auto& e : parsed.errors) all += e.ToString() + "\n";
    ADD_FAILURE() << "test job does not parse:\n" << all << y.str();
    return {};
  }
  return *parsed.job;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Fails the test (rather than skipping it) when the fake worker was not built: these
// tests must run everywhere.
#define REQUIRE_FAKE_WORKER()                                                          \
  ASSERT_EQ(access(::headroom::local::testing::FakeWorkerPath().c_str(), X_OK), 0)     \
      << "build the headroom-fake-worker target (tests/helpers/fake_worker): missing " \
      << ::headroom::local::testing::FakeWorkerPath()

}  // namespace headroom::local::testing
