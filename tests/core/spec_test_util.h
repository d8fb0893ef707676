// Helpers shared by the spec tests: a known-good job to mutate, and error paths.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/spec/training_job.h"

namespace headroom::spec::testing_util {

// A complete, valid job; tests break one thing at a time.
inline const char* kGoodJob = R"(apiVersion: headroom.dev/v1alpha1
kind: TrainingJob
metadata:
  name: addition-tiny
spec:
  workers: 2
  minWorkers: 1
  maxWorkers: 8
  image: headroom-worker:0.1.0
  resources: {cpu: "2", memory: 4Gi, gpus: 0}
  model: {preset: tiny}
  task: {name: addition, digits: 3, seed: 1}
  grpo:
    steps: 200
    promptsPerStep: 32
    groupSize: 8
    maxPromptLength: 16
    maxResponseLength: 8
    microBatchSize: 64
    updatesPerStep: 1
    learningRate: 3.0e-4
    clipLow: 0.2
    clipHigh: 0.28
    klCoef: 0.01
    lossAggregation: token-mean
    temperature: 1.0
  sharding: {stage: 2, offloadParams: false, offloadOptimizer: false}
  checkpoint: {everySteps: 50, keep: 2, volume: ""}
  memoryGuard:
    enabled: true
    hostThreshold: 0.90
    gpuThreshold: 0.92
    horizonSteps: 2
    maxRestarts: 10
    actions: [restart, reshard, shrinkMicroBatch, disableOffload]
  debug: {hostLeakBytesPerStep: 0, gpuLeakBytesPerStep: 0}
)";

// kGoodJob with the first occurrence of `from` replaced by `to` (which must exist).
inline std::string GoodJobWith(const std::string& from, const std::string& to) {
  std::string text = kGoodJob;
  const size_t at = text.find(from);
  if (at == std::string::npos) return "<<" + from + " not found in kGoodJob>>";
  return text.replace(at, from.size(), to);
}

inline std::set<std::string> ErrorPaths(const ParseResult& r) {
  std::set<std::string> paths;
  for (const SpecError& e : r.errors) paths.insert(e.path);
  return paths;
}

inline std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const SpecError& e : r.errors) out += e.ToString() + "\n";
  return out;
}

}  // namespace headroom::spec::testing_util
