// Shared by the runtime_* tests: a small job, deterministic reconciler options, and
// scripted observations of one generation (no processes, no pods, no clocks).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/exit_codes.h"
#include "core/protocol/step_record.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"
#include "operator/runtime/job_reconciler.h"
#include "operator/runtime/worker_backend.h"

namespace headroom::runtime::testing {

inline spec::TrainingJob MakeJob(int workers = 1) {
  spec::TrainingJob job;
  job.metadata.name = "unit";
  job.spec.workers = workers;
  job.spec.min_workers = 1;
  job.spec.max_workers = 4;
  job.spec.resources.memory = "1Gi";
  job.spec.resources.memory_bytes = 1LL << 30;
  job.spec.grpo.steps = 20;
  job.spec.grpo.prompts_per_step = 8;
  job.spec.grpo.micro_batch_size = 32;
  job.spec.memory_guard.max_restarts = 3;
  job.spec.sharding.stage = 1;
  return job;
}

inline ReconcilerOptions Options(bool guard = true) {
  ReconcilerOptions o;
  o.guard_enabled = guard;
  o.wall_clock = [] { return std::string("2026-01-01T00:00:00Z"); };
  o.peer_exit_timeout = std::chrono::milliseconds(1000);
  return o;
}

// Builds observations of one generation.
struct Script {
  int generation = 1;
  int ranks = 1;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

  Observation Running(std::vector<int64_t> steps = {}, int64_t host = 100 << 20) const {
    Observation o;
    o.generation = generation;
    o.now = t0;
    for (int r = 0; r < ranks; ++r) o.ranks.push_back({r, true, std::nullopt});
    for (int64_t s : steps) {
      for (int r = 0; r < ranks; ++r) {
        protocol::StepRecord rec;
        rec.rank = r;
        rec.generation = generation;
        rec.step = s;
        rec.reward_mean = 0.1 * static_cast<double>(s);
        rec.host_bytes = host + s * (8 << 20);
        rec.host_limit_bytes = 1LL << 30;
        rec.host_growth_bytes_per_step = 8 << 20;  // the worker's own forecast of that rise
        o.new_steps.push_back(rec);
      }
    }
    return o;
  }
  Observation Ended(std::vector<RankExit> exits, std::optional<int64_t> checkpoint = std::nullopt) const {
    Observation o = Running();
    for (size_t r = 0; r < exits.size(); ++r) {
      o.ranks[r].running = false;
      o.ranks[r].exit = exits[r];
    }
    o.checkpoint_step = checkpoint;
    return o;
  }
};

inline RankExit Exit(int code, std::string message = "", bool oom = false) {
  return RankExit{code, oom, protocol::ExitReason(code, oom), std::move(message), ""};
}

}  // namespace headroom::runtime::testing
